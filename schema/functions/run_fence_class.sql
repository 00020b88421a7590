-- coexist.run_fence_class: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- run_fence_class(), defined by migration 0015.
--
-- 2. Run fencing (0008) held the runs row FOR KEY SHARE in every chunk
--    transaction: a heap row lock, which writes WAL and, with two or more
--    workers locking the one row, a new MultiXact per chunk. A shared
--    transaction-level advisory lock on the run's fence key does the same
--    job in memory: abandon_stale_runs takes it exclusively, so it waits for
--    the chunks in flight, and a chunk that starts afterwards waits for the
--    abandoning transaction and then reads 'abandoned' (the SELECT below is
--    a new statement, with a snapshot taken after the lock was granted).
CREATE FUNCTION coexist.run_fence_class() RETURNS integer LANGUAGE sql IMMUTABLE AS
  $$ SELECT 1668244858 $$;
