-- Range jobs with shared runs, and their progress from the key range.
--
-- Several runs of one job (batch.runs: shared) walk one pass together: the
-- first to start it splits the key range, the others join it. Starting a
-- pass takes this transaction-level lock, so two runs that start at once
-- split the range once (the second reads the first's segments).
CREATE FUNCTION coexist.range_pass_lock_class() RETURNS integer LANGUAGE sql IMMUTABLE AS
  $$ SELECT 1668244860 $$;

-- Each segment's share of the rows the predicate selected when the pass
-- started (the split is by those rows' percentiles, so the segments hold
-- about as many each): the pass's progress and ETA are its rows walked
-- (applied + exceptions) against these. Rows that come to match later are
-- walked too but not counted: an estimate, as an ETA is.
ALTER TABLE coexist.range_checkpoints ADD COLUMN expected bigint NOT NULL DEFAULT 0;
