-- coexist.finish_lock_class: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- finish_lock_class(), defined by migration 0024.
--
-- A run that ends reads the job's runs that worked alongside it (shared
-- runs: the job's figures for its summary and metrics). The ends of one
-- job's runs take turns on this transaction-level lock, so the last to end
-- reads every other run's final counts, not a count from before their end.
CREATE FUNCTION coexist.finish_lock_class() RETURNS integer LANGUAGE sql IMMUTABLE AS
  $$ SELECT 1668244859 $$;
