// Batch throughput benchmark (not a test): a queue of N items (default
// 1,000,000), a single-row UPDATE per item, policy skip_locked, no online
// load, 1 and 2 workers, side by side with two set-based references on the
// same rows in chunk-sized statements:
//   (a) the target UPDATE alone: UPDATE ... WHERE id BETWEEN lo AND hi;
//   (b) the writes the batch makes: that UPDATE plus the queue completion,
//       in one transaction per chunk, as plain set-based SQL.
// Prints the rates and the ratios batch/(a) and batch/(b).
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
#include "db/cluster.h"
#include "db/connection.h"
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
  tx.exec("VACUUM ANALYZE coexist.queue");
}

config::Config BenchConfig(const std::string& job, int workers, int chunk) {
  return config::LoadString("batch: {job: " + job + ", chunk_size: " + std::to_string(chunk) +
                                ", workers: " + std::to_string(workers) +
                                "}\n"
                                // Fixed chunks, like the set-based references.
                                "pacing: {adaptive: false}\n"
                                "policy: {name: skip_locked}\n"
                                "operation:\n"
                                "  chunk_sql: UPDATE public.products SET stock = stock + 1 WHERE "
                                "id = ANY ($1::bigint[])\n",
                            "bench.yaml");
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

// (b): the same update plus completing the matching queue items.
double ReferenceB(pqxx::connection& conn, const std::string& job, long long records, int chunk) {
  pqxx::nontransaction(conn).exec_params(
      "INSERT INTO coexist.queue (job, record_key) SELECT $1, g FROM generate_series(1, $2) g", job,
      records);
  auto first = pqxx::nontransaction(conn)
                   .exec_params1("SELECT min(item_id) FROM coexist.queue WHERE job = $1", job)[0]
                   .as<long long>();
  Vacuum(conn);
  conn.prepare("ref_complete",
               "UPDATE coexist.queue SET state = 'done', attempts = attempts + 1, run_id = 0,"
               " done_at = now(), updated_at = now() WHERE item_id BETWEEN $1 AND $2");
  auto start = Clock::now();
  for (long long lo = 1; lo <= records; lo += chunk) {
    pqxx::work tx(conn);
    tx.exec_prepared("ref_update", lo, lo + chunk - 1);
    tx.exec_prepared("ref_complete", first + lo - 1, first + lo + chunk - 2);
    tx.commit();
  }
  return records / Seconds(start);
}

double BatchRun(const std::string& conninfo, pqxx::connection& conn, const std::string& job,
                long long records, int workers, int chunk) {
  batch::EnqueueSelect(conninfo, job,
                       "SELECT g FROM generate_series(1, " + std::to_string(records) + ") g");
  Vacuum(conn);
  batch::RunOptions options;
  options.install = false;
  auto summary = batch::Run(conninfo, BenchConfig(job, workers, chunk), options);
  if (summary.done != records) {
    std::fprintf(stderr, "batch run finished %lld of %lld items\n", summary.done, records);
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
  double b = ReferenceB(*conn, "ref_b", records, chunk);
  double w1 = BatchRun(conninfo, *conn, "batch_1w", records, 1, chunk);
  double w2 = BatchRun(conninfo, *conn, "batch_2w", records, 2, chunk);

  std::printf("\n%lld items, chunk %d, skip_locked, single-row UPDATE, no online load\n", records,
              chunk);
  std::printf("  (a) target UPDATE alone, set-based      %10.0f rows/s\n", a);
  std::printf("  (b) UPDATE + queue completion, set-based %9.0f rows/s\n", b);
  std::printf("  batch, 1 worker                         %10.0f items/s  %.2fx (a)  %.2fx (b)\n",
              w1, w1 / a, w1 / b);
  std::printf("  batch, 2 workers                        %10.0f items/s  %.2fx (a)  %.2fx (b)\n",
              w2, w2 / a, w2 / b);
  std::printf("  targets: >= 0.25x (a) and >= 0.50x (b)\n");
  return 0;
}
