-- A status_partition run that dies between taking rows over and handing
-- them back (kill -9, a lost server, an OOM kill) leaves them owned by the
-- batch. The next run hands them back (batch/queue_sql.cpp:
-- HandBackOrphaned), but with a nightly schedule that is a day of CX004 for
-- online users. So the guard itself now checks, when it would refuse a write
-- to a batch-owned record, whether a live run holds the takeover: when the
-- takeover's run no longer holds its advisory lock (the process is gone),
-- the write goes through and the record is the online side's again
-- (owner := 'online'). The takeovers row stays for the next run to clear;
-- the item stays queued. A batch-owned record with no takeovers row (set by
-- something other than coexist) is refused as before.

-- Whether `record_key` of `target` was taken over by a run that is gone.
-- SECURITY DEFINER: online roles need not read coexist.takeovers.
CREATE FUNCTION coexist.takeover_orphaned(target regclass, record_key bigint)
RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
  SELECT EXISTS (SELECT 1 FROM coexist.takeovers t
                  WHERE t.target = takeover_orphaned.target
                    AND t.record_key = takeover_orphaned.record_key)
     AND NOT EXISTS (
       SELECT 1 FROM coexist.takeovers t
         JOIN pg_locks l
           ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.classid = coexist.run_lock_class()::oid
          AND l.objid = ((t.run_id % 2147483647)::integer)::oid
        WHERE t.target = takeover_orphaned.target AND t.record_key = takeover_orphaned.record_key)
$$;

-- As in 0009; only owner_check changed: a batch-owned record whose takeover
-- no live run holds is written through, and becomes the online side's.
CREATE OR REPLACE FUNCTION coexist.install_guard_trigger(target regclass, key_column name,
                                                         owner_column name DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $install$
DECLARE
  fn text := coexist.trigger_function_name('guard', target);
  owner_check text := '';
  guarded text := 'TG_RELID::regclass';
  relation record;
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
        IF NOT coexist.takeover_orphaned(guarded, OLD.%2$I) THEN
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
       WHERE l.target = guarded AND l.record_key = OLD.%2$I
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
                                'guard', fn);
  INSERT INTO coexist.targets AS t (target, key_column, owner_column)
  VALUES (target, key_column, owner_column)
  ON CONFLICT ON CONSTRAINT targets_pkey DO UPDATE
     SET key_column = EXCLUDED.key_column, owner_column = EXCLUDED.owner_column
   WHERE (t.key_column, t.owner_column) IS DISTINCT FROM (EXCLUDED.key_column, EXCLUDED.owner_column);
  -- Rows of dropped tables: their oids could name another table one day.
  DELETE FROM coexist.targets t WHERE NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.target);
END
$install$;
