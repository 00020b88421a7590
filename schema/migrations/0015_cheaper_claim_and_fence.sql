-- Two per-chunk costs of 0007 and 0008, made cheaper (batch_bench: one
-- worker fell from 0.28x to 0.22x of a set-based UPDATE, two workers from
-- 0.45x to 0.33x).
--
-- 1. The claim's key order (0007) probed the queue once per candidate item
--    ("is there an earlier pending item of this key?"), ~2.5 us each, 1.3 ms
--    for a chunk of 500. Now the probe is made once, when the item is
--    enqueued: follows_pending says an earlier item of its job and key was
--    pending then. An item enqueued with none can never get one (later items
--    have larger ids), so the claim probes only items that follow another.
--    Two exceptions: items of one key enqueued by concurrent transactions
--    (each does not see the other's uncommitted row: they had no order
--    between them anyway), and `queue retry --dead`, which marks the later
--    pending items of the keys it puts back (admin/queue.cpp).
ALTER TABLE coexist.queue ADD COLUMN follows_pending boolean NOT NULL DEFAULT false;

UPDATE coexist.queue q SET follows_pending = true
 WHERE q.state IN ('queued', 'deferred')
   AND EXISTS (SELECT 1 FROM coexist.queue e
                WHERE e.job = q.job AND e.record_key = q.record_key
                  AND e.item_id < q.item_id AND e.state IN ('queued', 'deferred'));

-- After each INSERT statement: it sees every row the statement inserted, so
-- repeated keys within one enqueue are marked too.
CREATE FUNCTION coexist.mark_followers() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE coexist.queue q SET follows_pending = true
    FROM new_items n
   WHERE q.item_id = n.item_id
     AND EXISTS (SELECT 1 FROM coexist.queue e
                  WHERE e.job = n.job AND e.record_key = n.record_key
                    AND e.item_id < n.item_id AND e.state IN ('queued', 'deferred'));
  RETURN NULL;
END
$$;

CREATE TRIGGER queue_mark_followers AFTER INSERT ON coexist.queue
  REFERENCING NEW TABLE AS new_items
  FOR EACH STATEMENT EXECUTE FUNCTION coexist.mark_followers();

-- 2. Run fencing (0008) held the runs row FOR KEY SHARE in every chunk
--    transaction: a heap row lock, which writes WAL and, with two or more
--    workers locking the one row, a new MultiXact per chunk. A shared
--    transaction-level advisory lock on the run's fence key does the same
--    job in memory: abandon_stale_runs takes it exclusively, so it waits for
--    the chunks in flight, and a chunk that starts afterwards waits for the
--    abandoning transaction and then reads 'abandoned' (the SELECT below is
--    a new statement, with a snapshot taken after the lock was granted).
CREATE FUNCTION coexist.run_fence_class() RETURNS integer LANGUAGE sql IMMUTABLE AS
  $$ SELECT 1668244858 $$;  -- "coex" + 2; job_lock_class() is "coex" + 1

CREATE FUNCTION coexist.hold_run(run_id bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(coexist.run_fence_class(),
                                       (hold_run.run_id % 2147483647)::integer);
  RETURN EXISTS (SELECT 1 FROM coexist.runs r
                  WHERE r.run_id = hold_run.run_id AND r.outcome = 'running');
END
$$;

-- As in 0008, and the fence: the rows stay locked FOR UPDATE too, so a
-- worker of a version that still holds the row FOR KEY SHARE is waited for.
CREATE OR REPLACE FUNCTION coexist.abandon_stale_runs(job text)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT ru.run_id FROM coexist.runs ru
            WHERE ru.job = abandon_stale_runs.job AND ru.outcome = 'running'
            ORDER BY ru.run_id
            FOR UPDATE LOOP
    IF pg_try_advisory_xact_lock(coexist.run_lock_class(), (r.run_id % 2147483647)::integer) THEN
      PERFORM pg_advisory_xact_lock(coexist.run_fence_class(), (r.run_id % 2147483647)::integer);
      UPDATE coexist.runs SET outcome = 'abandoned', ended_at = clock_timestamp()
       WHERE run_id = r.run_id;
      INSERT INTO coexist.events (kind, job, run_id, actor)
      VALUES ('run_abandoned', abandon_stale_runs.job, r.run_id, 'coexist');
      RETURN NEXT r.run_id;
    END IF;
  END LOOP;
END
$$;
