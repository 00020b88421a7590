-- coexist.point_trigger: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- point_trigger(regclass,name,text,text,text), defined by migrations 0009 and 0025 (newest).
-- 0009:
-- Points the target's row trigger `trigger_name` at `fn`, creating it when
-- missing. Nothing happens (and no table lock is taken) when it already
-- does. A trigger that called another function (the name before 0009) is
-- replaced, and that function and the pre-0009 names of this target's
-- function are dropped when no trigger uses them any more (a cut name could
-- be shared with another target, whose next install drops it).
-- 0025:
-- As in 0009; a guard trigger (kind 'guard') gets guard_condition() as its
-- WHEN clause, so the installers (install_guard_trigger, 0017) call it as
-- before. A trigger that calls the wanted function is left alone when it
-- has a WHEN clause exactly when one is wanted.
CREATE OR REPLACE FUNCTION coexist.point_trigger(target regclass, trigger_name name,
                                                 events text, kind text, fn text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  previous oid;
  has_condition boolean;
  condition text := CASE WHEN kind = 'guard' THEN coexist.guard_condition() END;
  wanted oid := to_regproc(fn);
  stale oid;
  definition text := format('CREATE OR REPLACE TRIGGER %I %s ON %s FOR EACH ROW %s EXECUTE FUNCTION %s()',
                            trigger_name, events, target,
                            CASE WHEN condition IS NOT NULL THEN format('WHEN (%s)', condition)
                                 ELSE '' END, fn);
BEGIN
  SELECT t.tgfoid, t.tgqual IS NOT NULL INTO previous, has_condition FROM pg_trigger t
   WHERE t.tgrelid = target AND t.tgname = trigger_name;
  IF previous = wanted THEN
    IF has_condition = (condition IS NOT NULL) THEN
      RETURN;
    END IF;
    -- Only the WHEN clause differs: worth the table lock only when it comes
    -- at once (within lock_timeout).
    BEGIN
      EXECUTE definition;
    EXCEPTION WHEN lock_not_available THEN
      RAISE NOTICE 'trigger % on % kept without its WHEN clause: the table is busy', trigger_name,
        target USING HINT = 'the next install tries again.';
    END;
    RETURN;
  END IF;
  EXECUTE definition;
  FOR stale IN
    SELECT DISTINCT p.oid FROM pg_proc p
     WHERE p.pronamespace = 'coexist'::regnamespace AND p.oid <> wanted
       AND (p.oid = previous
            OR p.oid = to_regproc(format('coexist.%I', kind || ':' || target::text))
            OR p.oid = to_regproc(format('coexist.%I', kind || ':' || (
                 SELECT format('%I.%I', n.nspname, c.relname)
                   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE c.oid = target))))
       AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgfoid = p.oid)
  LOOP
    EXECUTE format('DROP FUNCTION %s', stale::regprocedure);
  END LOOP;
END
$$;
