#include "capacity/range_cells.h"

#include <algorithm>

#include "schema/queue_store_ops.h"

namespace coexist::capacity {

void ForgetRangeCheckpoints(pqxx::transaction_base& tx) {
  tx.exec("TRUNCATE coexist.range_checkpoints");
}

void RecordRangeChunks(pqxx::transaction_base& tx) {
  tx.exec(
      "CREATE TABLE IF NOT EXISTS public.simulate_range_chunks ("
      "  job text NOT NULL, run_id bigint, at timestamptz NOT NULL, applied bigint NOT NULL);"
      "TRUNCATE public.simulate_range_chunks;"
      "CREATE OR REPLACE FUNCTION public.simulate_range_chunk() RETURNS trigger "
      "LANGUAGE plpgsql AS $$ BEGIN "
      "  INSERT INTO public.simulate_range_chunks "
      "  VALUES (NEW.job, NEW.run_id, clock_timestamp(), NEW.applied - OLD.applied); "
      "  RETURN NULL; END $$;"
      "CREATE OR REPLACE TRIGGER simulate_range_chunk AFTER UPDATE ON coexist.range_checkpoints "
      "FOR EACH ROW WHEN (NEW.applied > OLD.applied) "
      "EXECUTE FUNCTION public.simulate_range_chunk()");
}

long long RangeLedgerMismatch(pqxx::transaction_base& tx, const std::string& job, bool finished) {
  return tx
      .exec_params1(
          "WITH ledger AS (SELECT record_key::text AS k, count(*) AS n"
          "                  FROM public.batch_ledger GROUP BY 1),"
          "     pending AS (SELECT DISTINCT k FROM coexist.items,"
          "                        unnest(coexist.item_keys(record_key, record_keys)) AS k"
          "                  WHERE job = $1 AND state IN ('queued', 'deferred', 'dead')),"
          "     expected AS (SELECT record_key::text AS k FROM public.batch_range_rows"
          "                   WHERE record_key::text NOT IN (SELECT k FROM pending))"
          " SELECT coalesce(sum(CASE WHEN l.n IS NULL THEN $2::bigint"
          "                          WHEN e.k IS NULL THEN l.n ELSE l.n - 1 END), 0)"
          "   FROM expected e FULL JOIN ledger l USING (k)",
          job, finished ? 1 : 0)[0]
      .as<long long>();
}

std::vector<ChunkPoint> ReadRangeChunks(pqxx::transaction_base& tx, const std::string& job) {
  std::vector<ChunkPoint> chunks;
  for (const auto& row :
       tx.exec_params("SELECT extract(epoch FROM c.at - r.started_at)::float8, c.applied"
                      "  FROM public.simulate_range_chunks c JOIN coexist.runs r USING (run_id)"
                      " WHERE c.job = $1",
                      job)) {
    chunks.push_back({row[0].as<double>(), row[1].as<long long>()});
  }
  for (const auto& chunk : db::ReadDoneChunks(tx, job))
    chunks.push_back({chunk.at_seconds, chunk.items});
  std::stable_sort(chunks.begin(), chunks.end(), [](const ChunkPoint& a, const ChunkPoint& b) {
    return a.at_seconds < b.at_seconds;
  });
  return chunks;
}

}  // namespace coexist::capacity
