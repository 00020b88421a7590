-- The edit-lock API: offline pessimistic locks held across a screen.
-- Seed 002: such locks leak when a browser closes, so a lock expires on its
-- own (expired locks count as free), the same owner may re-acquire it, an
-- owner's locks can be released at session timeout, and an admin can release
-- any lock. Every application, in any language, calls these functions; the
-- online simulator is one such client.
--
-- SQLSTATEs raised here (class CX is coexist's own):
--   CX001  edit lock held by another owner (acquire)
--   CX002  edit lock not held: expired, released or revoked (renew, check)

-- Takes the lock, or re-takes it when the same owner already holds it (a
-- reload of the edit screen) or when it has expired. Returns the token that
-- renew, check and release need. Raises CX001 when another owner holds it.
CREATE FUNCTION coexist.acquire_edit_lock(target regclass, record_key bigint, owner text,
                                          ttl interval)
RETURNS uuid
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  result uuid;
  holder text;
  until timestamptz;
BEGIN
  INSERT INTO coexist.edit_locks AS l (target, record_key, owner, expires_at)
  VALUES (acquire_edit_lock.target, acquire_edit_lock.record_key, acquire_edit_lock.owner,
          clock_timestamp() + ttl)
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
     WHERE l.target = acquire_edit_lock.target AND l.record_key = acquire_edit_lock.record_key;
    RAISE EXCEPTION 'record % of % is being edited by %', record_key, target, holder
      USING ERRCODE = 'CX001', DETAIL = format('the edit lock expires at %s', until),
            HINT = 'try again later, or ask an administrator to release the lock.';
  END IF;
  RETURN result;
END
$$;

-- Extends a live lock; returns the new expiry. Raises CX002 when the token
-- does not name a live lock (expired, released, revoked by a batch).
CREATE FUNCTION coexist.renew_edit_lock(target regclass, record_key bigint, token uuid,
                                        ttl interval)
RETURNS timestamptz
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  until timestamptz;
BEGIN
  UPDATE coexist.edit_locks l
     SET expires_at = clock_timestamp() + ttl, renewed_at = clock_timestamp()
   WHERE l.target = renew_edit_lock.target AND l.record_key = renew_edit_lock.record_key
     AND l.token = renew_edit_lock.token AND l.expires_at > clock_timestamp()
  RETURNING l.expires_at INTO until;
  IF until IS NULL THEN
    PERFORM coexist.raise_edit_lock_lost(target, record_key, token);
  END IF;
  RETURN until;
END
$$;

-- Call in the transaction that saves the edit, before the UPDATE: it keeps
-- the lock row share-locked until commit, so a batch cannot revoke the lock
-- between this check and the save. Raises CX002 when the lock is gone.
CREATE FUNCTION coexist.check_edit_lock(target regclass, record_key bigint, token uuid)
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
END
$$;

-- Releases the lock the token names; false when there was none to release.
CREATE FUNCTION coexist.release_edit_lock(target regclass, record_key bigint, token uuid)
RETURNS boolean
LANGUAGE sql AS $$
  WITH gone AS (
    DELETE FROM coexist.edit_locks l
     WHERE l.target = release_edit_lock.target AND l.record_key = release_edit_lock.record_key
       AND l.token = release_edit_lock.token
    RETURNING 1)
  SELECT count(*) > 0 FROM gone;
$$;

-- Session timeout: releases every lock of an owner; returns how many.
CREATE FUNCTION coexist.release_owner_edit_locks(owner text)
RETURNS integer
LANGUAGE sql AS $$
  WITH gone AS (DELETE FROM coexist.edit_locks l WHERE l.owner = release_owner_edit_locks.owner
                RETURNING 1)
  SELECT count(*)::integer FROM gone;
$$;

-- Why a lock is gone, for the CX002 message: revoked (an edit_lock_revoked
-- event whose details carry this token says so), or expired or released.
CREATE FUNCTION coexist.raise_edit_lock_lost(target regclass, record_key bigint, token uuid)
RETURNS void
LANGUAGE plpgsql AS $$
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
