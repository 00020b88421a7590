-- One audited admin release. `coexist locks release` wrote its own DELETE
-- and audit (details.token and acquired_at) beside admin_release_edit_lock
-- (details.token only); both now go through admin_release_edit_locks, so a
-- release reads the same in the audit whoever asked for it.

-- Releases the locks (live or expired) that match any of the selectors: one
-- record (target with record_key), every lock of an owner, or locks
-- acquired longer ago than older_than; NULL selectors match nothing. Each
-- released lock is audited as edit_lock_released_by_admin (actor, subject =
-- its owner, details.token and details.acquired_at) and NOTIFYs
-- coexist_edit_lock_released 'target:record_key'. Returns the released locks.
CREATE FUNCTION coexist.admin_release_edit_locks(target regclass, record_key bigint, owner text,
                                                 older_than interval, actor text)
RETURNS SETOF coexist.edit_locks
LANGUAGE plpgsql AS $$
DECLARE
  gone coexist.edit_locks;
BEGIN
  FOR gone IN
    DELETE FROM coexist.edit_locks l
     WHERE (l.target = admin_release_edit_locks.target
            AND l.record_key = admin_release_edit_locks.record_key)
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

-- The one-record form of 0003, now the same release.
CREATE OR REPLACE FUNCTION coexist.admin_release_edit_lock(target regclass, record_key bigint,
                                                           actor text)
RETURNS boolean
LANGUAGE sql AS $$
  SELECT count(*) > 0
    FROM coexist.admin_release_edit_locks(target, record_key, NULL, NULL, actor);
$$;
