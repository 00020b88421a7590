-- coexist.range_pass_lock_class: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- range_pass_lock_class(), defined by migration 0035.
--
-- Starting a range job's pass takes pg_advisory_xact_lock(
-- coexist.range_pass_lock_class(), hashtext(job)): shared runs that start
-- at once split the key range once.
CREATE FUNCTION coexist.range_pass_lock_class() RETURNS integer LANGUAGE sql IMMUTABLE AS
  $$ SELECT 1668244860 $$;
