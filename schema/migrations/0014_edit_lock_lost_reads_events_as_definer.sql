-- raise_edit_lock_lost (0002) tells the online user why an edit lock is
-- gone: it looks up the edit_lock_revoked event of the lock's token. It ran
-- with the caller's rights, and the documented online role
-- (docs/operations.md, "Database roles") has no right on coexist.events (its
-- details name other owners and runs): check_edit_lock and renew_edit_lock
-- of a lost lock then failed with "permission denied for table events"
-- (42501) instead of CX002. (release_edit_lock of a lost lock returns false
-- and never raises.) SECURITY DEFINER: the function reads only the one
-- event it needs, and the caller sees only its actor.
CREATE OR REPLACE FUNCTION coexist.raise_edit_lock_lost(target regclass, record_key bigint,
                                                        token uuid)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
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
