-- How often an item's operation hit statement_timeout or lock_timeout. A
-- timeout defers the item without charging an attempt (it says nothing
-- about the item), but an item that times out every time would be deferred
-- forever: at batch.max_timeouts it is dead instead (the queue store's
-- defer_items). `coexist queue retry --dead` resets it with the attempts.
ALTER TABLE coexist.queue ADD COLUMN timeouts integer NOT NULL DEFAULT 0;
