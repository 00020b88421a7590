// Benchmark (not a test): the online simulator against pgbench on the same
// throwaway cluster, side by side in one run, and the simulator's footprint
// with 2,000 virtual users.
//
//   build/bench/online_sim_bench [--seconds 10] [--rounds 2] [--only reserve]
//
// 1. Throughput: one single-statement transaction (the `view` kind,
//    SELECT stock, version FROM products WHERE id = $1 over 1,000 rows),
//    16 clients, no think time, against pgbench -M prepared -c 16 running
//    the same statement from a custom script (-f); pgbench with -j 1
//    (the simulator drives its users from one thread) and, for reference,
//    -j 2. Rounds alternate; the best of each is compared.
// 2. Footprint: `coexist online-sim` with 2,000 users, 1 s mean think time,
//    a pool of 32 and the default mix, as a child process; its thread count
//    and peak resident memory (VmHWM) are read from /proc.
// 3. Seed 001's `reserve` (16 clients x 25, 2 ms of app work) for
//    pessimistic at 1 item and atomic at 1 and 256 items, beside what this
//    machine allows: the same reservations from one client (every round
//    trip and every 2 ms still paid, no lock ever waited for), pgbench
//    running the seed's transaction from a -f script (-c 16 -j 1 -t 25,
//    \gset and \sleep 2 ms), and how late a 2 ms sleep wakes here. The
//    targets (1.15 x 0.8 s serial, 2 x 50 ms per client) count the app work
//    alone; the one-client run shows what the round trips add on top.

#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <pqxx/pqxx>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_cli.h"
#include "db/cluster.h"
#include "db/connection.h"
#include "db/target_table.h"
#include "online-sim/reserve.h"
#include "online-sim/simulator.h"
#include "schema/install.h"
#include "schema/migrations.h"

namespace {

using coexist::online_sim::Report;
namespace fs = std::filesystem;

double SimulatorTps(const std::string& conninfo, int seconds) {
  coexist::config::OnlineConfig config;
  config.mix = {1, 0, 0, 0, 0, 0};
  config.users = 16;
  config.pool_size = 16;
  config.think_time = std::chrono::milliseconds(0);
  config.think_distribution = coexist::config::ThinkDistribution::kFixed;
  config.app_work = std::chrono::milliseconds(0);
  coexist::online_sim::RunOptions options;
  options.duration = std::chrono::seconds(seconds);
  options.check_lost_updates = false;
  coexist::online_sim::Simulator simulator(conninfo, coexist::config::TargetTable{}, config,
                                           options);
  simulator.Prepare();
  Report report = simulator.Run();
  return report.throughput;
}

std::string Capture(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  pclose(pipe);
  return out;
}

// `load` is pgbench's client and length options, e.g. "-c 16 -j 1 -T 10".
double PgbenchTps(const std::string& conninfo, const fs::path& script, const std::string& load) {
  std::string command = "/usr/lib/postgresql/15/bin/pgbench -n -M prepared " + load + " -f " +
                        script.string() + " '" + conninfo + "' 2>&1";
  std::string out = Capture(command);
  std::smatch match;
  if (!std::regex_search(out, match, std::regex(R"(tps = ([0-9.]+))"))) {
    std::cerr << "pgbench failed:\n" << out;
    std::exit(1);
  }
  return std::stod(match[1]);
}

long long StatusField(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1);
  }
  return -1;
}

void Footprint(const std::string& conninfo, int seconds) {
  fs::path config = fs::temp_directory_path() / ("online-sim-bench-" + std::to_string(getpid()));
  std::ofstream(config.string() + ".yaml") << "online:\n  users: 2000\n  pool_size: 32\n"
                                              "  think_time: 1s\n  think_distribution: "
                                              "exponential\n";
  std::string json = config.string() + ".json";
  pid_t child = fork();
  if (child == 0) {
    // Its table goes nowhere; the figures come from its --json file.
    if (FILE* null = std::fopen("/dev/null", "w")) dup2(fileno(null), STDOUT_FILENO);
    std::string config_arg = config.string() + ".yaml";
    std::string duration = std::to_string(seconds) + "s";
    execl(COEXIST_BINARY, COEXIST_BINARY, "--database-url", conninfo.c_str(), "--config",
          config_arg.c_str(), "--log-level", "warn", "online-sim", "--quiet", "--duration",
          duration.c_str(), "--json", json.c_str(), "--allow-database", "coexist", nullptr);
    _exit(127);
  }
  long long threads = 0;
  long long hwm_kb = 0;
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    threads = std::max(threads, StatusField(child, "Threads"));
    hwm_kb = std::max(hwm_kb, StatusField(child, "VmHWM"));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  std::smatch tx;
  std::string doc = text.str();
  std::regex_search(doc, tx, std::regex(R"("throughput": ([0-9.]+))"));
  std::printf(
      "2000 users, 1 s mean think, pool 32, %d s: exit=%d threads(max)=%lld "
      "peak_rss=%.1f MB throughput=%s tx/s\n",
      seconds, WIFEXITED(status) ? WEXITSTATUS(status) : -1, threads,
      static_cast<double>(hwm_kb) / 1024, tx.size() > 1 ? tx[1].str().c_str() : "?");
  bool ran = WIFEXITED(status) && WEXITSTATUS(status) == 0 && hwm_kb > 0;
  if (!ran) {
    std::printf("  footprint run FAILED: no figures\n");
  } else {
    std::printf("  targets: threads <= 4 %s, peak_rss < 256 MB %s\n",
                threads <= 4 ? "MET" : "MISSED", hwm_kb < 256 * 1024 ? "MET" : "MISSED");
  }
  fs::remove(config.string() + ".yaml");
  fs::remove(json);
}

double ReserveSeconds(const std::string& conninfo, const std::string& method, int items,
                      int clients, int per_client) {
  coexist::online_sim::ReserveOptions options;
  options.clients = clients;
  options.per_client = per_client;
  options.items = {items};
  options.methods = {method};
  coexist::online_sim::Reserve reserve(conninfo, options);
  auto rows = reserve.Run();
  if (rows.size() != 1 || rows[0].ok != clients * per_client) {
    std::fprintf(stderr, "reserve %s at %d items did not reserve %d\n", method.c_str(), items,
                 clients * per_client);
    std::exit(1);
  }
  return rows[0].seconds;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// How late a 2 ms sleep wakes (the median of 200): the floor under every
// `app_work`.
double SleepOvershootMicros() {
  std::vector<double> late;
  for (int i = 0; i < 200; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
    late.push_back(spent.count() - 2000);
  }
  return Median(std::move(late));
}

struct ReserveCase {
  std::string method;
  int items;
  double bound_seconds;  // the target: app work alone, times the allowed factor
  const char* bound_text;
  std::vector<double> coexist, one_client, pgbench;
};

void ReserveBeside(const std::string& conninfo, const fs::path& dir, int rounds) {
  {
    auto conn = coexist::db::Connect(conninfo);
    coexist::db::InstallMigrations(*conn);
    pqxx::work tx(*conn);
    tx.exec(
        "CREATE SCHEMA IF NOT EXISTS bench_reserve;"
        "DROP TABLE IF EXISTS bench_reserve.product;"
        "CREATE TABLE bench_reserve.product (id bigint PRIMARY KEY, stock bigint NOT NULL,"
        " version bigint NOT NULL DEFAULT 0);"
        "INSERT INTO bench_reserve.product (id, stock)"
        " SELECT g, 1000000000 FROM generate_series(1, 256) g;"
        "SELECT coexist.install_version_trigger('bench_reserve.product', 'version')");
    tx.commit();
  }
  // The seed's transactions; `reserve` runs the same SQL (docs/online-sim.md).
  auto script = [&dir](const std::string& name, const std::string& text) {
    fs::path path = dir / (name + ".sql");
    std::ofstream(path) << text;
    fs::permissions(path, fs::perms::others_read, fs::perm_options::add);
    return path;
  };
  fs::path pessimistic = script("pessimistic",
                                "BEGIN;\n"
                                "SELECT stock AS s FROM bench_reserve.product WHERE id = 1 "
                                "FOR UPDATE \\gset\n"
                                "\\sleep 2 ms\n"
                                "UPDATE bench_reserve.product SET stock = :s - 1 WHERE id = 1;\n"
                                "COMMIT;\n");
  auto atomic = [&script](int items) {
    return script("atomic" + std::to_string(items),
                  "\\set id random(1, " + std::to_string(items) +
                      ")\n"
                      "UPDATE bench_reserve.product SET stock = stock - 1 "
                      "WHERE id = :id AND stock - 1 >= 0 RETURNING stock;\n"
                      "\\sleep 2 ms\n");
  };
  std::vector<ReserveCase> cases = {{"pessimistic", 1, 0.92, "<= 0.92 s (1.15 x 0.8 s)"},
                                    {"atomic", 1, 0.10, "<= 0.10 s (2 x 50 ms)"},
                                    {"atomic", 256, 0.10, "<= 0.10 s (2 x 50 ms)"}};
  std::vector<double> overshoot;
  for (int round = 1; round <= rounds; ++round) {
    for (auto& c : cases) {
      bool serial = c.method == "pessimistic";
      fs::path path = serial ? pessimistic : atomic(c.items);
      c.coexist.push_back(ReserveSeconds(conninfo, c.method, c.items, 16, 25));
      // Pessimistic on one item is serial: one client makes all 400. Atomic
      // is bounded per client: one client makes its 25.
      c.one_client.push_back(ReserveSeconds(conninfo, c.method, c.items, 1, serial ? 400 : 25));
      c.pgbench.push_back(400 / PgbenchTps(conninfo, path, "-c 16 -j 1 -t 25"));
      std::printf("round %d: %-11s items=%-3d coexist %.3f s, one client %.3f s, pgbench %.3f s\n",
                  round, c.method.c_str(), c.items, c.coexist.back(), c.one_client.back(),
                  c.pgbench.back());
    }
    overshoot.push_back(SleepOvershootMicros());
  }
  std::printf("seed 001 reserve, 16 clients x 25, 2 ms app work, median of %d:\n", rounds);
  std::printf("  a 2 ms sleep wakes %.0f us late on this machine\n", Median(overshoot));
  for (const auto& c : cases) {
    double coexist = Median(c.coexist);
    double one = Median(c.one_client);
    double pgbench = Median(c.pgbench);
    std::printf(
        "  %-11s items=%-3d coexist %.3f s  target %s %s\n"
        "                          one client %.3f s (coexist/one client %.2fx), "
        "pgbench %.3f s (coexist/pgbench %.2fx)\n",
        c.method.c_str(), c.items, coexist, c.bound_text,
        coexist <= c.bound_seconds ? "MET" : "MISSED", one, coexist / one, pgbench,
        coexist / pgbench);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 10;
  int rounds = 2;
  std::string only;
  CLI::App app{
      "The online simulator against pgbench on one throwaway cluster, its footprint "
      "with 2,000 users, and seed 001's reserve (docs/online-sim.md)."};
  app.add_option("--seconds", seconds, "length of each throughput measurement (default 10)")
      ->check(CLI::Range(1, 3600));
  app.add_option("--rounds", rounds, "alternating rounds, the best of each kept (default 2)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--only", only, "reserve: only part 3, seed 001's reserve")
      ->check(CLI::IsMember({"reserve"}));
  coexist::bench::ParseOrExit(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  auto cluster = coexist::db::TempCluster::Start();
  std::string conninfo = cluster->ConnectionString();
  if (only == "reserve") {
    ReserveBeside(conninfo, cluster->dir(), rounds);
    return 0;
  }
  {
    auto conn = coexist::db::Connect(conninfo);
    coexist::db::SeedDemoTable(*conn, 1000);
  }
  fs::path script = cluster->dir() / "view.sql";
  std::ofstream(script) << "\\set id random(1, 1000)\n"
                           "SELECT stock, version FROM public.products WHERE id = :id;\n";
  std::filesystem::permissions(script, fs::perms::others_read, fs::perm_options::add);

  double best_sim = 0, best_pg1 = 0, best_pg2 = 0;
  for (int round = 1; round <= rounds; ++round) {
    double sim = SimulatorTps(conninfo, seconds);
    std::string length = " -T " + std::to_string(seconds);
    double pg1 = PgbenchTps(conninfo, script, "-c 16 -j 1" + length);
    double pg2 = PgbenchTps(conninfo, script, "-c 16 -j 2" + length);
    std::printf("round %d: simulator %.0f tx/s, pgbench -j1 %.0f tx/s, pgbench -j2 %.0f tx/s\n",
                round, sim, pg1, pg2);
    best_sim = std::max(best_sim, sim);
    best_pg1 = std::max(best_pg1, pg1);
    best_pg2 = std::max(best_pg2, pg2);
  }
  std::printf("single-statement transaction, 16 clients, %d s, best of %d:\n", seconds, rounds);
  std::printf("  simulator (1 thread)   %10.0f tx/s\n", best_sim);
  std::printf("  pgbench -M prepared -j1 %9.0f tx/s   ratio %.2fx %s\n", best_pg1,
              best_sim / best_pg1,
              best_sim >= best_pg1 ? "(target >= 1.0x MET)" : "(target MISSED)");
  std::printf("  pgbench -M prepared -j2 %9.0f tx/s   ratio %.2fx\n", best_pg2,
              best_sim / best_pg2);
  Footprint(conninfo, seconds);
  ReserveBeside(conninfo, cluster->dir(), rounds);
  return 0;
}
