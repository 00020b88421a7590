-- coexist.run_lock_class: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- run_lock_class(), defined by migration 0003.
--
-- A run holds pg_advisory_lock(coexist.run_lock_class(), run_id) on its
-- control connection for as long as it lives; the key dies with the session.
CREATE FUNCTION coexist.run_lock_class() RETURNS integer LANGUAGE sql IMMUTABLE AS
  $$ SELECT 1668244856 $$;
