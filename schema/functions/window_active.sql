-- coexist.window_active: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- window_active(text,integer[],time,time,timestamptz), defined by migration 0003.
--
-- Whether a window is active at `at`, evaluated in the window's time zone.
CREATE FUNCTION coexist.window_active(time_zone text, weekdays integer[], start_time time,
                                      end_time time, at timestamptz DEFAULT clock_timestamp())
RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT CASE
           WHEN start_time < end_time THEN
             l::time >= start_time AND l::time < end_time
             AND extract(isodow FROM l)::integer = ANY (weekdays)
           ELSE
             (l::time >= start_time AND extract(isodow FROM l)::integer = ANY (weekdays))
             OR (l::time < end_time
                 AND extract(isodow FROM l - interval '1 day')::integer = ANY (weekdays))
         END
    FROM (SELECT at AT TIME ZONE time_zone) AS local(l);
$$;
