// Shared runs benchmark (not a test): how one job's throughput grows with
// the number of `coexist batch run` processes in shared mode
// (batch.runs: shared), and what shared mode costs a lone process.
// A queue of N items (default 100,000) over N rows, a single-row UPDATE
// per item, policy skip_locked, fixed chunks, no online load, one worker
// per process; side by side in one run:
//   exclusive, 1 process; shared, 1, 2 and 3 processes,
// each measured `--rounds` times (default 2, interleaved, best kept) on a
// fresh queue of its own job over the same rows. A measurement's rate is
// the items its processes did over the longest of their runs (each run's
// `seconds`, from its start to its summary; the processes start together).
// Prints the rates, the scaling over one shared process, and the overhead
// of shared over exclusive mode at one process (target <= 10 %).
//   build/bench/shared_bench [--records N] [--chunk N] [--rounds N]

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "batch/enqueue.h"
#include "batch/guard.h"
#include "bench/bench_cli.h"
#include "common/subprocess.h"
#include "config/config.h"
#include "db/cluster.h"
#include "db/connection.h"
#include "db/target_table.h"
#include "schema/install.h"
#include "schema/migrations.h"
#include "schema/queue_store_ops.h"

namespace {

using namespace coexist;
namespace fs = std::filesystem;

std::string ConfigText(const std::string& job, const std::string& runs, int chunk) {
  return "target: {table: public.products}\n"
         "batch: {job: " +
         job + ", chunk_size: " + std::to_string(chunk) + ", workers: 1, runs: " + runs +
         "}\n"
         // Fixed chunks: every measurement does the same statements.
         "pacing: {adaptive: false}\n"
         "policy: {name: skip_locked}\n"
         "operation:\n"
         "  chunk_sql: UPDATE public.products SET stock = stock + 1 WHERE id = ANY "
         "($1::bigint[])\n";
}

void Vacuum(pqxx::connection_base& conn) {
  pqxx::nontransaction tx(conn);
  tx.exec("VACUUM ANALYZE public.products");
  db::VacuumQueue(tx);
}

struct Measurement {
  double rate = 0;                // items / the longest run's seconds
  std::vector<long long> shares;  // items each process did
};

// `processes` runs of a fresh job of `records` items, started together.
Measurement Measure(const std::string& conninfo, pqxx::connection& conn, const fs::path& dir,
                    const std::string& job, const std::string& runs, int processes,
                    long long records, int chunk) {
  batch::EnqueueSelect(conninfo, job,
                       "SELECT g FROM generate_series(1, " + std::to_string(records) + ") g");
  Vacuum(conn);
  std::string config = (dir / (job + ".yaml")).string();
  std::ofstream(config) << ConfigText(job, runs, chunk);
  std::vector<pid_t> pids;
  std::vector<std::string> summaries;
  for (int i = 0; i < processes; ++i) {
    summaries.push_back((dir / (job + "." + std::to_string(i) + ".json")).string());
    SpawnOptions options;
    options.argv = {COEXIST_BINARY, "--database-url", conninfo, "--config",
                    config,         "--log-level",    "warn",   "batch",
                    "run",          "--no-install",   "--json", summaries.back()};
    options.output_path = (dir / (job + "." + std::to_string(i) + ".log")).string();
    options.parent_death_signal = SIGKILL;
    pids.push_back(Spawn(options));
  }
  Measurement m;
  double longest = 0;
  long long done = 0;
  for (int i = 0; i < processes; ++i) {
    int status = WaitForExit(pids[static_cast<size_t>(i)]);
    if (status != 0) {
      std::fprintf(stderr, "%s: process %d exited %d (log: %s.%d.log)\n", job.c_str(), i, status,
                   (dir / job).c_str(), i);
    }
    auto summary = nlohmann::json::parse(std::ifstream(summaries[static_cast<size_t>(i)]), nullptr,
                                         /*allow_exceptions=*/false);
    if (!summary.is_object()) {  // the run failed before its summary
      m.shares.push_back(0);
      continue;
    }
    longest = std::max(longest, summary["seconds"].get<double>());
    m.shares.push_back(summary["done"].get<long long>());
    done += m.shares.back();
  }
  if (done != records) {
    std::fprintf(stderr, "%s: %lld of %lld items done\n", job.c_str(), done, records);
  }
  m.rate = longest > 0 ? done / longest : 0;
  return m;
}

std::string Shares(const std::vector<long long>& shares) {
  std::string text;
  for (long long n : shares) text += (text.empty() ? "" : " / ") + std::to_string(n);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  long long records = 100'000;
  int chunk = 500;
  int rounds = 2;
  CLI::App app{
      "Shared runs benchmark: one job's throughput with 1, 2 and 3 `coexist batch run` "
      "processes in shared mode, and shared against exclusive mode at one process "
      "(docs/batch.md, \"Shared runs\")."};
  app.add_option("--records", records, "rows and queue items (default 100000)")
      ->check(CLI::Range(1LL, 1'000'000'000LL));
  app.add_option("--chunk", chunk, "items per chunk (default 500)")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--rounds", rounds,
                 "interleaved rounds of every measurement, the best kept (default 2; below 1: 1)");
  bench::ParseOrExit(app, argc, argv);
  rounds = std::max(1, rounds);
  spdlog::set_level(spdlog::level::warn);
  auto cluster = db::TempCluster::Start();
  std::string conninfo = cluster->ConnectionString();
  auto conn = db::Connect(conninfo, "coexist-bench");
  fs::path dir = fs::temp_directory_path() / ("cx-shared-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::printf("seeding %lld rows...\n", records);
  db::InstallMigrations(*conn);
  db::SeedDemoTable(*conn, records);
  batch::InstallGuard(
      *conn, batch::CheckConfig(
                 *conn, config::LoadString(ConfigText("bench", "shared", chunk), "bench.yaml"),
                 batch::kInstallCheck));

  // The four measurements, interleaved round by round so that the table's
  // growth and the cache weigh on each alike; the best round counts.
  struct Case {
    const char* runs;
    int processes;
    Measurement best;
  };
  std::vector<Case> cases = {
      {"exclusive", 1, {}}, {"shared", 1, {}}, {"shared", 2, {}}, {"shared", 3, {}}};
  for (int round = 0; round < rounds; ++round) {
    for (auto& c : cases) {
      std::string job =
          std::string(c.runs) + "_" + std::to_string(c.processes) + "p_r" + std::to_string(round);
      auto m = Measure(conninfo, *conn, dir, job, c.runs, c.processes, records, chunk);
      std::printf("  round %d: %-9s %d process%s %10.0f items/s  (%s)\n", round + 1, c.runs,
                  c.processes, c.processes == 1 ? "  " : "es", m.rate, Shares(m.shares).c_str());
      if (m.rate > c.best.rate) c.best = m;
    }
  }
  fs::remove_all(dir);

  double exclusive = cases[0].best.rate;
  double one = cases[1].best.rate;
  std::printf(
      "\n%lld items, chunk %d, skip_locked, single-row UPDATE, 1 worker per process, no online "
      "load, best of %d round%s\n",
      records, chunk, rounds, rounds == 1 ? "" : "s");
  std::printf("  exclusive, 1 process   %10.0f items/s\n", exclusive);
  std::printf("  shared, 1 process      %10.0f items/s  %.2fx exclusive (overhead %.1f %%)\n", one,
              one / exclusive, 100.0 * (1.0 - one / exclusive));
  for (size_t i = 2; i < cases.size(); ++i) {
    const auto& c = cases[i];
    std::printf("  shared, %d processes    %10.0f items/s  %.2fx 1 shared process  (shares %s)\n",
                c.processes, c.best.rate, c.best.rate / one, Shares(c.best.shares).c_str());
  }
  std::printf(
      "  target: shared mode costs a lone process <= 10 %% (>= 0.90x exclusive); the scaling "
      "stops where the CPU does (nproc %ld, PostgreSQL on the same cores)\n",
      sysconf(_SC_NPROCESSORS_ONLN));
  return 0;
}
