-- coexist.admin_release_edit_locks: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- admin_release_edit_locks(regclass,text,text,interval,text), defined by migrations 0017 and
-- 0017 (newest).
-- 0017:
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
