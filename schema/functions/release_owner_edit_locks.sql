-- coexist.release_owner_edit_locks: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- release_owner_edit_locks(text), defined by migrations 0002 and 0003 (newest).
-- 0002:
-- Session timeout: releases every lock of an owner; returns how many.
CREATE OR REPLACE FUNCTION coexist.release_owner_edit_locks(owner text)
RETURNS integer
LANGUAGE sql AS $$
  WITH gone AS (DELETE FROM coexist.edit_locks l WHERE l.owner = release_owner_edit_locks.owner
                RETURNING l.target, l.record_key)
  SELECT count(pg_notify('coexist_edit_lock_released', target::text || ':' || record_key))::integer
    FROM gone;
$$;
