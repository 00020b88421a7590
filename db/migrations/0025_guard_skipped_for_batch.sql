-- The guard trigger is skipped for the batch's own writes. Its function
-- returned at once when coexist.actor is 'batch', but calling a PL/pgSQL
-- function per row still cost about 0.6 us of a batch row's 3-4 us
-- (docs/batch.md, "Benchmark"); a WHEN clause is evaluated without the
-- call. The function keeps its early return, for triggers installed before.
--
-- A trigger's WHEN clause can only change by re-creating it, which locks
-- the table against online writes: point_trigger re-creates a trigger whose
-- function is current but whose WHEN clause is missing only when the lock
-- comes within the installer's lock_timeout (a batch run: 5 s); otherwise
-- the old trigger, as correct and a little slower, stays until the next
-- install. This migration re-creates none itself (its lock would queue
-- behind online transactions with no timeout).

-- The WHEN clause of the guard trigger: online writers only.
CREATE FUNCTION coexist.guard_condition() RETURNS text LANGUAGE sql IMMUTABLE AS
  $$ SELECT $c$current_setting('coexist.actor', true) IS DISTINCT FROM 'batch'$c$ $$;

-- As in 0009, with an optional WHEN clause (`condition`). A trigger that
-- calls the wanted function is left alone when it has a WHEN clause exactly
-- when one is wanted (the only condition installed is guard_condition()).
DROP FUNCTION coexist.point_trigger(regclass, name, text, text, text);
CREATE FUNCTION coexist.point_trigger(target regclass, trigger_name name, events text,
                                      kind text, fn text, condition text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  previous oid;
  has_condition boolean;
  wanted oid := to_regproc(fn);
  stale oid;
  definition text := format('CREATE OR REPLACE TRIGGER %I %s ON %s FOR EACH ROW %s EXECUTE FUNCTION %s()',
                            trigger_name, events, target,
                            CASE WHEN condition IS NOT NULL THEN format('WHEN (%s)', condition)
                                 ELSE '' END, fn);
BEGIN
  SELECT t.tgfoid, t.tgqual IS NOT NULL INTO previous, has_condition FROM pg_trigger t
   WHERE t.tgrelid = target AND t.tgname = trigger_name;
  IF previous = wanted THEN
    IF has_condition = (condition IS NOT NULL) THEN
      RETURN;
    END IF;
    -- Only the WHEN clause differs: worth the table lock only when it comes
    -- at once (within lock_timeout).
    BEGIN
      EXECUTE definition;
    EXCEPTION WHEN lock_not_available THEN
      RAISE NOTICE 'trigger % on % kept without its WHEN clause: the table is busy', trigger_name,
        target USING HINT = 'the next install tries again.';
    END;
    RETURN;
  END IF;
  EXECUTE definition;
  FOR stale IN
    SELECT DISTINCT p.oid FROM pg_proc p
     WHERE p.pronamespace = 'coexist'::regnamespace AND p.oid <> wanted
       AND (p.oid = previous
            OR p.oid = to_regproc(format('coexist.%I', kind || ':' || target::text))
            OR p.oid = to_regproc(format('coexist.%I', kind || ':' || (
                 SELECT format('%I.%I', n.nspname, c.relname)
                   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE c.oid = target))))
       AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgfoid = p.oid)
  LOOP
    EXECUTE format('DROP FUNCTION %s', stale::regprocedure);
  END LOOP;
END
$$;

-- As in 0017, the guard trigger with guard_condition().
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
      SELECT * INTO w FROM coexist.windows cw
       WHERE cw.target = guarded AND cw.mode = 'read_only'
         AND coexist.window_active(cw.time_zone, cw.weekdays, cw.start_time, cw.end_time)
       LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'writes to %% are refused while batch job %% runs', guarded, w.job
          USING ERRCODE = 'CX003',
                DETAIL = format('window %%s-%%s %%s', w.start_time, w.end_time, w.time_zone),
                HINT = 'the table is read-only during the batch window; try again after it.';
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
    END $b$, owner_check, key_column, guarded));
  -- No table lock unless the trigger is missing or calls an older function,
  -- so a batch starting while online users work never queues behind them.
  PERFORM coexist.point_trigger(target, 'coexist_guard', 'BEFORE INSERT OR UPDATE OR DELETE',
                                'guard', fn, coexist.guard_condition());
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
