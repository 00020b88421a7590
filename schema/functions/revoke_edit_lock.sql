-- coexist.revoke_edit_lock: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- revoke_edit_lock(regclass,bigint,text,text,bigint,bigint), defined by migrations 0003, 0010
-- and 0017 (newest).
-- 0003:
-- batch_priority: removes a live edit lock, audits it as edit_lock_revoked
-- (so the owner's next check_edit_lock reports CX002 "revoked by <actor>")
-- and NOTIFYs coexist_edit_lock_revoked with a JSON payload naming the owner.
-- Returns the evicted owner, or NULL when there was no live lock.
-- 0010:
-- As in 0003; the payload's owner and actor are cut to 200 characters, and
-- owner_truncated says when the owner was.
CREATE OR REPLACE FUNCTION coexist.revoke_edit_lock(target regclass, record_key bigint, actor text,
                                                    job text DEFAULT NULL,
                                                    run_id bigint DEFAULT NULL,
                                                    item_id bigint DEFAULT NULL)
RETURNS text LANGUAGE sql AS
  'SELECT coexist.revoke_edit_lock(target, record_key::text, actor, job, run_id, item_id)';

-- revoke_edit_lock(regclass,text,text,text,bigint,bigint), defined by migrations 0017 and 0017
-- (newest).
-- 0017:
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
