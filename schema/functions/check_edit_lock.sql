-- coexist.check_edit_lock: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- check_edit_lock(regclass,bigint,uuid), defined by migrations 0002, 0003 and 0017 (newest).
-- 0002:
-- Call in the transaction that saves the edit, before the UPDATE: it keeps
-- the lock row share-locked until commit, so a batch cannot revoke the lock
-- between this check and the save. Raises CX002 when the lock is gone.
-- 0003:
-- As in 0002, and it also records the token in the transaction-local setting
-- coexist.edit_lock_tokens, which lets the holder's own save through the
-- guard trigger's CX005 check.
CREATE OR REPLACE FUNCTION coexist.check_edit_lock(target regclass, record_key bigint, token uuid)
RETURNS void LANGUAGE sql AS 'SELECT coexist.check_edit_lock(target, record_key::text, token)';

-- check_edit_lock(regclass,text,uuid), defined by migration 0017.
--
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

-- check_edit_lock(regclass,uuid,uuid), defined by migration 0017.
CREATE FUNCTION coexist.check_edit_lock(target regclass, record_key uuid, token uuid)
RETURNS void LANGUAGE sql AS 'SELECT coexist.check_edit_lock(target, record_key::text, token)';
