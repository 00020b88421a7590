-- queue_record (0001) indexed every item's record_key, done ones included,
-- and no statement of coexist reads the queue by record_key alone: the
-- claim's probe, mark_followers and `queue retry --dead` go through
-- queue_pending_key (job, record_key, item_id) of pending items (0007) and
-- the GIN index of 0019. Marking an item done is an update that changes
-- `state` (a column of partial index predicates), so it is never HOT and
-- inserts into every full index: this one cost a quarter of each
-- completion (200,000 items: 1.19 s with it, 0.89 s without).
DROP INDEX coexist.queue_record;
