-- coexist.replace_trigger_function: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- replace_trigger_function(text,text,boolean), defined by migration 0030.
CREATE FUNCTION coexist.replace_trigger_function(fn text, body text, definer boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF to_regproc(fn) IS NULL
     OR (SELECT p.prosrc IS DISTINCT FROM body OR p.prosecdef IS DISTINCT FROM definer
           FROM pg_proc p WHERE p.oid = to_regproc(fn)) THEN
    EXECUTE format('CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql %s AS %L', fn,
                   CASE WHEN definer THEN 'SECURITY DEFINER SET search_path = pg_catalog, pg_temp'
                        ELSE '' END,
                   body);
  END IF;
END
$$;
