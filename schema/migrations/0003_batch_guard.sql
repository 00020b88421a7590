-- The database side of the batch/online coexistence rules, so that any
-- online application, in any language, gets the same guarantees:
--  * a guard trigger on the target refuses online writes during an active
--    read-only batch window (CX003), to rows the batch owns (CX004), and to
--    rows another owner holds a live edit lock on (CX005);
--  * the edit-lock holder's save passes once check_edit_lock saw its token;
--  * releasing an edit lock NOTIFYs waiting batches; revoking one is audited
--    and NOTIFYs the owner;
--  * runs whose process died are found through their advisory lock.
-- docs/database-api.md describes every function, trigger and SQLSTATE.

-- Batch windows of time_window jobs, written by the batch when it starts (and
-- by `coexist db install --config`). Only mode 'read_only' refuses writes.
CREATE TABLE coexist.windows (
  job        text     NOT NULL,
  target     regclass NOT NULL,
  position   integer  NOT NULL,
  time_zone  text     NOT NULL,
  -- ISO weekdays the window starts on: 1 = Monday .. 7 = Sunday.
  weekdays   integer[] NOT NULL,
  start_time time     NOT NULL,
  -- end_time <= start_time: the window ends the next day (22:00-02:00);
  -- equal times mean 24 hours.
  end_time   time     NOT NULL,
  -- read_only: online writes refused while active; allow: online writes pass.
  mode       text     NOT NULL CHECK (mode IN ('read_only', 'allow')),
  PRIMARY KEY (job, target, position)
);
CREATE INDEX windows_target ON coexist.windows (target);

-- Whether a window is active at `at`, evaluated in the window's time zone.
CREATE FUNCTION coexist.window_active(time_zone text, weekdays integer[], start_time time,
                                      end_time time, at timestamptz DEFAULT clock_timestamp())
RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT CASE
           WHEN start_time < end_time THEN
             l::time >= start_time AND l::time < end_time
             AND extract(isodow FROM l)::integer = ANY (weekdays)
           ELSE
             (l::time >= start_time AND extract(isodow FROM l)::integer = ANY (weekdays))
             OR (l::time < end_time
                 AND extract(isodow FROM l - interval '1 day')::integer = ANY (weekdays))
         END
    FROM (SELECT at AT TIME ZONE time_zone) AS local(l);
$$;

-- Rows a status_partition run has taken over (owner column set to 'batch')
-- and not yet handed back; a crashed run's rows are handed back by the next.
CREATE TABLE coexist.takeovers (
  run_id     bigint   NOT NULL,
  item_id    bigint   NOT NULL PRIMARY KEY,
  target     regclass NOT NULL,
  record_key bigint   NOT NULL
);
CREATE INDEX takeovers_run ON coexist.takeovers (run_id);

-- The guard trigger, generated per target with the column names spelled out
-- (like the version trigger). The batch's connections say who they are with
-- SET coexist.actor = 'batch' and pass after one setting lookup; that is a
-- cooperative protocol, not a security boundary: applications must not set it.
CREATE FUNCTION coexist.install_guard_trigger(target regclass, key_column name,
                                              owner_column name DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $install$
DECLARE
  fn text := format('coexist.%I', 'guard:' || target::text);
  owner_check text := '';
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute
                  WHERE attrelid = target AND attname = key_column AND NOT attisdropped) THEN
    RAISE EXCEPTION 'table % has no column %', target, key_column USING ERRCODE = 'undefined_column';
  END IF;
  IF owner_column IS NOT NULL THEN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = target AND attname = owner_column AND NOT attisdropped) THEN
      RAISE EXCEPTION 'table % has no column %', target, owner_column
        USING ERRCODE = 'undefined_column';
    END IF;
    owner_check := format($o$
      IF OLD.%1$I = 'batch' THEN
        RAISE EXCEPTION 'record %% of %% is being processed by a batch', OLD.%2$I, TG_RELID::regclass
          USING ERRCODE = 'CX004',
                HINT = 'the batch hands the record back when it is done; try again later.';
      END IF;$o$, owner_column, key_column);
  END IF;
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION %1$s() RETURNS trigger LANGUAGE plpgsql AS $body$
    DECLARE
      w record;
      holder text;
      held_token uuid;
    BEGIN
      IF current_setting('coexist.actor', true) = 'batch' THEN
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
      END IF;
      SELECT * INTO w FROM coexist.windows cw
       WHERE cw.target = TG_RELID::regclass AND cw.mode = 'read_only'
         AND coexist.window_active(cw.time_zone, cw.weekdays, cw.start_time, cw.end_time)
       LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'writes to %% are refused while batch job %% runs', TG_RELID::regclass, w.job
          USING ERRCODE = 'CX003',
                DETAIL = format('window %%s-%%s %%s', w.start_time, w.end_time, w.time_zone),
                HINT = 'the table is read-only during the batch window; try again after it.';
      END IF;
      IF TG_OP = 'INSERT' THEN RETURN NEW; END IF;
      %2$s
      SELECT l.owner, l.token INTO holder, held_token FROM coexist.edit_locks l
       WHERE l.target = TG_RELID::regclass AND l.record_key = OLD.%3$I
         AND l.expires_at > clock_timestamp();
      IF FOUND AND strpos(coalesce(current_setting('coexist.edit_lock_tokens', true), ''),
                          held_token::text) = 0 THEN
        RAISE EXCEPTION 'record %% of %% is being edited by %%', OLD.%3$I, TG_RELID::regclass, holder
          USING ERRCODE = 'CX005',
                HINT = 'acquire the edit lock (coexist.acquire_edit_lock) before writing.';
      END IF;
      IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
      RETURN NEW;
    END $body$$f$, fn, owner_check, key_column);
  -- Replacing the function is enough when the trigger exists: no table lock,
  -- so a batch starting while online users work never queues behind them.
  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = target AND tgname = 'coexist_guard') THEN
    EXECUTE format('CREATE TRIGGER coexist_guard BEFORE INSERT OR UPDATE OR DELETE ON %s '
                   'FOR EACH ROW EXECUTE FUNCTION %s()', target, fn);
  END IF;
END
$install$;

-- As in 0002, and it also records the token in the transaction-local setting
-- coexist.edit_lock_tokens, which lets the holder's own save through the
-- guard trigger's CX005 check.
CREATE OR REPLACE FUNCTION coexist.check_edit_lock(target regclass, record_key bigint, token uuid)
RETURNS void
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  PERFORM 1 FROM coexist.edit_locks l
    WHERE l.target = check_edit_lock.target AND l.record_key = check_edit_lock.record_key
      AND l.token = check_edit_lock.token AND l.expires_at > clock_timestamp()
    FOR SHARE;
  IF NOT FOUND THEN
    PERFORM coexist.raise_edit_lock_lost(target, record_key, token);
  END IF;
  PERFORM set_config('coexist.edit_lock_tokens',
                     coalesce(current_setting('coexist.edit_lock_tokens', true), '') || token::text
                       || ',', true);
END
$$;

-- As in 0002, plus NOTIFY coexist_edit_lock_released 'target:record_key' so
-- that a waiting online_priority batch wakes up without polling.
CREATE OR REPLACE FUNCTION coexist.release_edit_lock(target regclass, record_key bigint, token uuid)
RETURNS boolean
LANGUAGE sql AS $$
  WITH gone AS (
    DELETE FROM coexist.edit_locks l
     WHERE l.target = release_edit_lock.target AND l.record_key = release_edit_lock.record_key
       AND l.token = release_edit_lock.token
    RETURNING l.target, l.record_key)
  SELECT count(pg_notify('coexist_edit_lock_released', target::text || ':' || record_key)) > 0
    FROM gone;
$$;

CREATE OR REPLACE FUNCTION coexist.release_owner_edit_locks(owner text)
RETURNS integer
LANGUAGE sql AS $$
  WITH gone AS (DELETE FROM coexist.edit_locks l WHERE l.owner = release_owner_edit_locks.owner
                RETURNING l.target, l.record_key)
  SELECT count(pg_notify('coexist_edit_lock_released', target::text || ':' || record_key))::integer
    FROM gone;
$$;

-- An administrator releases any lock; audited as edit_lock_released_by_admin.
CREATE FUNCTION coexist.admin_release_edit_lock(target regclass, record_key bigint, actor text)
RETURNS boolean
LANGUAGE sql AS $$
  WITH gone AS (
    DELETE FROM coexist.edit_locks l
     WHERE l.target = admin_release_edit_lock.target
       AND l.record_key = admin_release_edit_lock.record_key
    RETURNING l.target, l.record_key, l.owner, l.token),
  audit AS (
    INSERT INTO coexist.events (kind, target, record_key, actor, subject, details)
    SELECT 'edit_lock_released_by_admin', target, record_key, admin_release_edit_lock.actor, owner,
           jsonb_build_object('token', token)
      FROM gone
    RETURNING 1)
  SELECT count(pg_notify('coexist_edit_lock_released', target::text || ':' || record_key)) > 0
    FROM gone;
$$;

-- batch_priority: removes a live edit lock, audits it as edit_lock_revoked
-- (so the owner's next check_edit_lock reports CX002 "revoked by <actor>")
-- and NOTIFYs coexist_edit_lock_revoked with a JSON payload naming the owner.
-- Returns the evicted owner, or NULL when there was no live lock.
CREATE FUNCTION coexist.revoke_edit_lock(target regclass, record_key bigint, actor text,
                                         job text DEFAULT NULL, run_id bigint DEFAULT NULL,
                                         item_id bigint DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  evicted text;
  evicted_token uuid;
BEGIN
  DELETE FROM coexist.edit_locks l
   WHERE l.target = revoke_edit_lock.target AND l.record_key = revoke_edit_lock.record_key
     AND l.expires_at > clock_timestamp()
  RETURNING l.owner, l.token INTO evicted, evicted_token;
  IF evicted IS NULL THEN
    RETURN NULL;
  END IF;
  INSERT INTO coexist.events (kind, job, run_id, item_id, target, record_key, actor, subject, details)
  VALUES ('edit_lock_revoked', job, run_id, item_id, target, record_key, actor, evicted,
          jsonb_build_object('token', evicted_token));
  PERFORM pg_notify('coexist_edit_lock_revoked',
                    jsonb_build_object('owner', evicted, 'token', evicted_token,
                                       'target', target::text, 'record_key', record_key,
                                       'by', actor)::text);
  RETURN evicted;
END
$$;

-- A run holds pg_advisory_lock(coexist.run_lock_class(), run_id) on its
-- control connection for as long as it lives; the key dies with the session.
CREATE FUNCTION coexist.run_lock_class() RETURNS integer LANGUAGE sql IMMUTABLE AS
  $$ SELECT 1668244856 $$;  -- "coex"

-- Marks the job's runs whose process is gone (their advisory lock is free)
-- as abandoned, and returns their ids. Their claims were row locks, released
-- when their transactions rolled back, so their items are queued again.
CREATE FUNCTION coexist.abandon_stale_runs(job text)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT ru.run_id FROM coexist.runs ru
            WHERE ru.job = abandon_stale_runs.job AND ru.outcome = 'running'
            FOR UPDATE SKIP LOCKED LOOP
    IF pg_try_advisory_xact_lock(coexist.run_lock_class(), (r.run_id % 2147483647)::integer) THEN
      UPDATE coexist.runs SET outcome = 'abandoned', ended_at = now() WHERE run_id = r.run_id;
      INSERT INTO coexist.events (kind, job, run_id, actor)
      VALUES ('run_abandoned', abandon_stale_runs.job, r.run_id, 'coexist');
      RETURN NEXT r.run_id;
    END IF;
  END LOOP;
END
$$;
