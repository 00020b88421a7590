-- Keys of any type. A target's key column may be bigint, integer, smallint,
-- text, varchar or uuid: an application's own table is rarely keyed by our
-- demo's bigint. coexist's tables now store a record's key as text, the
-- canonical text form of the key column's type (what `key::text` prints:
-- '42' for 0042 in a bigint column, the lower-case form of a uuid), so one
-- record has one spelling in the queue, the edit locks, the takeovers and
-- the audit, whatever its type. coexist.targets gains key_type, read by
-- canonical_key() and by acquire_edit_lock's row probe.
--
-- The online API (acquire_edit_lock, renew_edit_lock, check_edit_lock,
-- release_edit_lock) takes the key as text; the bigint forms stay, as
-- wrappers, with their grants (CREATE OR REPLACE), so applications written
-- against them go on working; uuid forms are added. A key passed as text is
-- canonicalised through the target's key type, so '0042' finds the lock
-- taken for 42; admin_release_edit_lock, revoke_edit_lock and
-- raise_edit_lock_lost keep bigint wrappers too. The two internal
-- functions with a bigint key (admin_release_edit_locks, takeover_orphaned)
-- are replaced by text forms that inherit the old ones' grants.
--
-- The guard trigger of every installed target is regenerated in this
-- transaction (it compared the text column with the bigint key), so online
-- writes never see a mismatched pair.

-- Grants of `old` onto `new`, when `old` had any other than the default.
CREATE FUNCTION pg_temp.copy_grants(old regprocedure, new regprocedure) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  acl record;
BEGIN
  IF (SELECT proacl IS NULL FROM pg_proc WHERE oid = old) THEN
    RETURN;
  END IF;
  EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', new);
  FOR acl IN SELECT a.grantee FROM pg_proc p, aclexplode(p.proacl) a
              WHERE p.oid = old AND a.privilege_type = 'EXECUTE' LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', new,
                   CASE WHEN acl.grantee = 0 THEN 'PUBLIC'
                        ELSE quote_ident(pg_get_userbyid(acl.grantee)) END);
  END LOOP;
END
$$;

-- The functions whose bodies compare a bigint key with the columns below go
-- first (their text forms are created after the columns change).
CREATE FUNCTION coexist.raise_edit_lock_lost(target regclass, record_key text, token uuid)
RETURNS void LANGUAGE sql AS 'SELECT';
SELECT pg_temp.copy_grants('coexist.raise_edit_lock_lost(regclass,bigint,uuid)',
                           'coexist.raise_edit_lock_lost(regclass,text,uuid)');
CREATE FUNCTION coexist.revoke_edit_lock(target regclass, record_key text, actor text,
                                         job text DEFAULT NULL, run_id bigint DEFAULT NULL,
                                         item_id bigint DEFAULT NULL)
RETURNS text LANGUAGE sql AS 'SELECT NULL::text';
SELECT pg_temp.copy_grants('coexist.revoke_edit_lock(regclass,bigint,text,text,bigint,bigint)',
                           'coexist.revoke_edit_lock(regclass,text,text,text,bigint,bigint)');
CREATE FUNCTION coexist.takeover_orphaned(target regclass, record_key text)
RETURNS boolean LANGUAGE sql AS 'SELECT false';
SELECT pg_temp.copy_grants('coexist.takeover_orphaned(regclass,bigint)',
                           'coexist.takeover_orphaned(regclass,text)');
CREATE FUNCTION coexist.admin_release_edit_locks(target regclass, record_key text, owner text,
                                                 older_than interval, actor text)
RETURNS SETOF coexist.edit_locks LANGUAGE sql AS 'SELECT * FROM coexist.edit_locks WHERE false';
SELECT pg_temp.copy_grants(
  'coexist.admin_release_edit_locks(regclass,bigint,text,interval,text)',
  'coexist.admin_release_edit_locks(regclass,text,text,interval,text)');
DROP FUNCTION coexist.admin_release_edit_locks(regclass, bigint, text, interval, text);
DROP FUNCTION coexist.takeover_orphaned(regclass, bigint);

ALTER TABLE coexist.queue ALTER COLUMN record_key TYPE text USING record_key::text;
ALTER TABLE coexist.edit_locks ALTER COLUMN record_key TYPE text USING record_key::text;
ALTER TABLE coexist.events ALTER COLUMN record_key TYPE text USING record_key::text;
ALTER TABLE coexist.takeovers ALTER COLUMN record_key TYPE text USING record_key::text;

ALTER TABLE coexist.targets ADD COLUMN key_type regtype;
UPDATE coexist.targets t SET key_type = a.atttypid::regtype
  FROM pg_attribute a
 WHERE a.attrelid = t.target AND a.attname = t.key_column AND NOT a.attisdropped;

-- `record_key` in the canonical text form of `target`'s key type; as given
-- for a target coexist does not know (no guard installed) or a text key.
-- Raises 22P02 when it is not a value of that type.
CREATE FUNCTION coexist.canonical_key(target regclass, record_key text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
  key_type regtype;
  result text;
BEGIN
  SELECT t.key_type INTO key_type FROM coexist.targets t WHERE t.target = canonical_key.target;
  IF key_type IS NULL OR key_type IN ('text'::regtype, 'character varying'::regtype) THEN
    RETURN record_key;
  END IF;
  IF key_type IN ('bigint'::regtype, 'integer'::regtype, 'smallint'::regtype) THEN
    RETURN record_key::bigint::text;
  END IF;
  EXECUTE format('SELECT $1::%s::text', key_type) INTO result USING record_key;
  RETURN result;
END
$$;

-- As in 0010, with the key as text, canonicalised; the row probe casts it
-- to the key column's type, so it uses the key's index.
CREATE FUNCTION coexist.acquire_edit_lock(target regclass, record_key text, owner text,
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
    -- FOR SHARE conflicts with every writer's row lock (the batch's FOR
    -- UPDATE and a plain UPDATE alike) but not with other acquirers.
    EXECUTE format('SELECT 1 FROM %s WHERE %I = $1::%s FOR SHARE', acquire_edit_lock.target,
                   key_column, coalesce(key_type, 'text'::regtype))
      USING key;
  END IF;
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
SELECT pg_temp.copy_grants('coexist.acquire_edit_lock(regclass,bigint,text,interval)',
                           'coexist.acquire_edit_lock(regclass,text,text,interval)');

-- As in 0014 (SECURITY DEFINER), with the key as text.
CREATE OR REPLACE FUNCTION coexist.raise_edit_lock_lost(target regclass, record_key text,
                                                        token uuid)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
#variable_conflict use_column
DECLARE
  revoked_by text;
BEGIN
  SELECT e.actor INTO revoked_by
    FROM coexist.events e
   WHERE e.kind = 'edit_lock_revoked' AND e.target = raise_edit_lock_lost.target
     AND e.record_key = raise_edit_lock_lost.record_key
     AND e.details->>'token' = raise_edit_lock_lost.token::text
   ORDER BY e.event_id DESC LIMIT 1;
  IF revoked_by IS NOT NULL THEN
    RAISE EXCEPTION 'edit lock on record % of % was revoked by %', record_key, target, revoked_by
      USING ERRCODE = 'CX002', HINT = 'reload the record and edit it again.';
  END IF;
  RAISE EXCEPTION 'edit lock on record % of % is no longer held', record_key, target
    USING ERRCODE = 'CX002', HINT = 'the lock expired or was released; reload and edit again.';
END
$$;

-- As in 0002, with the key as text.
CREATE FUNCTION coexist.renew_edit_lock(target regclass, record_key text, token uuid,
                                        ttl interval)
RETURNS timestamptz
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  until timestamptz;
  key text := coexist.canonical_key(renew_edit_lock.target, renew_edit_lock.record_key);
BEGIN
  UPDATE coexist.edit_locks l
     SET expires_at = clock_timestamp() + ttl, renewed_at = clock_timestamp()
   WHERE l.target = renew_edit_lock.target AND l.record_key = key
     AND l.token = renew_edit_lock.token AND l.expires_at > clock_timestamp()
  RETURNING l.expires_at INTO until;
  IF until IS NULL THEN
    PERFORM coexist.raise_edit_lock_lost(target, key, token);
  END IF;
  RETURN until;
END
$$;
SELECT pg_temp.copy_grants('coexist.renew_edit_lock(regclass,bigint,uuid,interval)',
                           'coexist.renew_edit_lock(regclass,text,uuid,interval)');

-- As in 0003, with the key as text.
CREATE FUNCTION coexist.check_edit_lock(target regclass, record_key text, token uuid)
RETURNS void
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  key text := coexist.canonical_key(check_edit_lock.target, check_edit_lock.record_key);
BEGIN
  PERFORM 1 FROM coexist.edit_locks l
    WHERE l.target = check_edit_lock.target AND l.record_key = key
      AND l.token = check_edit_lock.token AND l.expires_at > clock_timestamp()
    FOR SHARE;
  IF NOT FOUND THEN
    PERFORM coexist.raise_edit_lock_lost(target, key, token);
  END IF;
  PERFORM set_config('coexist.edit_lock_tokens',
                     coalesce(current_setting('coexist.edit_lock_tokens', true), '') || token::text
                       || ',', true);
END
$$;
SELECT pg_temp.copy_grants('coexist.check_edit_lock(regclass,bigint,uuid)',
                           'coexist.check_edit_lock(regclass,text,uuid)');

-- As in 0003, with the key as text.
CREATE FUNCTION coexist.release_edit_lock(target regclass, record_key text, token uuid)
RETURNS boolean
LANGUAGE sql AS $$
  WITH gone AS (
    DELETE FROM coexist.edit_locks l
     WHERE l.target = release_edit_lock.target
       AND l.record_key = coexist.canonical_key(release_edit_lock.target,
                                                release_edit_lock.record_key)
       AND l.token = release_edit_lock.token
    RETURNING l.target, l.record_key)
  SELECT count(pg_notify('coexist_edit_lock_released', target::text || ':' || record_key)) > 0
    FROM gone;
$$;
SELECT pg_temp.copy_grants('coexist.release_edit_lock(regclass,bigint,uuid)',
                           'coexist.release_edit_lock(regclass,text,uuid)');

-- The bigint forms, kept with their grants, and the uuid forms.
CREATE OR REPLACE FUNCTION coexist.acquire_edit_lock(target regclass, record_key bigint,
                                                     owner text, ttl interval)
RETURNS uuid LANGUAGE sql AS
  'SELECT coexist.acquire_edit_lock(target, record_key::text, owner, ttl)';
CREATE FUNCTION coexist.acquire_edit_lock(target regclass, record_key uuid, owner text,
                                          ttl interval)
RETURNS uuid LANGUAGE sql AS
  'SELECT coexist.acquire_edit_lock(target, record_key::text, owner, ttl)';
CREATE OR REPLACE FUNCTION coexist.renew_edit_lock(target regclass, record_key bigint, token uuid,
                                                   ttl interval)
RETURNS timestamptz LANGUAGE sql AS
  'SELECT coexist.renew_edit_lock(target, record_key::text, token, ttl)';
CREATE FUNCTION coexist.renew_edit_lock(target regclass, record_key uuid, token uuid,
                                        ttl interval)
RETURNS timestamptz LANGUAGE sql AS
  'SELECT coexist.renew_edit_lock(target, record_key::text, token, ttl)';
CREATE OR REPLACE FUNCTION coexist.check_edit_lock(target regclass, record_key bigint, token uuid)
RETURNS void LANGUAGE sql AS 'SELECT coexist.check_edit_lock(target, record_key::text, token)';
CREATE FUNCTION coexist.check_edit_lock(target regclass, record_key uuid, token uuid)
RETURNS void LANGUAGE sql AS 'SELECT coexist.check_edit_lock(target, record_key::text, token)';
CREATE OR REPLACE FUNCTION coexist.release_edit_lock(target regclass, record_key bigint,
                                                     token uuid)
RETURNS boolean LANGUAGE sql AS
  'SELECT coexist.release_edit_lock(target, record_key::text, token)';
CREATE FUNCTION coexist.release_edit_lock(target regclass, record_key uuid, token uuid)
RETURNS boolean LANGUAGE sql AS
  'SELECT coexist.release_edit_lock(target, record_key::text, token)';
CREATE OR REPLACE FUNCTION coexist.raise_edit_lock_lost(target regclass, record_key bigint,
                                                        token uuid)
RETURNS void LANGUAGE sql AS 'SELECT coexist.raise_edit_lock_lost(target, record_key::text, token)';

-- As in 0010, with the key as text.
CREATE OR REPLACE FUNCTION coexist.revoke_edit_lock(target regclass, record_key text, actor text,
                                                    job text DEFAULT NULL,
                                                    run_id bigint DEFAULT NULL,
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
                    (jsonb_build_object('owner', left(evicted, 200), 'token', evicted_token,
                                        'target', target::text, 'record_key', record_key,
                                        'by', left(actor, 200))
                     || CASE WHEN length(evicted) > 200
                             THEN jsonb_build_object('owner_truncated', true)
                             ELSE '{}'::jsonb END)::text);
  RETURN evicted;
END
$$;

CREATE OR REPLACE FUNCTION coexist.revoke_edit_lock(target regclass, record_key bigint, actor text,
                                                    job text DEFAULT NULL,
                                                    run_id bigint DEFAULT NULL,
                                                    item_id bigint DEFAULT NULL)
RETURNS text LANGUAGE sql AS
  'SELECT coexist.revoke_edit_lock(target, record_key::text, actor, job, run_id, item_id)';

-- As in 0016, with the key as text (canonicalised).
CREATE OR REPLACE FUNCTION coexist.admin_release_edit_locks(target regclass, record_key text,
                                                            owner text, older_than interval,
                                                            actor text)
RETURNS SETOF coexist.edit_locks
LANGUAGE plpgsql AS $$
DECLARE
  gone coexist.edit_locks;
  key text := CASE WHEN admin_release_edit_locks.target IS NULL THEN NULL
                   ELSE coexist.canonical_key(admin_release_edit_locks.target,
                                              admin_release_edit_locks.record_key) END;
BEGIN
  FOR gone IN
    DELETE FROM coexist.edit_locks l
     WHERE (l.target = admin_release_edit_locks.target AND l.record_key = key)
        OR l.owner = admin_release_edit_locks.owner
        OR l.acquired_at < clock_timestamp() - admin_release_edit_locks.older_than
    RETURNING l.*
  LOOP
    INSERT INTO coexist.events (kind, target, record_key, actor, subject, details)
    VALUES ('edit_lock_released_by_admin', gone.target, gone.record_key,
            admin_release_edit_locks.actor, gone.owner,
            jsonb_build_object('token', gone.token, 'acquired_at', gone.acquired_at));
    PERFORM pg_notify('coexist_edit_lock_released', gone.target::text || ':' || gone.record_key);
    RETURN NEXT gone;
  END LOOP;
END;
$$;

CREATE FUNCTION coexist.admin_release_edit_lock(target regclass, record_key text, actor text)
RETURNS boolean
LANGUAGE sql AS $$
  SELECT count(*) > 0
    FROM coexist.admin_release_edit_locks(target, record_key, NULL, NULL, actor);
$$;
SELECT pg_temp.copy_grants('coexist.admin_release_edit_lock(regclass,bigint,text)',
                           'coexist.admin_release_edit_lock(regclass,text,text)');
CREATE OR REPLACE FUNCTION coexist.admin_release_edit_lock(target regclass, record_key bigint,
                                                           actor text)
RETURNS boolean LANGUAGE sql AS
  'SELECT coexist.admin_release_edit_lock(target, record_key::text, actor)';

-- As in 0013, with the key as text.
CREATE OR REPLACE FUNCTION coexist.takeover_orphaned(target regclass, record_key text)
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

-- As in 0013; the guard compares OLD.key::text with the text columns, and
-- coexist.targets records the key's type.
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

-- Every installed guard, regenerated for the text columns.
SELECT coexist.install_guard_trigger(t.target, t.key_column, t.owner_column)
  FROM coexist.targets t
 WHERE EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.target);
