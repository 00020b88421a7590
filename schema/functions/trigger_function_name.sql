-- coexist.trigger_function_name: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- trigger_function_name(text,regclass), defined by migration 0009.
--
-- coexist."<kind>:<schema.table, cut to fit>:<16 hex digits>", at most 63
-- bytes; NULL when the target does not exist.
CREATE FUNCTION coexist.trigger_function_name(kind text, target regclass)
RETURNS text
LANGUAGE plpgsql STABLE STRICT AS $$
DECLARE
  qualified text;
  readable text;
  budget integer := 63 - octet_length(kind) - 18;  -- two ':' and the 16 digits
BEGIN
  SELECT format('%I.%I', n.nspname, c.relname), n.nspname || '.' || c.relname
    INTO qualified, readable
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.oid = target;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  readable := left(readable, budget);
  WHILE octet_length(readable) > budget LOOP  -- multibyte characters
    readable := left(readable, -1);
  END LOOP;
  RETURN format('coexist.%I', kind || ':' || readable || ':'
                || left(encode(sha256(convert_to(qualified, 'UTF8')), 'hex'), 16));
END
$$;
