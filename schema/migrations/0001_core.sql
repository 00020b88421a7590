-- coexist core tables: runs, queue, edit_locks, events, and the version
-- trigger installer. See docs/schema.md for the meaning of every column.

CREATE TABLE coexist.runs (
  run_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job          text        NOT NULL,
  policy       text        NOT NULL,
  host         text        NOT NULL,
  pid          integer     NOT NULL,
  started_at   timestamptz NOT NULL DEFAULT now(),
  -- Refreshed while the run works; a running run with an old heartbeat and
  -- no live backend is marked abandoned by the next run of the job.
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  ended_at     timestamptz,
  outcome      text        NOT NULL DEFAULT 'running'
               CHECK (outcome IN ('running', 'succeeded', 'incomplete', 'failed', 'abandoned')),
  claimed      bigint      NOT NULL DEFAULT 0,
  done         bigint      NOT NULL DEFAULT 0,
  deferred     bigint      NOT NULL DEFAULT 0,
  dead         bigint      NOT NULL DEFAULT 0,
  details      jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX runs_job_started ON coexist.runs (job, started_at DESC);

CREATE TYPE coexist.item_state AS ENUM ('queued', 'done', 'deferred', 'dead');

CREATE TABLE coexist.queue (
  item_id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job             text               NOT NULL,
  record_key      bigint             NOT NULL,
  payload         jsonb              NOT NULL DEFAULT '{}',
  state           coexist.item_state NOT NULL DEFAULT 'queued',
  attempts        integer            NOT NULL DEFAULT 0,
  deferrals       integer            NOT NULL DEFAULT 0,
  -- A deferred or retried item is not claimed before this time.
  not_before      timestamptz        NOT NULL DEFAULT '-infinity',
  last_error      text,
  defer_reason    text,
  idempotency_key text,
  run_id          bigint,
  enqueued_at     timestamptz        NOT NULL DEFAULT now(),
  updated_at      timestamptz        NOT NULL DEFAULT now(),
  done_at         timestamptz
);
-- Enqueueing the same idempotency key twice for a job adds one item.
CREATE UNIQUE INDEX queue_job_idempotency_key ON coexist.queue (job, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- What a run claims: queued items and items deferred by an earlier run.
CREATE INDEX queue_claimable ON coexist.queue (job, item_id)
  WHERE state IN ('queued', 'deferred');
CREATE INDEX queue_record ON coexist.queue (record_key);

-- Offline (screen-spanning) pessimistic locks; see 0002_edit_locks.sql.
CREATE TABLE coexist.edit_locks (
  target      regclass    NOT NULL,
  record_key  bigint      NOT NULL,
  owner       text        NOT NULL,
  token       uuid        NOT NULL DEFAULT gen_random_uuid(),
  acquired_at timestamptz NOT NULL DEFAULT now(),
  renewed_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (target, record_key)
);
CREATE INDEX edit_locks_owner ON coexist.edit_locks (owner);
CREATE INDEX edit_locks_expires ON coexist.edit_locks (expires_at);

-- Audit trail: forced unlocks, deferrals, escalations, refusals, releases.
CREATE TABLE coexist.events (
  event_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at         timestamptz NOT NULL DEFAULT now(),
  kind       text        NOT NULL,
  job        text,
  run_id     bigint,
  item_id    bigint,
  target     regclass,
  record_key bigint,
  actor      text,        -- who acted: a run, an admin, a sweep
  subject    text,        -- who was affected: e.g. the evicted lock owner
  details    jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX events_at ON coexist.events (at);
CREATE INDEX events_kind_at ON coexist.events (kind, at);

-- Seed 000: a write path that forgets to bump the version (an admin UPDATE,
-- a bulk batch) silently defeats optimistic locking. So the database bumps
-- it on every UPDATE, whoever writes: NEW.version := OLD.version + 1.
-- One trigger function per target, generated with the column name spelled
-- out, because a generic one (jsonb_populate_record) costs far more per row.
CREATE FUNCTION coexist.install_version_trigger(target regclass, version_column name)
RETURNS void
LANGUAGE plpgsql AS $install$
DECLARE
  fn text := format('coexist.%I', 'bump_version:' || target::text);
  column_type regtype;
BEGIN
  SELECT atttypid::regtype INTO column_type
    FROM pg_attribute
   WHERE attrelid = target AND attname = version_column AND NOT attisdropped;
  IF column_type IS NULL THEN
    RAISE EXCEPTION 'table % has no column %', target, version_column
      USING ERRCODE = 'undefined_column';
  END IF;
  IF column_type NOT IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype) THEN
    RAISE EXCEPTION 'version column %.% is %, not an integer type', target, version_column, column_type
      USING ERRCODE = 'datatype_mismatch',
            HINT = 'timestamps are a poor lock key (seed 002); use an integer version.';
  END IF;
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $body$
    BEGIN
      NEW.%I := OLD.%I + 1;
      RETURN NEW;
    END $body$$f$, fn, version_column, version_column);
  EXECUTE format('DROP TRIGGER IF EXISTS coexist_bump_version ON %s', target);
  EXECUTE format('CREATE TRIGGER coexist_bump_version BEFORE UPDATE ON %s '
                 'FOR EACH ROW EXECUTE FUNCTION %s()', target, fn);
END
$install$;
