-- coexist.release_edit_lock: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- release_edit_lock(regclass,bigint,uuid), defined by migrations 0002, 0003 and 0017 (newest).
-- 0002:
-- Releases the lock the token names; false when there was none to release.
-- 0003:
-- As in 0002, plus NOTIFY coexist_edit_lock_released 'target:record_key' so
-- that a waiting online_priority batch wakes up without polling.
CREATE OR REPLACE FUNCTION coexist.release_edit_lock(target regclass, record_key bigint,
                                                     token uuid)
RETURNS boolean LANGUAGE sql AS
  'SELECT coexist.release_edit_lock(target, record_key::text, token)';

-- release_edit_lock(regclass,text,uuid), defined by migration 0017.
--
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

-- release_edit_lock(regclass,uuid,uuid), defined by migration 0017.
CREATE FUNCTION coexist.release_edit_lock(target regclass, record_key uuid, token uuid)
RETURNS boolean LANGUAGE sql AS
  'SELECT coexist.release_edit_lock(target, record_key::text, token)';
