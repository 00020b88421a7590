-- coexist.run_settled: the current text of each of its forms. Migrations keep
-- frozen copies; the newest copy must equal this file, comments aside
-- (tests/schema_functions_test.cpp; CONTRIBUTING.md, "Changing a SQL function").

-- run_settled(text,bigint), defined by migration 0029.
--
-- A run's settled items: done (in the queue or in chunks) and dead.
CREATE FUNCTION coexist.run_settled(job text, run_id bigint, OUT done bigint, OUT dead bigint)
LANGUAGE sql STABLE AS $$
  SELECT (SELECT count(*) FROM coexist.queue q
           WHERE q.job = run_settled.job AND q.run_id = run_settled.run_id AND q.state = 'done')
         + (SELECT coalesce(sum(cardinality(c.item_ids)), 0) FROM coexist.done_chunks c
             WHERE c.job = run_settled.job AND c.run_id = run_settled.run_id),
         (SELECT count(*) FROM coexist.queue q
           WHERE q.job = run_settled.job AND q.run_id = run_settled.run_id AND q.state = 'dead')
$$;
