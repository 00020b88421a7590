-- coexist.try_lock_job_shared: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- try_lock_job_shared(text), defined by migration 0021.
--
-- The job's lock taken shared: shared runs of a job hold it side by side;
-- an exclusive run (try_lock_job) and shared ones never do.
CREATE FUNCTION coexist.try_lock_job_shared(job text) RETURNS boolean LANGUAGE sql AS
  $$ SELECT pg_try_advisory_lock_shared(coexist.job_lock_class(), hashtext(job)) $$;
