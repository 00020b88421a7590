-- coexist.install_version_trigger: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- install_version_trigger(regclass,name), defined by migrations 0001 and 0009 (newest).
-- 0001:
-- Seed 000: a write path that forgets to bump the version (an admin UPDATE,
-- a bulk batch) silently defeats optimistic locking. So the database bumps
-- it on every UPDATE, whoever writes: NEW.version := OLD.version + 1.
-- One trigger function per target, generated with the column name spelled
-- out, because a generic one (jsonb_populate_record) costs far more per row.
-- 0009:
-- As in 0001, with the new name; replaces the function only when it changed
-- and touches the trigger only when it is missing or calls another function.
CREATE OR REPLACE FUNCTION coexist.install_version_trigger(target regclass, version_column name)
RETURNS void
LANGUAGE plpgsql AS $install$
DECLARE
  fn text := coexist.trigger_function_name('bump_version', target);
  column_type regtype;
BEGIN
  SELECT atttypid::regtype INTO column_type
    FROM pg_attribute
   WHERE attrelid = target AND attname = version_column AND NOT attisdropped;
  IF column_type IS NULL THEN
    RAISE EXCEPTION 'table % has no column %', target, version_column
      USING ERRCODE = 'undefined_column';
  END IF;
  IF column_type NOT IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype) THEN
    RAISE EXCEPTION 'version column %.% is %, not an integer type', target, version_column, column_type
      USING ERRCODE = 'datatype_mismatch',
            HINT = 'timestamps are a poor lock key (seed 002); use an integer version.';
  END IF;
  PERFORM coexist.replace_trigger_function(fn, format($b$
    BEGIN
      NEW.%1$I := OLD.%1$I + 1;
      RETURN NEW;
    END $b$, version_column));
  PERFORM coexist.point_trigger(target, 'coexist_bump_version', 'BEFORE UPDATE', 'bump_version',
                                fn);
END
$install$;
