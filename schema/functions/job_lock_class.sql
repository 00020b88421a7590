-- coexist.job_lock_class: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- job_lock_class(), defined by migration 0004.
--
-- One run per job at a time, across hosts: a run holds
-- pg_advisory_lock(coexist.job_lock_class(), hashtext(job)) on its control
-- connection from before it claims anything until it ends. A second
-- `batch run` of the same job (a slow previous run, a second cron host)
-- fails pg_try_advisory_lock and exits at once; the key dies with the
-- session, so a killed run never blocks the next one.
CREATE FUNCTION coexist.job_lock_class() RETURNS integer LANGUAGE sql IMMUTABLE AS
  $$ SELECT 1668244857 $$;
