-- coexist.guard_condition: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- guard_condition(), defined by migration 0025.
--
-- The WHEN clause of the guard trigger: online writers only.
CREATE FUNCTION coexist.guard_condition() RETURNS text LANGUAGE sql IMMUTABLE AS
  $$ SELECT $c$current_setting('coexist.actor', true) IS DISTINCT FROM 'batch'$c$ $$;
