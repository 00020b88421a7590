-- The key-order probes of mark_followers (0015, 0019, 0027) are planned
-- inside the enqueue's INSERT, from the queue's statistics as they were
-- before it. When those say nothing is pending (a queue analyzed after its
-- last run finished, or never analyzed), every index of pending items looks
-- empty, and the planner may probe by job and key through the claim's index
-- queue_claimable (job, item_id) with a filter on record_key: a read of
-- every earlier pending item of the job per probe, quadratic in the
-- statement's size. batch_bench's 25,000 items of 4 records, enqueued
-- after 300,000 done items of uuid keys (long record_keys, so the right
-- index queue_pending_key is the larger one), went in at 180-187 items/s,
-- against 23,000 items/s for 10,000 of them. The ANALYZE after a large
-- enqueue (batch/enqueue.cpp) comes after the statement: too late for it.
--
-- So a trigger that fires before mark_followers (triggers of one event
-- fire in name order) analyzes the queue when the statistics count
-- fewer pending items than this statement added (queue_claimable's
-- reltuples: -1 when never analyzed). ANALYZE counts the rows this
-- transaction inserted as live, and invalidates the cached plans, so the
-- probes of mark_followers are planned on a queue that has these items; the next
-- statements of a large enqueue find the statistics fresh and do not
-- analyze again. It samples a bounded number of rows (~0.1 s). Only the
-- queue's owner may analyze it, and producers enqueue as other roles (the
-- batch's role, an application): the function runs with its owner's
-- rights (SECURITY DEFINER, search_path pinned, as 0014's), and does
-- nothing but this. ANALYZE holds its lock (SHARE UPDATE EXCLUSIVE) until
-- the enqueue commits: SKIP_LOCKED, so that an enqueue never waits for
-- another one's, or for a VACUUM; the server logs the skip, the producer
-- does not see it.
CREATE FUNCTION coexist.analyze_stale_queue() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET client_min_messages = error AS $$
DECLARE
  added bigint := (SELECT count(*) FROM new_items);
BEGIN
  IF added >= 1000
     AND (SELECT c.reltuples FROM pg_class c
           WHERE c.oid = 'coexist.queue_claimable'::regclass) < added THEN
    ANALYZE (SKIP_LOCKED) coexist.queue;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER queue_analyze_when_stale AFTER INSERT ON coexist.queue
  REFERENCING NEW TABLE AS new_items
  FOR EACH STATEMENT EXECUTE FUNCTION coexist.analyze_stale_queue();
