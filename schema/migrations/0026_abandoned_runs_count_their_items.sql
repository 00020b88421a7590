-- A run's counts in coexist.runs come from its once-a-second heartbeat, so
-- a run killed between two (or before its first) showed fewer items than it
-- settled: `runs list` read done 0 for a run killed after 5,340 items. When
-- a run is marked abandoned, its done and dead counts are taken from the
-- queue (the items it settled carry its run_id), never lowered.
--
-- The count reads the job's items once per abandoned run: a run is
-- abandoned only after a crash or a kill, so this does not slow a normal
-- start.
CREATE OR REPLACE FUNCTION coexist.abandon_stale_runs(job text)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  settled record;
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
      SELECT count(*) FILTER (WHERE q.state = 'done') AS done,
             count(*) FILTER (WHERE q.state = 'dead') AS dead
        INTO settled
        FROM coexist.queue q
       WHERE q.job = abandon_stale_runs.job AND q.run_id = r.run_id;
      UPDATE coexist.runs ru
         SET outcome = 'abandoned', ended_at = clock_timestamp(),
             done = greatest(ru.done, settled.done), dead = greatest(ru.dead, settled.dead)
       WHERE ru.run_id = r.run_id;
      INSERT INTO coexist.events (kind, job, run_id, actor, details)
      VALUES ('run_abandoned', abandon_stale_runs.job, r.run_id, 'coexist',
              jsonb_build_object('done', settled.done, 'dead', settled.dead));
      RETURN NEXT r.run_id;
    END IF;
  END LOOP;
END
$$;
