-- Shared runs of one job (batch.runs: shared): any number of processes, on
-- any hosts, work one job's queue at once. Each is a run with its own runs
-- row and run lock; the claim's FOR UPDATE SKIP LOCKED keeps two runs off
-- one item, and the key order (0007, 0015, 0019: an item waits while an
-- earlier pending item shares a key, and a claimed item stays pending until
-- its chunk commits) keeps two runs off one key: a run never meets another
-- run's row lock on its items' records, so it never takes one for an
-- online user's. No claims table or per-key lock is needed for that.

-- The job's lock taken shared: shared runs of a job hold it side by side;
-- an exclusive run (try_lock_job) and shared ones never do.
CREATE FUNCTION coexist.try_lock_job_shared(job text) RETURNS boolean LANGUAGE sql AS
  $$ SELECT pg_try_advisory_lock_shared(coexist.job_lock_class(), hashtext(job)) $$;

-- 0015's, locking only the rows of the runs whose process is gone (their
-- run lock is free) instead of every running run's: a shared run, which
-- sweeps at its start and then once a second, does not hold up its live
-- siblings' chunks (a chunk of a version that still holds the runs row FOR
-- KEY SHARE waits as before).
CREATE OR REPLACE FUNCTION coexist.abandon_stale_runs(job text)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  -- Not the caller's own run: its session holds that run lock, and a
  -- session's advisory locks are its own to take again (a shared run sweeps
  -- while it works, batch/runner.cpp).
  FOR r IN SELECT ru.run_id FROM coexist.runs ru
            WHERE ru.job = abandon_stale_runs.job AND ru.outcome = 'running'
              AND ru.backend_pid IS DISTINCT FROM pg_backend_pid()
            ORDER BY ru.run_id LOOP
    IF pg_try_advisory_xact_lock(coexist.run_lock_class(), (r.run_id % 2147483647)::integer) THEN
      PERFORM pg_advisory_xact_lock(coexist.run_fence_class(), (r.run_id % 2147483647)::integer);
      PERFORM 1 FROM coexist.runs ru WHERE ru.run_id = r.run_id AND ru.outcome = 'running'
          FOR UPDATE;
      CONTINUE WHEN NOT FOUND;  -- another starting run marked it meanwhile
      UPDATE coexist.runs SET outcome = 'abandoned', ended_at = clock_timestamp()
       WHERE run_id = r.run_id;
      INSERT INTO coexist.events (kind, job, run_id, actor)
      VALUES ('run_abandoned', abandon_stale_runs.job, r.run_id, 'coexist');
      RETURN NEXT r.run_id;
    END IF;
  END LOOP;
END
$$;
