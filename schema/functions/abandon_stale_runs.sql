-- coexist.abandon_stale_runs: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- abandon_stale_runs(text), defined by migrations 0003, 0008, 0015, 0021, 0026 and 0029
-- (newest).
--
-- Marks the job's runs whose process is gone (their run lock, held by the
-- run's control connection, is free) as abandoned, and returns their ids
-- (0003). Their claims were row locks, released when their transactions
-- rolled back, so their items are queued again.
--
-- Fencing (0008, 0015): when a run's control connection dies (the server
-- terminated it, a network cut) its workers may still be inside a chunk on
-- their own connections. Each chunk holds the run's fence lock shared and
-- goes ahead only while the run is 'running' (hold_run); this function waits
-- for the fence exclusively before it marks the run, so a run is marked
-- abandoned only once no chunk of it is in flight, and a chunk that starts
-- afterwards sees 'abandoned' and stops: no two runs of a job complete items
-- at the same time, and no run completes items after it was marked
-- abandoned. Callers hold the job's lock (try_lock_job), so the runs they
-- wait for are those whose control connection is gone; the wait is at most
-- one chunk of theirs (bounded by their statement_timeout).
--
-- Only the rows of the runs whose process is gone are locked, not every
-- running run's (0021): a shared run, which sweeps at its start and then
-- once a second, does not hold up its live siblings' chunks.
--
-- Counts (0026, 0029): a run's counts in coexist.runs come from its
-- once-a-second heartbeat, so a run killed between two (or before its
-- first) showed fewer items than it settled. An abandoned run's done and
-- dead counts are taken from what it settled (run_settled: the queue and the
-- done chunks), never lowered. This reads the job's items once per abandoned
-- run: a run is abandoned only after a crash or a kill, so a normal start
-- does not pay for it.
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
      -- The row too: a worker of a version before the fence holds it FOR KEY
      -- SHARE instead (0008), and is waited for here.
      PERFORM 1 FROM coexist.runs ru WHERE ru.run_id = r.run_id AND ru.outcome = 'running'
          FOR UPDATE;
      CONTINUE WHEN NOT FOUND;  -- another starting run marked it meanwhile
      SELECT * INTO settled FROM coexist.run_settled(abandon_stale_runs.job, r.run_id);
      -- clock_timestamp(): after the wait, so every item the run completed
      -- has done_at <= ended_at (queue.done_at is clock_timestamp() too).
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
