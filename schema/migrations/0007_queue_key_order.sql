-- Items of one key are applied one at a time, in item_id order: a run claims
-- an item only when no earlier item of its job and key is still pending
-- (queued or deferred). A set-based operation (`UPDATE ... FROM unnest(...)`,
-- `WHERE id = ANY($1)`) touches a row once however often its key repeats, so
-- two items of one key must never share a statement; and an item must not
-- overtake an earlier one of its key that was deferred ("set the price to X"
-- applied out of order loses the later price). This index answers "is there
-- an earlier pending item of this key?" for each claimed row.
CREATE INDEX queue_pending_key ON coexist.queue (job, record_key, item_id)
  WHERE state IN ('queued', 'deferred');
