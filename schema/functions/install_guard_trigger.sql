-- coexist.install_guard_trigger: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- install_guard_trigger(regclass,name,name), defined by migrations 0003, 0006, 0009, 0013, 0017
-- and 0030 (newest).
-- 0003:
-- The guard trigger, generated per target with the column names spelled out
-- (like the version trigger). The batch's connections say who they are with
-- SET coexist.actor = 'batch' and pass after one setting lookup; that is a
-- cooperative protocol, not a security boundary: applications must not set it.
-- 0006:
-- install_guard_trigger (0003) replaced the guard function on every call,
-- that is at the start of every batch run. CREATE OR REPLACE FUNCTION on a
-- function in use invalidates it in every session: each online session then
-- recompiles the trigger and re-plans its statements on its next write, all
-- at once, which showed as a latency spike at the start of every run
-- (bench/pacing_bench). Now the function is replaced only when its
-- generated body differs from the installed one.
-- 0009:
-- As in 0006, with the new name, partitioned targets, and coexist.targets.
-- 0013:
-- As in 0009; only owner_check changed: a batch-owned record whose takeover
-- no live run holds is written through, and becomes the online side's.
-- 0017:
-- As in 0013; the guard compares OLD.key::text with the text columns, and
-- coexist.targets records the key's type.
-- 0030:
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
  -- Replaced only when it changed (replace_trigger_function): replacing a
  -- function that is in use makes every session that has run it recompile it
  -- and re-plan (about 20 ms per online session, all at once at the start of
  -- every run).
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
