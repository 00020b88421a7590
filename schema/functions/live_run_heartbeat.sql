-- coexist.live_run_heartbeat: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- live_run_heartbeat(), defined by migration 0030.
--
-- The run of `job` that is working now: outcome running and a heartbeat no
-- older than this (the control loop beats every second; a killed run stops
-- counting here long before abandon_stale_runs marks it).
CREATE FUNCTION coexist.live_run_heartbeat() RETURNS interval LANGUAGE sql IMMUTABLE AS
  $$ SELECT interval '15 seconds' $$;
