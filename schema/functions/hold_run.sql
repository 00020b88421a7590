-- coexist.hold_run: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- hold_run(bigint), defined by migration 0015.
CREATE FUNCTION coexist.hold_run(run_id bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(coexist.run_fence_class(),
                                       (hold_run.run_id % 2147483647)::integer);
  RETURN EXISTS (SELECT 1 FROM coexist.runs r
                  WHERE r.run_id = hold_run.run_id AND r.outcome = 'running');
END
$$;
