// Batch throughput benchmark (not a test): a queue of N items (default
// 1,000,000), a single-row UPDATE per item, policy skip_locked, no online
// load, 1 and 2 workers, side by side with two set-based references on the
// same rows in chunk-sized statements:
//   (a) the target UPDATE alone: UPDATE ... WHERE id BETWEEN lo AND hi;
//   (b) the writes the batch cannot avoid: the queue store's own claim, the
//       target UPDATE of the claimed keys and the store's completion, in
//       one transaction per chunk, with no decisions in between.
// Prints the rates and the ratios batch/(a) and batch/(b).
// Then one worker again on the same rows keyed by uuid, against the bigint
// run: what a key kept as text costs; and one worker on items of four
// records each (operation.keys: many, a quarter as many items over the same
// rows), against the one-record items: what an item of several keys costs.
//   build-batch/bench/batch_bench [--records N] [--chunk N]

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <pqxx/pqxx>
#include <string>

#include "batch/enqueue.h"
#include "batch/guard.h"
#include "batch/runner.h"
#include "config/config.h"
#include "db/array_literal.h"
#include "db/cluster.h"
#include "db/connection.h"
#include "db/queue_store.h"
#include "db/queue_store_ops.h"
#include "db/target_table.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace coexist;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

void Vacuum(pqxx::connection_base& conn) {
  pqxx::nontransaction tx(conn);
  tx.exec("VACUUM ANALYZE public.products");
  db::VacuumQueue(tx);
}

// `key_type` "bigint": the demo table; "uuid": public.products_uuid, the
// same rows keyed by uuid (SeedUuidTable).
config::Config BenchConfig(const std::string& job, int workers, int chunk,
                           const std::string& key_type = "bigint", bool several_keys = false) {
  std::string table = key_type == "uuid" ? "public.products_uuid" : "public.products";
  // Items of several records: $1 holds one array literal of keys per item.
  std::string keys = several_keys
                         ? "IN (SELECT unnest(k::" + key_type + "[]) FROM unnest($1::text[]) AS k)"
                         : "= ANY ($1::" + key_type + "[])";
  return config::LoadString("target: {table: " + table + "}\n" + "batch: {job: " + job +
                                ", chunk_size: " + std::to_string(chunk) +
                                ", workers: " + std::to_string(workers) +
                                "}\n"
                                // Fixed chunks, like the set-based references.
                                "pacing: {adaptive: false}\n"
                                "policy: {name: skip_locked}\n"
                                "operation:\n"
                                "  keys: " +
                                (several_keys ? "many" : "one") + "\n  chunk_sql: UPDATE " + table +
                                " SET stock = stock + 1 WHERE id " + keys + "\n",
                            "bench.yaml");
}

// public.products_uuid: `records` rows like the demo table's, keyed by the
// uuid md5(g) spells, with its version trigger and guard.
void SeedUuidTable(pqxx::connection& conn, long long records, int chunk) {
  pqxx::nontransaction(conn).exec(
      "CREATE TABLE public.products_uuid (id uuid PRIMARY KEY, stock bigint NOT NULL DEFAULT "
      "1000, version bigint NOT NULL DEFAULT 0);"
      "INSERT INTO public.products_uuid (id) SELECT md5(g::text)::uuid FROM generate_series(1, " +
      std::to_string(records) + ") g");
  auto config = BenchConfig("bench_uuid", 1, chunk, "uuid");
  db::InstallVersionTrigger(conn, config.target);
  batch::InstallGuard(conn, config);
}

// (a): the target UPDATE alone, chunk by chunk, one transaction each.
double ReferenceA(pqxx::connection& conn, long long records, int chunk) {
  conn.prepare("ref_update",
               "UPDATE public.products SET stock = stock + 1 WHERE id BETWEEN $1 AND $2");
  auto start = Clock::now();
  for (long long lo = 1; lo <= records; lo += chunk) {
    pqxx::work tx(conn);
    tx.exec_prepared("ref_update", lo, lo + chunk - 1);
    tx.commit();
  }
  return records / Seconds(start);
}

// (a) on the uuid-keyed copy: the same set-based UPDATE by chunks of keys,
// in the order the batch takes them (md5(g) for g = 1, 2, ...), so that the
// cost of the keys' locality is in the reference too.
double ReferenceUuid(pqxx::connection& conn, long long records, int chunk) {
  conn.prepare("ref_update_uuid",
               "UPDATE public.products_uuid SET stock = stock + 1 WHERE id IN "
               "(SELECT md5(g::text)::uuid FROM generate_series($1::bigint, $2::bigint) g)");
  auto start = Clock::now();
  for (long long lo = 1; lo <= records; lo += chunk) {
    pqxx::work tx(conn);
    tx.exec_prepared("ref_update_uuid", lo, lo + chunk - 1);
    tx.commit();
  }
  return records / Seconds(start);
}

// (b): claim a chunk, update its keys, complete it: the queue store's own
// statements, one transaction per chunk.
double ReferenceB(const std::string& conninfo, pqxx::connection& conn, const std::string& job,
                  long long records, int chunk) {
  batch::EnqueueSelect(conninfo, job,
                       "SELECT g FROM generate_series(1, " + std::to_string(records) + ") g");
  Vacuum(conn);
  db::QueueStore queue(conn, {.job = job, .max_attempts = 1});
  long long run_id = 0;
  {
    pqxx::work tx(conn);
    run_id = queue.StartRun(tx, "reference", "{}");
    tx.commit();
  }
  conn.prepare(
      "ref_update_keys",
      "UPDATE public.products SET stock = stock + 1 WHERE id = ANY ($1::text[]::bigint[])");
  auto start = Clock::now();
  long long after = 0;
  while (true) {
    pqxx::work tx(conn);
    auto items = queue.ClaimItems(tx, run_id, chunk, after, {}, false);
    if (items.empty()) break;
    after = items.back().item_id;
    std::vector<db::RecordKey> keys;
    std::vector<long long> ids;
    for (const auto& item : items) {
      keys.push_back(item.key);
      ids.push_back(item.item_id);
    }
    tx.exec_prepared("ref_update_keys", db::ArrayLiteral(keys));
    queue.CompleteItems(tx, run_id, ids);
    tx.commit();
  }
  double rate = records / Seconds(start);
  pqxx::work tx(conn);
  queue.FinishRun(tx, run_id, "succeeded", records, records, 0, 0, "{}");
  tx.commit();
  return rate;
}

// `keys_per_item` > 1: items of that many records each (disjoint), over
// the same rows.
double BatchRun(const std::string& conninfo, pqxx::connection& conn, const std::string& job,
                long long records, int workers, int chunk, const std::string& key_type = "bigint",
                int keys_per_item = 1) {
  std::string key = key_type == "uuid" ? "md5(g::text)::uuid" : "g";
  long long items = records / keys_per_item;
  std::string n = std::to_string(keys_per_item);
  std::string select =
      keys_per_item == 1
          ? "SELECT " + key + " FROM generate_series(1, " + std::to_string(records) + ") g"
          : "SELECT ARRAY(SELECT " + n + " * i - j FROM generate_series(0, " + n +
                " - 1) j) FROM generate_series(1, " + std::to_string(items) + ") i";
  batch::EnqueueSelect(conninfo, job, select, key_type);
  Vacuum(conn);
  batch::RunOptions options;
  options.install = false;
  auto summary =
      batch::Run(conninfo, BenchConfig(job, workers, chunk, key_type, keys_per_item > 1), options);
  if (summary.counts.done != items) {
    std::fprintf(stderr, "batch run finished %lld of %lld items\n", summary.counts.done, items);
  }
  return summary.items_per_second;
}

}  // namespace

int main(int argc, char** argv) {
  long long records = 1'000'000;
  int chunk = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--records") == 0) records = std::stoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--chunk") == 0) chunk = std::stoi(argv[i + 1]);
  }
  spdlog::set_level(spdlog::level::warn);
  auto cluster = db::TempCluster::Start();
  std::string conninfo = cluster->ConnectionString();
  auto conn = db::Connect(conninfo, "coexist-bench");
  std::printf("seeding %lld rows...\n", records);
  db::SeedDemoTable(*conn, records);
  batch::InstallGuard(*conn, BenchConfig("bench", 1, chunk));
  // The references write as the batch does, through both triggers' batch path.
  pqxx::nontransaction(*conn).exec("SET coexist.actor = 'batch'");
  Vacuum(*conn);

  double a = ReferenceA(*conn, records, chunk);
  Vacuum(*conn);
  double b = ReferenceB(conninfo, *conn, "ref_b", records, chunk);
  double w1 = BatchRun(conninfo, *conn, "batch_1w", records, 1, chunk);
  double w2 = BatchRun(conninfo, *conn, "batch_2w", records, 2, chunk);
  SeedUuidTable(*conn, records, chunk);
  Vacuum(*conn);
  pqxx::nontransaction(*conn).exec("VACUUM ANALYZE public.products_uuid");
  double ua = ReferenceUuid(*conn, records, chunk);
  pqxx::nontransaction(*conn).exec("VACUUM ANALYZE public.products_uuid");
  double u1 = BatchRun(conninfo, *conn, "batch_uuid_1w", records, 1, chunk, "uuid");
  Vacuum(*conn);
  double m1 = BatchRun(conninfo, *conn, "batch_4keys_1w", records, 1, chunk, "bigint", 4);

  std::printf("\n%lld items, chunk %d, skip_locked, single-row UPDATE, no online load\n", records,
              chunk);
  std::printf("  (a) target UPDATE alone, set-based      %10.0f rows/s\n", a);
  std::printf("  (b) claim + UPDATE + complete, set-based %7.0f rows/s\n", b);
  std::printf("  batch, 1 worker                         %10.0f items/s  %.2fx (a)  %.2fx (b)\n",
              w1, w1 / a, w1 / b);
  std::printf("  batch, 2 workers                        %10.0f items/s  %.2fx (a)  %.2fx (b)\n",
              w2, w2 / a, w2 / b);
  std::printf("  (a') target UPDATE alone, uuid keys     %10.0f rows/s   %.2fx (a)\n", ua, ua / a);
  std::printf(
      "  batch, 1 worker, uuid keys              %10.0f items/s  %.2fx bigint keys  %.2fx (a')\n",
      u1, u1 / w1, u1 / ua);
  std::printf(
      "  batch, 1 worker, items of 4 records     %10.0f items/s  %.2fx one-record items  "
      "(%.0f rows/s)\n",
      m1, m1 / w1, 4 * m1);
  std::printf(
      "  targets: 1 worker >= 0.50x (a), 2 workers >= 1.00x (a), uuid >= 0.80x bigint,\n"
      "           items of 4 records >= 0.50x one-record items\n");
  return 0;
}
