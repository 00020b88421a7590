-- coexist.live_run: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- live_run(text), defined by migration 0030.
CREATE FUNCTION coexist.live_run(job text) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT r.run_id FROM coexist.runs r
   WHERE r.job = live_run.job AND r.outcome = 'running'
     AND r.heartbeat_at > clock_timestamp() - coexist.live_run_heartbeat()
   ORDER BY r.run_id DESC LIMIT 1
$$;
