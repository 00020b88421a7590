-- An install the application never notices.
--
-- 1. The guard trigger runs with its owner's rights. It reads
--    coexist.windows, coexist.edit_locks and coexist.runs; as an invoker's
--    function it failed every UPDATE of an application role that had only
--    the rights it had before coexist (permission denied for schema
--    coexist). Now it is SECURITY DEFINER with a pinned search_path, as
--    PostgreSQL's docs say to write such functions ("Writing SECURITY
--    DEFINER Functions Safely"): every name in it is schema-qualified, and
--    pg_temp comes last so no temporary object can shadow one. The version
--    trigger needs no right (it only assigns NEW) and stays an invoker's
--    function: it fires on the batch's own writes too, where a definer's
--    search_path switch would cost every row.
--
-- 2. A read_only window refuses online writes only while a run of its job
--    is alive (outcome 'running' and a heartbeat within live_run_heartbeat;
--    the control loop beats every second), not merely because the clock is
--    inside the window: a window written by `db install`, or left by a run
--    stopped with Ctrl-C or killed, locked the application out with no run
--    working, and the message said a job was running. An operator who wants
--    the whole window read-only opts in (policy time_window
--    read_only_between_runs: true, column between_runs), and the message
--    then says that instead.
--
-- 3. acquire_edit_lock no longer deadlocks with the lock owner's save. The
--    owner saves with check_edit_lock (FOR SHARE on its edit_locks row) and
--    then UPDATEs the record; an acquirer took the record's row FOR SHARE
--    first and then waited for the edit_locks row: the two waited on each
--    other (40P01 within deadlock_timeout). Now a live lock of another owner
--    is refused (CX001) before any row lock, and the edit_locks row is taken
--    with NOWAIT after the record's: a holder in the middle of its save is
--    refused with CX001 too, never waited for.

-- The run of `job` that is working now: outcome running and a heartbeat no
-- older than this (the control loop beats every second; a killed run stops
-- counting here long before abandon_stale_runs marks it).
CREATE FUNCTION coexist.live_run_heartbeat() RETURNS interval LANGUAGE sql IMMUTABLE AS
  $$ SELECT interval '15 seconds' $$;

CREATE FUNCTION coexist.live_run(job text) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT r.run_id FROM coexist.runs r
   WHERE r.job = live_run.job AND r.outcome = 'running'
     AND r.heartbeat_at > clock_timestamp() - coexist.live_run_heartbeat()
   ORDER BY r.run_id DESC LIMIT 1
$$;

-- The guard asks live_run on every online write inside an active window;
-- runs accumulate for the retention period, running ones are few.
CREATE INDEX runs_running ON coexist.runs (job) WHERE outcome = 'running';

ALTER TABLE coexist.windows ADD COLUMN between_runs boolean NOT NULL DEFAULT false;

-- As in 0009, with `definer`: such a function runs with its owner's rights
-- and the pinned search_path. A function whose body or rights differ is
-- replaced; one that matches is left alone (0006: replacing a function in
-- use makes every session re-plan it).
DROP FUNCTION coexist.replace_trigger_function(text, text);
CREATE FUNCTION coexist.replace_trigger_function(fn text, body text, definer boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF to_regproc(fn) IS NULL
     OR (SELECT p.prosrc IS DISTINCT FROM body OR p.prosecdef IS DISTINCT FROM definer
           FROM pg_proc p WHERE p.oid = to_regproc(fn)) THEN
    EXECUTE format('CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql %s AS %L', fn,
                   CASE WHEN definer THEN 'SECURITY DEFINER SET search_path = pg_catalog, pg_temp'
                        ELSE '' END,
                   body);
  END IF;
END
$$;

-- As in 0017, with the definer's rights (1.) and the live run (2.).
CREATE OR REPLACE FUNCTION coexist.install_guard_trigger(target regclass, key_column name,
                                                         owner_column name DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $install$
DECLARE
  fn text := coexist.trigger_function_name('guard', target);
  owner_check text := '';
  guarded text := 'TG_RELID::regclass';
  relation record;
  key_type regtype;
BEGIN
  SELECT a.atttypid::regtype INTO key_type FROM pg_attribute a
   WHERE a.attrelid = target AND a.attname = key_column AND NOT a.attisdropped;
  IF key_type IS NULL THEN
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
        IF NOT coexist.takeover_orphaned(guarded, OLD.%2$I::text) THEN
          RAISE EXCEPTION 'record %% of %% is being processed by a batch', OLD.%2$I, guarded
            USING ERRCODE = 'CX004',
                  HINT = 'the batch hands the record back when it is done; try again later.';
        END IF;
        IF TG_OP = 'UPDATE' AND NEW.%1$I = 'batch' THEN
          NEW.%1$I := 'online';
        END IF;
      END IF;$o$, owner_column, key_column);
  END IF;
  SELECT c.relkind, c.relispartition INTO relation FROM pg_class c WHERE c.oid = target;
  IF relation.relkind = 'p' THEN
    IF relation.relispartition THEN
      -- Its partitions' root is another table: windows and edit locks of
      -- this one could not be told from the root's.
      RAISE EXCEPTION 'table % is a partition of %', target, pg_partition_root(target)
        USING ERRCODE = 'feature_not_supported',
              HINT = format('make the root table %s the target (target.table).',
                            pg_partition_root(target));
    END IF;
    -- The trigger fires on a leaf partition; windows and locks name the root.
    guarded := 'pg_partition_root(TG_RELID)';
  END IF;
  PERFORM coexist.replace_trigger_function(fn, format($b$
    DECLARE
      guarded regclass;
      w record;
      holder text;
      held_token uuid;
    BEGIN
      IF current_setting('coexist.actor', true) = 'batch' THEN
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
      END IF;
      guarded := %3$s;
      SELECT cw.job, cw.start_time, cw.end_time, cw.time_zone, r.run_id INTO w
        FROM coexist.windows cw LEFT JOIN LATERAL coexist.live_run(cw.job) r(run_id) ON true
       WHERE cw.target = guarded AND cw.mode = 'read_only'
         AND coexist.window_active(cw.time_zone, cw.weekdays, cw.start_time, cw.end_time)
         AND (cw.between_runs OR r.run_id IS NOT NULL)
       LIMIT 1;
      IF FOUND AND w.run_id IS NOT NULL THEN
        RAISE EXCEPTION 'writes to %% are refused while batch job %% runs (run %%)', guarded, w.job,
                        w.run_id
          USING ERRCODE = 'CX003',
                DETAIL = format('read-only window %%s-%%s %%s', w.start_time, w.end_time,
                                w.time_zone),
                HINT = 'the table is read-only while the batch works in its window; try again '
                       'after the run.';
      ELSIF FOUND THEN
        RAISE EXCEPTION 'writes to %% are refused during the read-only window of batch job %%',
                        guarded, w.job
          USING ERRCODE = 'CX003',
                DETAIL = format('window %%s-%%s %%s, read-only between runs too', w.start_time,
                                w.end_time, w.time_zone),
                HINT = 'the operator made the whole window read-only (read_only_between_runs); '
                       'try again after it.';
      END IF;
      IF TG_OP = 'INSERT' THEN RETURN NEW; END IF;
      %1$s
      SELECT l.owner, l.token INTO holder, held_token FROM coexist.edit_locks l
       WHERE l.target = guarded AND l.record_key = OLD.%2$I::text
         AND l.expires_at > clock_timestamp();
      IF FOUND AND strpos(coalesce(current_setting('coexist.edit_lock_tokens', true), ''),
                          held_token::text) = 0 THEN
        RAISE EXCEPTION 'record %% of %% is being edited by %%', OLD.%2$I, guarded, holder
          USING ERRCODE = 'CX005',
                HINT = 'acquire the edit lock (coexist.acquire_edit_lock) before writing.';
      END IF;
      IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
      RETURN NEW;
    END $b$, owner_check, key_column, guarded), true);
  -- No table lock unless the trigger is missing or calls an older function,
  -- so a batch starting while online users work never queues behind them.
  PERFORM coexist.point_trigger(target, 'coexist_guard', 'BEFORE INSERT OR UPDATE OR DELETE',
                                'guard', fn);
  INSERT INTO coexist.targets AS t (target, key_column, owner_column, key_type)
  VALUES (target, key_column, owner_column, key_type)
  ON CONFLICT ON CONSTRAINT targets_pkey DO UPDATE
     SET key_column = EXCLUDED.key_column, owner_column = EXCLUDED.owner_column,
         key_type = EXCLUDED.key_type
   WHERE (t.key_column, t.owner_column, t.key_type)
         IS DISTINCT FROM (EXCLUDED.key_column, EXCLUDED.owner_column, EXCLUDED.key_type);
  -- Rows of dropped tables: their oids could name another table one day.
  DELETE FROM coexist.targets t WHERE NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.target);
END
$install$;

-- Every installed guard, regenerated: the same function (its oid kept), so
-- no trigger is touched and no table is locked.
SELECT coexist.install_guard_trigger(t.target, t.key_column, t.owner_column)
  FROM coexist.targets t
 WHERE EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.target);

-- As in 0017 (the canonical key, the record's row probe, the owner limit),
-- in an order that cannot deadlock with the holder's save (3.).
CREATE OR REPLACE FUNCTION coexist.acquire_edit_lock(target regclass, record_key text, owner text,
                                                     ttl interval)
RETURNS uuid
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  result uuid;
  holder text;
  until timestamptz;
  key_column name;
  key_type regtype;
  key text := acquire_edit_lock.record_key;  -- as given, for a target coexist does not know
BEGIN
  IF octet_length(acquire_edit_lock.owner) > 200 THEN
    RAISE EXCEPTION 'edit-lock owner is % bytes long; at most 200 are allowed',
                    octet_length(acquire_edit_lock.owner)
      USING ERRCODE = 'string_data_right_truncation',
            HINT = 'name the owner by a user or session id, not by free text.';
  END IF;
  SELECT t.key_column, t.key_type INTO key_column, key_type FROM coexist.targets t
   WHERE t.target = acquire_edit_lock.target;
  IF key_column IS NOT NULL THEN
    -- canonical_key's work, on the targets row already read.
    EXECUTE format('SELECT $1::%s::text', coalesce(key_type, 'text'::regtype))
      INTO key USING acquire_edit_lock.record_key;
  END IF;
  -- Another owner's live lock: refused before any row lock is taken.
  SELECT l.owner, l.expires_at INTO holder, until FROM coexist.edit_locks l
   WHERE l.target = acquire_edit_lock.target AND l.record_key = key
     AND l.owner <> acquire_edit_lock.owner AND l.expires_at > clock_timestamp();
  IF FOUND THEN
    RAISE EXCEPTION 'record % of % is being edited by %', key, target, holder
      USING ERRCODE = 'CX001', DETAIL = format('the edit lock expires at %s', until),
            HINT = 'try again later, or ask an administrator to release the lock.';
  END IF;
  IF key_column IS NOT NULL THEN
    -- FOR SHARE conflicts with every writer's row lock (the batch's FOR
    -- UPDATE and a plain UPDATE alike) but not with other acquirers.
    EXECUTE format('SELECT 1 FROM %s WHERE %I = $1::%s FOR SHARE', acquire_edit_lock.target,
                   key_column, coalesce(key_type, 'text'::regtype))
      USING key;
  END IF;
  -- The lock's row without waiting: its holder may be saving the record
  -- (check_edit_lock holds this row FOR SHARE, its UPDATE then waits for our
  -- share lock on the record).
  BEGIN
    PERFORM 1 FROM coexist.edit_locks l
      WHERE l.target = acquire_edit_lock.target AND l.record_key = key
      FOR UPDATE NOWAIT;
  EXCEPTION WHEN lock_not_available THEN
    SELECT l.owner, l.expires_at INTO holder, until FROM coexist.edit_locks l
     WHERE l.target = acquire_edit_lock.target AND l.record_key = key;
    RAISE EXCEPTION 'record % of % is being saved by %', key, target, holder
      USING ERRCODE = 'CX001', DETAIL = format('the edit lock expires at %s', until),
            HINT = 'its holder is saving the record now; try again in a moment.';
  END;
  INSERT INTO coexist.edit_locks AS l (target, record_key, owner, expires_at)
  VALUES (acquire_edit_lock.target, key, acquire_edit_lock.owner, clock_timestamp() + ttl)
  ON CONFLICT (target, record_key) DO UPDATE
     SET owner = EXCLUDED.owner,
         token = CASE WHEN l.owner = EXCLUDED.owner AND l.expires_at > clock_timestamp()
                      THEN l.token ELSE gen_random_uuid() END,
         acquired_at = CASE WHEN l.owner = EXCLUDED.owner AND l.expires_at > clock_timestamp()
                            THEN l.acquired_at ELSE clock_timestamp() END,
         renewed_at = clock_timestamp(),
         expires_at = EXCLUDED.expires_at
   WHERE l.owner = EXCLUDED.owner OR l.expires_at <= clock_timestamp()
  RETURNING l.token INTO result;
  IF result IS NULL THEN
    SELECT l.owner, l.expires_at INTO holder, until
      FROM coexist.edit_locks l
     WHERE l.target = acquire_edit_lock.target AND l.record_key = key;
    RAISE EXCEPTION 'record % of % is being edited by %', key, target, holder
      USING ERRCODE = 'CX001', DETAIL = format('the edit lock expires at %s', until),
            HINT = 'try again later, or ask an administrator to release the lock.';
  END IF;
  RETURN result;
END
$$;
