-- An event about an item of several records (item_deferred, item_escalated,
-- item_dead) names its lead key in record_key, as before, and all its keys
-- in details.keys, so that `coexist events --record K` finds it by any of
-- them (db/events.cpp).
CREATE FUNCTION coexist.keys_detail(record_keys text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN record_keys IS NULL THEN '{}'::jsonb
              ELSE jsonb_build_object('keys', to_jsonb(record_keys)) END
$$;
