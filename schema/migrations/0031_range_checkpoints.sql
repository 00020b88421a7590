-- Range jobs: a job whose items are the target's rows matching a predicate
-- (batch.range.where), walked in key order, chunk by chunk, with no queue
-- row per record. The walk's place is kept here, one row per segment of
-- the key range (a run with several workers splits the range when a pass
-- starts, one segment per worker). A chunk's apply and its row's new
-- last_key commit in one transaction: a run killed mid-pass leaves the
-- checkpoint of its last committed chunk, and the next run goes on from
-- there, never applying a committed chunk's rows again.
--
-- Keys are kept as the key type's canonical text (as coexist.queue keeps
-- them) and cast back with the key column's type when the walk compares.
CREATE TABLE coexist.range_checkpoints (
  job          text        NOT NULL,
  segment      integer     NOT NULL,
  -- Every segment of one pass has the same number; the next pass starts
  -- once every segment of this one is finished.
  pass         bigint      NOT NULL,
  -- The segment's last key (inclusive); NULL: no upper bound (the last
  -- segment, which also takes rows added beyond every bound after the pass
  -- started).
  upper_key    text,
  -- The checkpoint: the last key of the segment's last committed chunk (the
  -- walk goes on with keys above it); NULL: from the segment's start. A
  -- segment after the first starts at the previous one's upper_key.
  last_key     text,
  finished     boolean     NOT NULL DEFAULT false,
  run_id       bigint,     -- the run that committed last_key
  applied      bigint      NOT NULL DEFAULT 0,  -- rows the operation was applied to
  exceptions   bigint      NOT NULL DEFAULT 0,  -- rows sent to coexist.queue instead
  started_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job, segment)
);
