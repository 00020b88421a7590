-- coexist.resume_job: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- resume_job(text,text), defined by migration 0032.
--
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
