-- One run per job at a time, across hosts: a run holds
-- pg_advisory_lock(coexist.job_lock_class(), hashtext(job)) on its control
-- connection from before it claims anything until it ends. A second
-- `batch run` of the same job (a slow previous run, a second cron host)
-- fails pg_try_advisory_lock and exits at once; the key dies with the
-- session, so a killed run never blocks the next one.
CREATE FUNCTION coexist.job_lock_class() RETURNS integer LANGUAGE sql IMMUTABLE AS
  $$ SELECT 1668244857 $$;  -- "coex" + 1; run_lock_class() is "coex"

-- Takes the job's lock for this session; false when another session holds it.
CREATE FUNCTION coexist.try_lock_job(job text) RETURNS boolean LANGUAGE sql AS
  $$ SELECT pg_try_advisory_lock(coexist.job_lock_class(), hashtext(job)) $$;
