-- coexist.lock_job_finish: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- lock_job_finish(text), defined by migration 0024.
CREATE FUNCTION coexist.lock_job_finish(job text) RETURNS void LANGUAGE sql AS
  $$ SELECT pg_advisory_xact_lock(coexist.finish_lock_class(), hashtext(job)) $$;
