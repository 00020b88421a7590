-- coexist.acquire_edit_lock: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- acquire_edit_lock(regclass,bigint,text,interval), defined by migrations 0002, 0010 and 0017
-- (newest).
-- 0002:
-- Takes the lock, or re-takes it when the same owner already holds it (a
-- reload of the edit screen) or when it has expired. Returns the token that
-- renew, check and release need. Raises CX001 when another owner holds it.
-- 0010:
-- Two changes to acquiring an edit lock, and a NOTIFY that always fits.
--
-- Owner length. NOTIFY payloads must be shorter than 8000 bytes, and
-- revoke_edit_lock (batch_priority) sends the evicted owner in one: an owner
-- of 8000 bytes made every revocation of its lock fail, and with it every
-- chunk that held that record. acquire_edit_lock now refuses owners longer
-- than 200 bytes (SQLSTATE 22001), and revoke_edit_lock cuts the owner and
-- the actor in its payload to 200 characters (for locks taken before).
-- The token is a uuid: its length is fixed.
--
-- Serialising with the batch. A batch locks a record's row (FOR UPDATE)
-- before it reads the record's edit lock and applies. acquire_edit_lock now
-- share-locks the same row (through the key column install_guard_trigger
-- recorded in coexist.targets) before it takes the lock, so it waits while a
-- chunk holds the row: the lock is either there before the batch reads the
-- edit locks, or taken after the chunk committed, never in between.
-- 0017:
-- The bigint forms, kept with their grants, and the uuid forms.
CREATE OR REPLACE FUNCTION coexist.acquire_edit_lock(target regclass, record_key bigint,
                                                     owner text, ttl interval)
RETURNS uuid LANGUAGE sql AS
  'SELECT coexist.acquire_edit_lock(target, record_key::text, owner, ttl)';

-- acquire_edit_lock(regclass,uuid,text,interval), defined by migration 0017.
CREATE FUNCTION coexist.acquire_edit_lock(target regclass, record_key uuid, owner text,
                                          ttl interval)
RETURNS uuid LANGUAGE sql AS
  'SELECT coexist.acquire_edit_lock(target, record_key::text, owner, ttl)';

-- acquire_edit_lock(regclass,text,text,interval), defined by migrations 0017 and 0030 (newest).
-- 0017:
-- As in 0010, with the key as text, canonicalised; the row probe casts it
-- to the key column's type, so it uses the key's index.
-- 0030:
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
