-- coexist.takeover_orphaned: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- takeover_orphaned(regclass,text), defined by migrations 0017 and 0017 (newest).
-- 0017:
-- As in 0013, with the key as text.
CREATE OR REPLACE FUNCTION coexist.takeover_orphaned(target regclass, record_key text)
RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
  SELECT EXISTS (SELECT 1 FROM coexist.takeovers t
                  WHERE t.target = takeover_orphaned.target
                    AND t.record_key = takeover_orphaned.record_key)
     AND NOT EXISTS (
       SELECT 1 FROM coexist.takeovers t
         JOIN pg_locks l
           ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.classid = coexist.run_lock_class()::oid
          AND l.objid = ((t.run_id % 2147483647)::integer)::oid
        WHERE t.target = takeover_orphaned.target AND t.record_key = takeover_orphaned.record_key)
$$;
