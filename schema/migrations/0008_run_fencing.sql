-- Fencing a run that lost its control connection. A run's advisory lock
-- lives on its control connection; when that connection dies (the server
-- terminated it, a network cut) the run's workers may still be inside a
-- chunk on their own connections. Each chunk therefore holds its run's row
-- FOR KEY SHARE and goes ahead only while the run is 'running'
-- (batch/queue_sql.cpp: hold_run), and abandon_stale_runs now WAITS for
-- those row locks instead of skipping them: a run is marked abandoned only
-- once no chunk of it is in flight, and a chunk that starts afterwards sees
-- 'abandoned' and stops. So no two runs of a job complete items at the same
-- time, and no run completes items after it was marked abandoned.
-- Callers hold the job's lock (coexist.try_lock_job), so the runs they wait
-- for are those whose control connection is gone; the wait is at most one
-- chunk of theirs (bounded by their statement_timeout).
CREATE OR REPLACE FUNCTION coexist.abandon_stale_runs(job text)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT ru.run_id FROM coexist.runs ru
            WHERE ru.job = abandon_stale_runs.job AND ru.outcome = 'running'
            ORDER BY ru.run_id
            FOR UPDATE LOOP
    IF pg_try_advisory_xact_lock(coexist.run_lock_class(), (r.run_id % 2147483647)::integer) THEN
      -- clock_timestamp(): after the wait, so every item the run completed
      -- has done_at <= ended_at (queue.done_at is clock_timestamp() too).
      UPDATE coexist.runs SET outcome = 'abandoned', ended_at = clock_timestamp()
       WHERE run_id = r.run_id;
      INSERT INTO coexist.events (kind, job, run_id, actor)
      VALUES ('run_abandoned', abandon_stale_runs.job, r.run_id, 'coexist');
      RETURN NEXT r.run_id;
    END IF;
  END LOOP;
END
$$;
