-- A job-wide pause kept in the database (`coexist jobs pause J`): every
-- running run of the job, on any host, exclusive or shared, reads it in its
-- once-a-second heartbeat and holds its workers after the chunk in hand,
-- as the control socket's `pause` would (throttle reason job_paused); a run
-- that starts while the job is paused holds from its start. One row per
-- paused job; `coexist jobs resume J` deletes it.
CREATE TABLE coexist.job_pauses (
  job       text        PRIMARY KEY,
  paused_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  paused_by text        NOT NULL,                       -- the actor: OS user and host
  db_user   text        NOT NULL DEFAULT session_user,  -- the role that paused it
  reason    text        NOT NULL CHECK (reason <> '')
);

-- Pauses the job unless it is paused already, with one job_paused event
-- (actor, details: reason and db_user); true when it paused it. A second
-- pause keeps the first one's row and writes nothing.
CREATE FUNCTION coexist.pause_job(job text, actor text, reason text)
RETURNS boolean
LANGUAGE sql AS $$
  WITH paused AS (
    INSERT INTO coexist.job_pauses (job, paused_by, reason)
    VALUES (pause_job.job, pause_job.actor, pause_job.reason)
    ON CONFLICT ON CONSTRAINT job_pauses_pkey DO NOTHING
    RETURNING job_pauses.job, job_pauses.db_user),
  audited AS (
    INSERT INTO coexist.events (kind, job, actor, details)
    SELECT 'job_paused', p.job, pause_job.actor,
           jsonb_build_object('reason', pause_job.reason, 'db_user', p.db_user)
      FROM paused p)
  SELECT count(*) = 1 FROM paused
$$;

-- Resumes the paused job, with one job_resumed event (actor, details:
-- db_user, the pause's reason and how long it held); true when it was
-- paused. Resuming a job that is not paused writes nothing.
CREATE FUNCTION coexist.resume_job(job text, actor text)
RETURNS boolean
LANGUAGE sql AS $$
  WITH resumed AS (
    DELETE FROM coexist.job_pauses p
     WHERE p.job = resume_job.job
    RETURNING p.job, p.reason, p.paused_by, p.paused_at),
  audited AS (
    INSERT INTO coexist.events (kind, job, actor, details)
    SELECT 'job_resumed', r.job, resume_job.actor,
           jsonb_build_object('db_user', session_user, 'paused_reason', r.reason,
                              'paused_by', r.paused_by,
                              'paused_seconds',
                              round(extract(epoch FROM clock_timestamp() - r.paused_at)::numeric, 3))
      FROM resumed r)
  SELECT count(*) = 1 FROM resumed
$$;
