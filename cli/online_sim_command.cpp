// coexist online-sim [--duration 60s] [--json OUT] ...
// coexist online-sim reserve [--json OUT]: seed 001's experiment.

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <pqxx/pqxx>

#include "batch/check.h"
#include "cli/context.h"
#include "common/error.h"
#include "common/signals.h"
#include "config_core/duration.h"
#include "db/connection.h"
#include "db/target_table.h"
#include "online-sim/reserve.h"
#include "online-sim/simulator.h"
#include "schema/install.h"
#include "schema/migrations.h"

namespace coexist::cli {
namespace {

struct SimOptions {
  std::string duration = "60s";
  std::string json;
  std::optional<long long> seed;
  std::string latency_limit;
  std::optional<int> users;
  std::optional<int> pool;
  std::optional<double> rate;
  std::string model;
  long long seed_records = 1000;
  bool no_lost_check = false;
  bool quiet = false;
};

struct ReserveCli {
  online_sim::ReserveOptions options;
  std::string app_work = "2ms";
  std::string json;
};

std::chrono::milliseconds ParseFlagDuration(const std::string& flag, const std::string& text) {
  auto parsed = config::ParseDuration(text);
  if (!parsed) {
    throw UsageError("--" + flag + ": '" + text + "' is not a duration",
                     "write a number with a unit, e.g. 30s, 2m, 250ms.");
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text << '\n';
  if (!out) {
    throw Error(ExitCode::kCantCreate, "cannot write " + path,
                "check that its folder exists and is writable.");
  }
}

// The schema (edit-lock API) and the version trigger must be there; the
// demo table is seeded when it is the target and missing, so that the
// command works out of the box on a throwaway cluster.
// A target named in the file is checked like every command's (batch/check.h):
// a wrong key_column or version_column is located at its key (78).
void PrepareDatabase(const db::Server& server, Context& context, long long records) {
  const auto& target = context.Config().target;
  auto conn = db::Connect(server);
  if (context.HasConfigFile() && target.Name() != config::TargetTable{}.Name()) {
    batch::CheckConfig(
        *conn, context.Config(),
        {.operation = batch::CheckScope::Operation::kSkip, .privileges = false, .payloads = false});
  }
  if (!db::InstallSchema(*conn, target).target_exists) {
    if (target.Name() != config::TargetTable{}.Name()) {
      throw UnavailableError("target table " + target.Name() + " does not exist",
                             "create it, or fix target.table in the configuration.");
    }
    db::SeedDemoTable(*conn, records);
  }
}

int RunSimulation(Context& context, const SimOptions& flags) {
  config::OnlineConfig online = context.Config().online;
  if (flags.seed) online.seed = *flags.seed;
  if (flags.users) online.users = *flags.users;
  if (flags.pool) online.pool_size = *flags.pool;
  if (flags.rate) online.rate = *flags.rate;
  if (!flags.model.empty()) {  // CLI11 let only closed or open through
    online.model = flags.model == "open" ? config::LoadModel::kOpen : config::LoadModel::kClosed;
  }
  if (!flags.latency_limit.empty()) {
    online.latency_limit = ParseFlagDuration("latency-limit", flags.latency_limit);
  }
  online_sim::RunOptions options;
  options.duration = ParseFlagDuration("duration", flags.duration);
  options.progress = flags.quiet ? nullptr : &std::cerr;
  options.check_lost_updates = !flags.no_lost_check;

  const auto& server = context.ServerToErase();
  const auto& target = context.Config().target;
  PrepareDatabase(server, context, flags.seed_records);
  online_sim::Simulator simulator(server.conninfo(), target, online, options);
  simulator.Prepare();
  int signal = 0;
  online_sim::Report report;
  {
    signals::Handler handler([&simulator, &signal](int signo) {
      signal = signo;
      simulator.Stop();
    });
    report = simulator.Run();
  }
  online_sim::PrintReport(std::cout, report);
  if (!flags.json.empty()) WriteFile(flags.json, online_sim::ReportJson(report));
  return report.interrupted && signal != 0 ? 128 + signal : 0;
}

int RunReserve(Context& context, ReserveCli& flags) {
  flags.options.app_work = ParseFlagDuration("app-work", flags.app_work);
  const auto& server = context.ServerToErase();
  online_sim::Reserve reserve(server.conninfo(), flags.options);
  std::vector<online_sim::ReserveRow> rows;
  {
    signals::Handler handler([&reserve](int) { reserve.Stop(); });
    rows = reserve.Run();
  }
  online_sim::PrintReserve(std::cout, rows);
  if (!flags.json.empty()) WriteFile(flags.json, online_sim::ReserveJson(rows));
  return reserve.stopped() ? 130 : 0;
}

}  // namespace

void AddOnlineSimCommand(CLI::App& app, Context& context, int& exit_code) {
  static SimOptions flags;
  auto* sim = app.add_subcommand(
      "online-sim",
      "Run virtual online users against the target (the online: section of --config): "
      "views, optimistic, pessimistic, offline, atomic and multi-record edits, and custom kinds "
      "written in SQL; prints a progress line each "
      "second and a final table");
  sim->add_option("--duration", flags.duration, "how long to run (default 60s)");
  sim->add_option("--json", flags.json, "also write every figure as JSON to this file");
  sim->add_option("--seed", flags.seed, "random seed (default online.seed)");
  sim->add_option("--latency-limit", flags.latency_limit,
                  "count transactions slower than this as late (e.g. 50ms)");
  sim->add_option("--users", flags.users, "virtual users (closed) or workers (open)")
      ->check(CLI::Range(1, 100000));
  sim->add_option("--pool", flags.pool, "connection pool size")->check(CLI::Range(1, 10000));
  sim->add_option("--rate", flags.rate, "open model: arrivals per second")
      ->check(CLI::Range(0.001, 1e6));
  sim->add_option("--model", flags.model, "closed or open")
      ->check(CLI::IsMember({"closed", "open"}));
  sim->add_option("--records", flags.seed_records,
                  "rows of the demo table when it must be created (default 1000)")
      ->check(CLI::Range(1LL, 10000000LL));
  sim->add_flag("--no-lost-check", flags.no_lost_check,
                "skip the lost-update check (when another writer changes the same column)");
  sim->add_flag("--quiet", flags.quiet, "no progress lines");
  // Its users overwrite the target's values and reserve recreates its
  // table: the same rule as the commands that erase data.
  AddAllowDatabaseOption(*sim, context);

  static ReserveCli reserve;
  auto* sub = sim->add_subcommand(
      "reserve",
      "Seed 001's experiment: 16 clients x 25 stock reservations with 2 ms of app work, on "
      "1/4/16/256 products, by nolock, optimistic (max 10 retries), pessimistic and atomic");
  sub->add_option("--clients", reserve.options.clients, "concurrent clients (default 16)")
      ->check(CLI::Range(1, 1000));
  sub->add_option("--per-client", reserve.options.per_client,
                  "reservations per client (default 25)")
      ->check(CLI::Range(1, 1000000));
  sub->add_option("--app-work", reserve.app_work, "work between read and write (default 2ms)");
  sub->add_option("--items", reserve.options.items, "product counts (default 1,4,16,256)")
      ->delimiter(',')
      ->check(CLI::Range(1, 10000000));
  sub->add_option("--methods", reserve.options.methods,
                  "methods (default nolock,optimistic,pessimistic,atomic)")
      ->delimiter(',')
      ->check(CLI::IsMember({"nolock", "optimistic", "pessimistic", "atomic"}));
  sub->add_option("--max-retries", reserve.options.max_retries, "optimistic retries (default 10)")
      ->check(CLI::Range(0, 1000));
  sub->add_option("--seed", reserve.options.seed, "random seed (default 1)");
  sub->add_option("--json", reserve.json,
                  "write the rows as a JSON array (keys: items, method, ok, gaveup, conflicts, "
                  "stock_decreased, lost, seconds)");
  AddAllowDatabaseOption(*sub, context);
  sub->callback([&] { exit_code = RunReserve(context, reserve); });
  sim->callback([&, sub] {
    if (sub->parsed()) return;
    exit_code = RunSimulation(context, flags);
  });
}

}  // namespace coexist::cli
