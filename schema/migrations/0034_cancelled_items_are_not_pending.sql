-- Items cancelled by `coexist items cancel` (0033) are not pending: the key
-- order's GIN test, in the claim's probe and in the enqueue's marking,
-- said "pending" as "neither done nor dead". Its other tests name queued
-- and deferred already.
CREATE OR REPLACE FUNCTION coexist.follows_pending_item(job text, item_id bigint,
                                                        record_key text, record_keys text[])
RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM coexist.queue e
                  WHERE e.job = $1 AND e.record_key = $3
                    AND e.item_id < $2 AND e.state IN ('queued', 'deferred'))
      OR EXISTS (SELECT 1 FROM unnest($4) AS k(key)
                  CROSS JOIN LATERAL (SELECT 1 FROM coexist.queue e
                                       WHERE e.job = $1 AND e.record_key = k.key
                                         AND e.item_id < $2 AND e.state IN ('queued', 'deferred')
                                       LIMIT 1) AS found)
      OR EXISTS (SELECT 1 FROM coexist.queue e
                  WHERE e.record_keys && coalesce($4, ARRAY[$3])
                    AND e.state <> 'done' AND e.state <> 'dead' AND e.state <> 'cancelled'
                    AND e.record_keys IS NOT NULL
                    AND e.job || '' = $1 AND e.item_id + 0 < $2)
$$;

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
