-- coexist.item_keys: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- item_keys(text,text[]), defined by migration 0019.
--
-- An item's keys: record_keys, or its one record_key.
CREATE FUNCTION coexist.item_keys(record_key text, record_keys text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
  $$ SELECT coalesce(record_keys, ARRAY[record_key]) $$;
