-- A run that ends reads the job's runs that worked alongside it (shared
-- runs: the job's figures for its summary and metrics). The ends of one
-- job's runs take turns on this transaction-level lock, so the last to end
-- reads every other run's final counts, not a count from before their end.
CREATE FUNCTION coexist.finish_lock_class() RETURNS integer LANGUAGE sql IMMUTABLE AS
  $$ SELECT 1668244859 $$;  -- "coex" + 3; run_fence_class() is "coex" + 2

CREATE FUNCTION coexist.lock_job_finish(job text) RETURNS void LANGUAGE sql AS
  $$ SELECT pg_advisory_xact_lock(coexist.finish_lock_class(), hashtext(job)) $$;
