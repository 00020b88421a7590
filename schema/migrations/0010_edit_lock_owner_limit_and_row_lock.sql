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

CREATE OR REPLACE FUNCTION coexist.acquire_edit_lock(target regclass, record_key bigint,
                                                     owner text, ttl interval)
RETURNS uuid
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  result uuid;
  holder text;
  until timestamptz;
  key_column name;
BEGIN
  IF octet_length(acquire_edit_lock.owner) > 200 THEN
    RAISE EXCEPTION 'edit-lock owner is % bytes long; at most 200 are allowed',
                    octet_length(acquire_edit_lock.owner)
      USING ERRCODE = 'string_data_right_truncation',
            HINT = 'name the owner by a user or session id, not by free text.';
  END IF;
  SELECT t.key_column INTO key_column FROM coexist.targets t
   WHERE t.target = acquire_edit_lock.target;
  IF key_column IS NOT NULL THEN
    -- FOR SHARE conflicts with every writer's row lock (the batch's FOR
    -- UPDATE and a plain UPDATE alike) but not with other acquirers.
    EXECUTE format('SELECT 1 FROM %s WHERE %I = $1 FOR SHARE', acquire_edit_lock.target,
                   key_column)
      USING acquire_edit_lock.record_key;
  END IF;
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

-- As in 0003; the payload's owner and actor are cut to 200 characters, and
-- owner_truncated says when the owner was.
CREATE OR REPLACE FUNCTION coexist.revoke_edit_lock(target regclass, record_key bigint, actor text,
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
