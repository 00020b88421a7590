-- Items of several keys. An item may name several records of the target
-- (an order's product ids): queue.record_keys holds them all, distinct, in
-- the key column's order (the global lock order); record_key stays the
-- first of them, so a one-key item is unchanged (record_keys NULL) and every
-- reader of record_key sees the item's lead record.
--
-- The key order of 0007/0015 now runs over every key of an item: an item
-- waits while an earlier pending item shares any of its keys. A partial GIN
-- index answers "does an earlier pending item of several keys name one of
-- mine?"; the one-key items (all of them on most queues) are not in it.
ALTER TABLE coexist.queue ADD COLUMN record_keys text[];
-- NOT VALID: the rows already queued have no record_keys; no need to read
-- them all under this migration's lock. New rows are checked.
ALTER TABLE coexist.queue ADD CONSTRAINT queue_record_keys_lead
  CHECK (record_keys IS NULL OR (cardinality(record_keys) > 1 AND record_keys[1] = record_key))
  NOT VALID;

-- fastupdate off: a GIN index's pending list is read whole by every
-- search, and the probe below runs once per enqueued item while the
-- enqueue's own rows fill that list (50,000 items of 4 keys: 53 s with it,
-- 6.5 s without).
-- Its predicate spells "pending" as `state <> 'done' AND state <> 'dead'`
-- and the probe below says the same, which does not imply the btree
-- indexes' `state IN ('queued', 'deferred')`: on stale statistics (a queue
-- analyzed while nothing was pending) the planner otherwise read a whole
-- btree per probe.
CREATE INDEX queue_pending_several_keys ON coexist.queue USING gin (record_keys)
  WITH (fastupdate = off)
  WHERE state <> 'done' AND state <> 'dead' AND record_keys IS NOT NULL;
-- "Has this job any pending item of several keys?", asked once per enqueue
-- statement: when none, the per-item probe is 0015's. Its predicate names
-- cardinality(), not `record_keys IS NOT NULL`, so that the per-item GIN
-- test below cannot use it (as a scan of every pending item of several
-- keys per probe: batch_bench's 50,000 items of 4 keys took minutes).
CREATE INDEX queue_pending_several ON coexist.queue (job)
  WHERE state IN ('queued', 'deferred') AND cardinality(record_keys) > 1;

-- An item's keys: record_keys, or its one record_key.
CREATE FUNCTION coexist.item_keys(record_key text, record_keys text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
  $$ SELECT coalesce(record_keys, ARRAY[record_key]) $$;

-- Whether an earlier pending item of `job` shares a key with the item
-- `item_id` of these keys: one of its keys is an earlier item's lead key
-- (the btree queue_pending_key, probed once per key: the LATERAL ... LIMIT
-- keeps the planner from turning it into a scan of the job's pending items
-- per item), or an earlier item of several keys names one (the GIN index;
-- `|| ''` and `+ 0` keep the planner off the btrees, which would read every
-- pending item of the job). The claim's probe (db/queue_store.cpp) uses it;
-- mark_followers has the same tests inlined.
CREATE FUNCTION coexist.follows_pending_item(job text, item_id bigint, record_key text,
                                             record_keys text[])
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
                    AND e.state <> 'done' AND e.state <> 'dead' AND e.record_keys IS NOT NULL
                    AND e.job || '' = $1 AND e.item_id + 0 < $2)
$$;

-- After each INSERT statement (0015): when the enqueue's jobs have no
-- pending item of several keys (most queues), 0015's one probe per item;
-- otherwise follows_pending_item's three tests, inlined (a function call per
-- enqueued item costs more than the probe). On a queue never analyzed, each
-- statement of 50,000 items took 1.0 s (one key), 3.7 s (four keys) and
-- 3.3 s (one key, beside items of four).
CREATE OR REPLACE FUNCTION coexist.mark_followers() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM coexist.queue e
                  WHERE cardinality(e.record_keys) > 1 AND e.state IN ('queued', 'deferred')
                    AND e.job IN (SELECT n.job FROM new_items n)) THEN
    UPDATE coexist.queue q SET follows_pending = true
      FROM new_items n
     WHERE q.item_id = n.item_id
       AND EXISTS (SELECT 1 FROM coexist.queue e
                    WHERE e.job = n.job AND e.record_key = n.record_key
                      AND e.item_id < n.item_id AND e.state IN ('queued', 'deferred'));
    RETURN NULL;
  END IF;
  UPDATE coexist.queue q SET follows_pending = true
    FROM new_items n
   WHERE q.item_id = n.item_id
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
                        AND e.state <> 'done' AND e.state <> 'dead' AND e.record_keys IS NOT NULL
                        AND e.job || '' = n.job AND e.item_id + 0 < n.item_id));
  RETURN NULL;
END
$$;

-- Takeovers: one row per record an item took over (status_partition).
ALTER TABLE coexist.takeovers DROP CONSTRAINT takeovers_pkey;
ALTER TABLE coexist.takeovers ADD PRIMARY KEY (item_id, record_key);
