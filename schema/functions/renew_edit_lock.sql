-- coexist.renew_edit_lock: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- renew_edit_lock(regclass,bigint,uuid,interval), defined by migrations 0002 and 0017 (newest).
-- 0002:
-- Extends a live lock; returns the new expiry. Raises CX002 when the token
-- does not name a live lock (expired, released, revoked by a batch).
CREATE OR REPLACE FUNCTION coexist.renew_edit_lock(target regclass, record_key bigint, token uuid,
                                                   ttl interval)
RETURNS timestamptz LANGUAGE sql AS
  'SELECT coexist.renew_edit_lock(target, record_key::text, token, ttl)';

-- renew_edit_lock(regclass,text,uuid,interval), defined by migration 0017.
--
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

-- renew_edit_lock(regclass,uuid,uuid,interval), defined by migration 0017.
CREATE FUNCTION coexist.renew_edit_lock(target regclass, record_key uuid, token uuid,
                                        ttl interval)
RETURNS timestamptz LANGUAGE sql AS
  'SELECT coexist.renew_edit_lock(target, record_key::text, token, ttl)';
