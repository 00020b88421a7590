-- Retention (`retention:` in the configuration, `coexist queue purge`)
-- deletes done items, events and finished runs older than their age, 5,000
-- rows a statement. These indexes let each statement find its rows without
-- scanning the table. Building them locks the queue against writes for as
-- long as the build takes (seconds per million items): apply this migration
-- when no batch runs.
CREATE INDEX queue_done_at ON coexist.queue (done_at) WHERE state = 'done';
CREATE INDEX runs_ended_at ON coexist.runs (ended_at) WHERE outcome <> 'running';

-- raise_edit_lock_lost (0002) looks up the edit_lock_revoked event of a
-- token on every CX002; with only events_kind_at it read every revocation
-- ever recorded.
CREATE INDEX events_revoked_token ON coexist.events ((details->>'token'))
  WHERE kind = 'edit_lock_revoked';
