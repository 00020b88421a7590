-- coexist.mark_followers: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- mark_followers(), defined by migrations 0015, 0019, 0027 and 0034 (newest).
-- 0015:
-- After each INSERT statement: it sees every row the statement inserted, so
-- repeated keys within one enqueue are marked too.
-- 0019:
-- After each INSERT statement (0015): when the enqueue's jobs have no
-- pending item of several keys (most queues), 0015's one probe per item;
-- otherwise follows_pending_item's three tests, inlined (a function call per
-- enqueued item costs more than the probe). On a queue never analyzed, each
-- statement of 50,000 items took 1.0 s (one key), 3.7 s (four keys) and
-- 3.3 s (one key, beside items of four).
-- 0027:
-- The enqueue's INSERT marks follows_pending itself where it can tell (an
-- item of one key behind an earlier item of its key, in the same statement
-- or already pending), so that mark_followers' UPDATE, which rewrote those
-- rows right after inserting them (a second version of each row and a new
-- entry in every queue index), passes them by. pacing_bench's 200,000
-- items over 50,000 keys had 150,000 such rewrites; its batch ran 8 %
-- slower from 0015 on (docs/batch.md).
--
-- follows_pending = true only asks the claim to check (follows_pending_item),
-- so an item marked by the INSERT that follows nothing is merely checked;
-- an item the INSERT left unmarked is judged here exactly as before.
-- 0034:
-- A cancelled item (0033) is not pending (follows_pending_item's GIN test).
CREATE OR REPLACE FUNCTION coexist.mark_followers() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM coexist.queue e
                  WHERE cardinality(e.record_keys) > 1 AND e.state IN ('queued', 'deferred')
                    AND e.job IN (SELECT n.job FROM new_items n)) THEN
    UPDATE coexist.queue q SET follows_pending = true
      FROM new_items n
     WHERE q.item_id = n.item_id AND NOT n.follows_pending
       AND EXISTS (SELECT 1 FROM coexist.queue e
                    WHERE e.job = n.job AND e.record_key = n.record_key
                      AND e.item_id < n.item_id AND e.state IN ('queued', 'deferred'));
    RETURN NULL;
  END IF;
  UPDATE coexist.queue q SET follows_pending = true
    FROM new_items n
   WHERE q.item_id = n.item_id AND NOT n.follows_pending
     AND (EXISTS (SELECT 1 FROM coexist.queue e
                   WHERE e.job = n.job AND e.record_key = n.record_key
                     AND e.item_id < n.item_id AND e.state IN ('queued', 'deferred'))
          OR EXISTS (SELECT 1 FROM unnest(n.record_keys) AS k(key)
                      CROSS JOIN LATERAL (SELECT 1 FROM coexist.queue e
                                           WHERE e.job = n.job AND e.record_key = k.key
                                             AND e.item_id < n.item_id
                                             AND e.state IN ('queued', 'deferred')
                                           LIMIT 1) AS found)
          OR EXISTS (SELECT 1 FROM coexist.queue e
                      WHERE e.record_keys && coalesce(n.record_keys, ARRAY[n.record_key])
                        AND e.state <> 'done' AND e.state <> 'dead' AND e.state <> 'cancelled'
                        AND e.record_keys IS NOT NULL
                        AND e.job || '' = n.job AND e.item_id + 0 < n.item_id));
  RETURN NULL;
END
$$;
