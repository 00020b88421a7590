-- coexist.try_lock_job: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- try_lock_job(text), defined by migration 0004.
--
-- Takes the job's lock for this session; false when another session holds it.
CREATE FUNCTION coexist.try_lock_job(job text) RETURNS boolean LANGUAGE sql AS
  $$ SELECT pg_try_advisory_lock(coexist.job_lock_class(), hashtext(job)) $$;
