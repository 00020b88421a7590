-- coexist.follows_pending_item: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- follows_pending_item(text,bigint,text,text[]), defined by migrations 0019 and 0034 (newest).
--
-- Whether an earlier pending item of `job` shares a key with the item
-- `item_id` of these keys: one of its keys is an earlier item's lead key
-- (the btree queue_pending_key, probed once per key: the LATERAL ... LIMIT
-- keeps the planner from turning it into a scan of the job's pending items
-- per item), or an earlier item of several keys names one (the GIN index;
-- `|| ''` and `+ 0` keep the planner off the btrees, which would read every
-- pending item of the job). The claim's probe (db/queue_store.cpp) uses it;
-- mark_followers has the same tests inlined.
-- 0034: a cancelled item (0033) is not pending; the GIN test spells it
-- as one more `<>`, so that the index's predicate still implies the probe's.
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
