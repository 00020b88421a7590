// Benchmark (not a test): the online simulator against pgbench on the same
// throwaway cluster, side by side in one run, and the simulator's footprint
// with 2,000 virtual users.
//
//   build-sim/bench/online_sim_bench [--seconds 10] [--rounds 2]
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

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "db/cluster.h"
#include "db/connection.h"
#include "db/target_table.h"
#include "online-sim/simulator.h"

namespace {

using coexist::online_sim::Report;
namespace fs = std::filesystem;

double SimulatorTps(const std::string& conninfo, int seconds) {
  coexist::config::OnlineConfig config;
  config.mix = {1, 0, 0, 0, 0, 0};
  config.users = 16;
  config.pool_size = 16;
  config.think_time = std::chrono::milliseconds(0);
  config.think_distribution = "fixed";
  config.app_work = std::chrono::milliseconds(0);
  coexist::online_sim::RunOptions options;
  options.duration = std::chrono::seconds(seconds);
  options.check_lost_updates = false;
  coexist::online_sim::Simulator simulator(conninfo, coexist::db::TargetTable{}, config, options);
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

double PgbenchTps(const std::string& conninfo, const fs::path& script, int threads, int seconds) {
  std::string command = "/usr/lib/postgresql/15/bin/pgbench -n -M prepared -c 16 -j " +
                        std::to_string(threads) + " -T " + std::to_string(seconds) + " -f " +
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
          duration.c_str(), "--json", json.c_str(), nullptr);
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

}  // namespace

int main(int argc, char** argv) {
  int seconds = 10;
  int rounds = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--seconds") seconds = std::atoi(argv[i + 1]);
    if (flag == "--rounds") rounds = std::atoi(argv[i + 1]);
  }
  auto cluster = coexist::db::TempCluster::Start();
  std::string conninfo = cluster->ConnectionString();
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
    double pg1 = PgbenchTps(conninfo, script, 1, seconds);
    double pg2 = PgbenchTps(conninfo, script, 2, seconds);
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
  return 0;
}
