-- coexist.admin_release_edit_lock: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- admin_release_edit_lock(regclass,bigint,text), defined by migrations 0003, 0016 and 0017
-- (newest).
-- 0003:
-- An administrator releases any lock; audited as edit_lock_released_by_admin.
-- 0016:
-- The one-record form of 0003, now the same release.
CREATE OR REPLACE FUNCTION coexist.admin_release_edit_lock(target regclass, record_key bigint,
                                                           actor text)
RETURNS boolean LANGUAGE sql AS
  'SELECT coexist.admin_release_edit_lock(target, record_key::text, actor)';

-- admin_release_edit_lock(regclass,text,text), defined by migration 0017.
CREATE FUNCTION coexist.admin_release_edit_lock(target regclass, record_key text, actor text)
RETURNS boolean
LANGUAGE sql AS $$
  SELECT count(*) > 0
    FROM coexist.admin_release_edit_locks(target, record_key, NULL, NULL, actor);
$$;
