-- A completed item leaves the queue; its chunk leaves one row behind.
--
-- Marking an item done was an UPDATE of its queue row: a new row version
-- and an entry in the primary key and queue_done_at (never HOT: `state` is
-- in index predicates), written for every item on top of its claim's row
-- lock. It capped one worker near 0.39x of a set-based UPDATE of the same
-- rows (batch_bench reference (b), docs/batch.md). Deleting the row instead
-- only marks the version the claim has already locked; what a done item is
-- still read for (counts, `runs show`, a run's settled items, what it did,
-- retention) is kept as one row per completing statement, with arrays of
-- its items' ids, keys, attempts and payloads.
--
-- An item with an idempotency key stays a queue row marked done, as
-- before: queue_job_idempotency_key must keep refusing its key until
-- retention removes it. Done rows already in the queue stay until then too.
CREATE TABLE coexist.done_chunks (
  chunk_id    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job         text        NOT NULL,
  run_id      bigint,
  done_at     timestamptz NOT NULL,
  -- One element per item, in the same order in every array.
  item_ids    bigint[]    NOT NULL,
  record_keys text[]      NOT NULL,  -- each item's record_key (its lead record)
  item_keys   text[]      NOT NULL,  -- each item's record_keys as text; NULL for one record
  attempts    integer[]   NOT NULL,
  payloads    jsonb[]     NOT NULL,
  CHECK (cardinality(item_ids) > 0
         AND cardinality(record_keys) = cardinality(item_ids)
         AND cardinality(item_keys) = cardinality(item_ids)
         AND cardinality(attempts) = cardinality(item_ids)
         AND cardinality(payloads) = cardinality(item_ids))
);
CREATE INDEX done_chunks_job_run ON coexist.done_chunks (job, run_id);
CREATE INDEX done_chunks_done_at ON coexist.done_chunks (done_at);

-- Every item, wherever it is kept: the queue's rows (pending, dead, and done
-- with an idempotency key) and the done chunks' items, with the queue's
-- columns. A done chunk keeps no deferral or timeout count, error or enqueue
-- time: NULL. For reading; nothing in coexist scans it
-- on a hot path.
CREATE VIEW coexist.items AS
  SELECT q.item_id, q.job, q.record_key, q.record_keys, q.payload, q.state, q.attempts,
         q.deferrals, q.timeouts, q.not_before, q.last_error, q.defer_reason, q.idempotency_key,
         q.run_id, q.enqueued_at, q.updated_at, q.done_at, q.follows_pending
    FROM coexist.queue q
  UNION ALL
  SELECT u.item_id, c.job, u.record_key, u.item_keys::text[], u.payload,
         'done'::coexist.item_state, u.attempts, NULL::integer, NULL::integer,
         NULL::timestamptz, NULL::text, NULL::text, NULL::text, c.run_id, NULL::timestamptz,
         c.done_at, c.done_at, NULL::boolean
    FROM coexist.done_chunks c,
         unnest(c.item_ids, c.record_keys, c.item_keys, c.attempts, c.payloads)
           AS u(item_id, record_key, item_keys, attempts, payload);

-- A run's settled items: done (in the queue or in chunks) and dead.
CREATE FUNCTION coexist.run_settled(job text, run_id bigint, OUT done bigint, OUT dead bigint)
LANGUAGE sql STABLE AS $$
  SELECT (SELECT count(*) FROM coexist.queue q
           WHERE q.job = run_settled.job AND q.run_id = run_settled.run_id AND q.state = 'done')
         + (SELECT coalesce(sum(cardinality(c.item_ids)), 0) FROM coexist.done_chunks c
             WHERE c.job = run_settled.job AND c.run_id = run_settled.run_id),
         (SELECT count(*) FROM coexist.queue q
           WHERE q.job = run_settled.job AND q.run_id = run_settled.run_id AND q.state = 'dead')
$$;

-- 0026's abandon_stale_runs (its comments say why each step), counting
-- through run_settled.
CREATE OR REPLACE FUNCTION coexist.abandon_stale_runs(job text)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  settled record;
BEGIN
  FOR r IN SELECT ru.run_id FROM coexist.runs ru
            WHERE ru.job = abandon_stale_runs.job AND ru.outcome = 'running'
              AND ru.backend_pid IS DISTINCT FROM pg_backend_pid()
            ORDER BY ru.run_id LOOP
    IF pg_try_advisory_xact_lock(coexist.run_lock_class(), (r.run_id % 2147483647)::integer) THEN
      PERFORM pg_advisory_xact_lock(coexist.run_fence_class(), (r.run_id % 2147483647)::integer);
      PERFORM 1 FROM coexist.runs ru WHERE ru.run_id = r.run_id AND ru.outcome = 'running'
          FOR UPDATE;
      CONTINUE WHEN NOT FOUND;
      SELECT * INTO settled FROM coexist.run_settled(abandon_stale_runs.job, r.run_id);
      UPDATE coexist.runs ru
         SET outcome = 'abandoned', ended_at = clock_timestamp(),
             done = greatest(ru.done, settled.done), dead = greatest(ru.dead, settled.dead)
       WHERE ru.run_id = r.run_id;
      INSERT INTO coexist.events (kind, job, run_id, actor, details)
      VALUES ('run_abandoned', abandon_stale_runs.job, r.run_id, 'coexist',
              jsonb_build_object('done', settled.done, 'dead', settled.dead));
      RETURN NEXT r.run_id;
    END IF;
  END LOOP;
END
$$;
