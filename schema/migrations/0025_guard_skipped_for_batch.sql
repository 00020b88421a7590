-- The guard trigger is skipped for the batch's own writes. Its function
-- returned at once when coexist.actor is 'batch', but calling a PL/pgSQL
-- function per row still cost about 0.6 us of a batch row's 3-4 us
-- (docs/batch.md, "Benchmark"); a WHEN clause is evaluated without the
-- call. The function keeps its early return, for triggers installed before.
--
-- A trigger's WHEN clause can only change by re-creating it, which locks
-- the table against online writes: point_trigger re-creates a trigger whose
-- function is current but whose WHEN clause is missing only when the lock
-- comes within the installer's lock_timeout (a batch run: 5 s); otherwise
-- the old trigger, as correct and a little slower, stays until the next
-- install. This migration re-creates none itself (its lock would queue
-- behind online transactions with no timeout).

-- The WHEN clause of the guard trigger: online writers only.
CREATE FUNCTION coexist.guard_condition() RETURNS text LANGUAGE sql IMMUTABLE AS
  $$ SELECT $c$current_setting('coexist.actor', true) IS DISTINCT FROM 'batch'$c$ $$;

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
