-- coexist.keys_detail: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- keys_detail(text[]), defined by migration 0023.
--
-- An event about an item of several records (item_deferred, item_escalated,
-- item_dead) names its lead key in record_key, as before, and all its keys
-- in details.keys, so that `coexist events --record K` finds it by any of
-- them (db/events.cpp).
CREATE FUNCTION coexist.keys_detail(record_keys text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN record_keys IS NULL THEN '{}'::jsonb
              ELSE jsonb_build_object('keys', to_jsonb(record_keys)) END
$$;
