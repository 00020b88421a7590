-- coexist.pause_job: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- pause_job(text,text,text), defined by migration 0032.
--
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
