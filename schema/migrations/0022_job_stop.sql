-- A job-wide stop through the database (`coexist ctl --job J stop`): every
-- running run of the job, on any host, exclusive or shared, reads its
-- row's stop request in its once-a-second heartbeat and stops claiming as
-- a `ctl stop` on its control socket would (stop_reason job_stop). A run
-- that starts afterwards is not stopped: the request is the running runs'.
ALTER TABLE coexist.runs ADD COLUMN stop_requested_at timestamptz,
                         ADD COLUMN stop_requested_by text;

-- Marks the job's running runs that have no stop request yet, with one
-- job_stop_requested event per run (actor: who asked); returns their ids.
-- A run asked twice keeps the first request.
CREATE FUNCTION coexist.request_job_stop(job text, actor text)
RETURNS SETOF bigint
LANGUAGE sql AS $$
  WITH stopped AS (
    UPDATE coexist.runs ru
       SET stop_requested_at = clock_timestamp(), stop_requested_by = request_job_stop.actor
     WHERE ru.job = request_job_stop.job AND ru.outcome = 'running'
       AND ru.stop_requested_at IS NULL
    RETURNING ru.run_id),
  audited AS (
    INSERT INTO coexist.events (kind, job, run_id, actor)
    SELECT 'job_stop_requested', request_job_stop.job, run_id, request_job_stop.actor
      FROM stopped)
  SELECT run_id FROM stopped ORDER BY run_id
$$;
