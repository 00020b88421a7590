-- coexist.canonical_key: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- canonical_key(regclass,text), defined by migration 0017.
--
-- `record_key` in the canonical text form of `target`'s key type; as given
-- for a target coexist does not know (no guard installed) or a text key.
-- Raises 22P02 when it is not a value of that type.
CREATE FUNCTION coexist.canonical_key(target regclass, record_key text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
  key_type regtype;
  result text;
BEGIN
  SELECT t.key_type INTO key_type FROM coexist.targets t WHERE t.target = canonical_key.target;
  IF key_type IS NULL OR key_type IN ('text'::regtype, 'character varying'::regtype) THEN
    RETURN record_key;
  END IF;
  IF key_type IN ('bigint'::regtype, 'integer'::regtype, 'smallint'::regtype) THEN
    RETURN record_key::bigint::text;
  END IF;
  EXECUTE format('SELECT $1::%s::text', key_type) INTO result USING record_key;
  RETURN result;
END
$$;
