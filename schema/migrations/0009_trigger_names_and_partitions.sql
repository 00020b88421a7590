-- Trigger functions with unique, stable names; a guard that holds on
-- partitioned targets; and coexist.targets, what the guard is installed on.
--
-- Names. Until now the functions were coexist."bump_version:<target::text>"
-- and coexist."guard:<target::text>". PostgreSQL cuts names at 63 bytes, so
-- two long targets (a long schema, table names sharing their first 60
-- characters) shared one function, and installing the second replaced the
-- first one's body with the wrong columns. target::text also depends on
-- search_path ("products" or "public.products"). Now a name is the kind, a
-- readable prefix of schema.table and 16 hex digits of the SHA-256 of the
-- quoted qualified name: unique, and the same from every session. Installing
-- points an existing trigger at the new function and drops the old one once
-- no trigger uses it any more.
--
-- Partitions. A row trigger on a partitioned table is cloned onto every
-- partition, present and future, and fires there with TG_RELID = the
-- partition, while windows and edit locks name the partitioned table. The
-- guard of a partitioned target resolves the partition to its root
-- (pg_partition_root) before it looks them up.

-- coexist."<kind>:<schema.table, cut to fit>:<16 hex digits>", at most 63
-- bytes; NULL when the target does not exist.
CREATE FUNCTION coexist.trigger_function_name(kind text, target regclass)
RETURNS text
LANGUAGE plpgsql STABLE STRICT AS $$
DECLARE
  qualified text;
  readable text;
  budget integer := 63 - octet_length(kind) - 18;  -- two ':' and the 16 digits
BEGIN
  SELECT format('%I.%I', n.nspname, c.relname), n.nspname || '.' || c.relname
    INTO qualified, readable
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.oid = target;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  readable := left(readable, budget);
  WHILE octet_length(readable) > budget LOOP  -- multibyte characters
    readable := left(readable, -1);
  END LOOP;
  RETURN format('coexist.%I', kind || ':' || readable || ':'
                || left(encode(sha256(convert_to(qualified, 'UTF8')), 'hex'), 16));
END
$$;

-- Creates or replaces the trigger function `fn` only when its body differs:
-- replacing a function in use makes every session that has run it recompile
-- it and re-plan at once (0006).
CREATE FUNCTION coexist.replace_trigger_function(fn text, body text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF to_regproc(fn) IS NULL
     OR (SELECT prosrc FROM pg_proc WHERE oid = to_regproc(fn)) IS DISTINCT FROM body THEN
    EXECUTE format('CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS %L',
                   fn, body);
  END IF;
END
$$;

-- Points the target's row trigger `trigger_name` at `fn`, creating it when
-- missing. Nothing happens (and no table lock is taken) when it already
-- does. A trigger that called another function (the name before 0009) is
-- replaced, and that function and the pre-0009 names of this target's
-- function are dropped when no trigger uses them any more (a cut name could
-- be shared with another target, whose next install drops it).
CREATE FUNCTION coexist.point_trigger(target regclass, trigger_name name, events text,
                                      kind text, fn text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  previous oid;
  wanted oid := to_regproc(fn);
  stale oid;
BEGIN
  SELECT t.tgfoid INTO previous FROM pg_trigger t
   WHERE t.tgrelid = target AND t.tgname = trigger_name;
  IF previous = wanted THEN
    RETURN;
  END IF;
  EXECUTE format('CREATE OR REPLACE TRIGGER %I %s ON %s FOR EACH ROW EXECUTE FUNCTION %s()',
                 trigger_name, events, target, fn);
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

-- As in 0001, with the new name; replaces the function only when it changed
-- and touches the trigger only when it is missing or calls another function.
CREATE OR REPLACE FUNCTION coexist.install_version_trigger(target regclass, version_column name)
RETURNS void
LANGUAGE plpgsql AS $install$
DECLARE
  fn text := coexist.trigger_function_name('bump_version', target);
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
  PERFORM coexist.replace_trigger_function(fn, format($b$
    BEGIN
      NEW.%1$I := OLD.%1$I + 1;
      RETURN NEW;
    END $b$, version_column));
  PERFORM coexist.point_trigger(target, 'coexist_bump_version', 'BEFORE UPDATE', 'bump_version',
                                fn);
END
$install$;

-- The tables install_guard_trigger guards, with their key column:
-- acquire_edit_lock locks the record's row through it (0010).
CREATE TABLE coexist.targets (
  target       regclass PRIMARY KEY,
  key_column   name     NOT NULL,
  owner_column name
);

-- As in 0006, with the new name, partitioned targets, and coexist.targets.
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
        RAISE EXCEPTION 'record %% of %% is being processed by a batch', OLD.%2$I, guarded
          USING ERRCODE = 'CX004',
                HINT = 'the batch hands the record back when it is done; try again later.';
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
