// coexist db up|down|install|status|seed

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "batch/check.h"
#include "batch/install.h"
#include "batch/worker_session.h"
#include "cli/context.h"
#include "cli/shard_report.h"
#include "cli/status_report.h"
#include "common/error.h"
#include "config_core/duration.h"
#include "db/cluster.h"
#include "db/connection.h"
#include "db/target_table.h"
#include "schema/install.h"
#include "schema/migrations.h"
#include "schema/status.h"

namespace coexist::cli {
namespace {

std::filesystem::path DataDir(const Context& context) {
  return context.options.data_dir.empty() ? db::DefaultLocalDataDir()
                                          : std::filesystem::path(context.options.data_dir);
}

struct InstallFlags {
  bool add_version_column = false;
  bool add_owner_column = false;
  bool plan = false;
  std::string lock_timeout = "2s";  // of each attempt at a table's lock
};

struct UninstallFlags {
  bool schema = false;
  bool drop_version_column = false;
  bool drop_owner_column = false;
  bool discard_queue = false;
  bool plan = false;
  std::string lock_timeout = "2s";
};

db::LockAttempts Locks(const std::string& lock_timeout) {
  auto timeout = config::ParseDuration(lock_timeout);
  if (!timeout || *timeout < std::chrono::milliseconds(1) || *timeout > std::chrono::minutes(1)) {
    throw UsageError("--lock-timeout: '" + lock_timeout + "' is not a duration of 1ms..1m",
                     "e.g. --lock-timeout 2s.");
  }
  db::LockAttempts how;
  how.lock_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*timeout);
  return how;
}

void PrintPlan(const batch::InstallPlan& plan, const std::string& on, bool ran) {
  if (plan.steps.empty()) {
    std::cout << on << "nothing to do\n";
    return;
  }
  std::cout << on << (ran ? "ran, in order:\n" : "would run, in order (nothing changed):\n");
  int n = 0;
  for (const auto& step : plan.steps) {
    std::cout << on << "  " << ++n << ". " << step.statement << '\n'
              << on << "     locks: " << step.locks << '\n';
  }
  for (const auto& change : plan.changed) std::cout << on << change << '\n';
}

// One database's install; `on` prefixes each line ("shard s1: ", or "").
// With a configuration: every check, then the steps (batch/install.h).
// Without one, only the schema and the demo table's version trigger: the
// demo table may simply not be seeded yet.
int InstallOn(const std::string& conninfo, Context& context, const InstallFlags& flags,
              const std::string& on) {
  auto conn = db::Connect(conninfo);
  const auto& target = context.Config().target;
  if (!context.HasConfigFile()) {
    if (flags.plan || flags.add_version_column || flags.add_owner_column) {
      throw UsageError("--plan and --add-*-column need a configuration",
                       "name the job's file: coexist --config FILE db install ...");
    }
    auto installed = db::InstallSchema(*conn, target);
    if (!installed.target_exists) {
      spdlog::warn("version trigger skipped target={} reason=table_missing", target.Name());
    }
    std::cout << on << "coexist schema at version " << db::LatestVersion() << " ("
              << installed.migrations_applied << " migration"
              << (installed.migrations_applied == 1 ? "" : "s") << " applied now)\n";
    return 0;
  }
  batch::InstallOptions options{.add_version_column = flags.add_version_column,
                                .add_owner_column = flags.add_owner_column,
                                .locks = Locks(flags.lock_timeout)};
  if (flags.plan) {
    PrintPlan(batch::PlanInstall(*conn, context.Config(), options), on, false);
    return 0;
  }
  auto plan = batch::Install(*conn, context.Config(), options);
  PrintPlan(plan, on, true);
  std::cout << on << "coexist schema at version " << db::LatestVersion() << '\n';
  if (context.Config().pacing.cpu_nice > 0) {
    std::cout << on << batch::DescribePrioritize(*conn, context.Config()) << '\n';
  }
  return 0;
}

// Every shard in turn when the file lists shards: one that fails is
// reported by its name and the others are installed.
int Install(Context& context, const InstallFlags& flags) {
  Locks(flags.lock_timeout);  // a bad flag before any database
  if (!context.Sharded()) return InstallOn(context.Server().conninfo(), context, flags, "");
  return EachShard(context.Shards(), [&](const batch::Shard& shard) {
    return InstallOn(shard.conninfo, context, flags, "shard " + shard.name + ": ");
  });
}

int UninstallOn(const std::string& conninfo, Context& context, const UninstallFlags& flags,
                const std::string& on) {
  auto conn = db::Connect(conninfo);
  batch::UninstallOptions options{.drop_version_column = flags.drop_version_column,
                                  .drop_owner_column = flags.drop_owner_column,
                                  .schema = flags.schema,
                                  .discard_queue = flags.discard_queue,
                                  .locks = Locks(flags.lock_timeout),
                                  .plan_only = flags.plan};
  PrintPlan(batch::Uninstall(*conn, context.Config(), options), on, !flags.plan);
  return 0;
}

int Uninstall(Context& context, const UninstallFlags& flags) {
  Locks(flags.lock_timeout);
  if (!context.HasConfigFile()) {
    throw UsageError("db uninstall needs the job's configuration",
                     "coexist --config FILE db uninstall [--schema] [--drop-version-column].");
  }
  if (!context.Sharded()) return UninstallOn(context.Server().conninfo(), context, flags, "");
  return EachShard(context.Shards(), [&](const batch::Shard& shard) {
    return UninstallOn(shard.conninfo, context, flags, "shard " + shard.name + ": ");
  });
}

int Status(Context& context, bool json) {
  const auto& server = context.Server();
  auto conn = db::Connect(server);
  auto status = db::ReadStatus(*conn, context.Config().target);
  if (json) {
    std::cout << StatusJson(status, server).dump(2) << '\n';
  } else {
    PrintStatus(std::cout, status, server);
  }
  return 0;
}

}  // namespace

void AddDbCommands(CLI::App& app, Context& context, int& exit_code) {
  auto* db = app.add_subcommand("db", "Manage the database: local cluster, schema, demo data");
  db->require_subcommand(1);

  auto* up = db->add_subcommand(
      "up", "Start a local PostgreSQL cluster that other commands use until 'db down'");
  up->callback([&] {
    auto path = DataDir(context);
    std::string conninfo = db::LocalClusterUp(path);
    std::cout << "local cluster running: " << db::DescribeConninfo(conninfo) << '\n'
              << "data folder: " << path.string() << '\n';
    exit_code = 0;
  });

  auto* down = db->add_subcommand("down", "Stop the local cluster started by 'db up'");
  static bool remove = false;
  down->add_flag("--remove", remove, "also delete its data folder");
  down->callback([&] {
    db::LocalClusterDown(DataDir(context), remove);
    std::cout << (remove ? "local cluster stopped and removed\n" : "local cluster stopped\n");
    exit_code = 0;
  });

  auto* install = db->add_subcommand(
      "install",
      "Check everything first (the target, its key and version columns, the installer's "
      "rights: 78 at the key when something does not fit, nothing changed), then apply the "
      "coexist schema's migrations and install the version and guard triggers on the target");
  static InstallFlags install_flags;
  install->add_flag("--add-version-column", install_flags.add_version_column,
                    "add the target's missing version column (ALTER TABLE ... ADD COLUMN "
                    "version bigint NOT NULL DEFAULT 0, instant on PostgreSQL 11+) after the "
                    "checks have passed");
  install->add_flag("--add-owner-column", install_flags.add_owner_column,
                    "add the configured target.owner_column when the table lacks it (ALTER "
                    "TABLE ... ADD COLUMN owner text NOT NULL DEFAULT 'online', instant) after the "
                    "checks have passed");
  install->add_flag("--plan", install_flags.plan,
                    "print each statement it would run and the lock each takes; change nothing");
  install->add_option("--lock-timeout", install_flags.lock_timeout,
                      "the longest wait for a table's lock in one attempt (ALTER TABLE, CREATE "
                      "TRIGGER), 4 attempts (default 2s): online writes queue behind a waiting "
                      "lock at most this long");
  install->callback([&] { exit_code = Install(context, install_flags); });

  auto* uninstall = db->add_subcommand(
      "uninstall",
      "Remove what db install added for the job: the guard and version triggers and their "
      "functions, the job's windows; refused while a run of the job works");
  static UninstallFlags uninstall_flags;
  uninstall->add_flag("--schema", uninstall_flags.schema,
                      "also drop schema coexist (queue, runs, events, edit locks of every job); "
                      "refused while another table has coexist's triggers or items wait");
  uninstall->add_flag("--discard-queue", uninstall_flags.discard_queue,
                      "with --schema: drop waiting items too");
  uninstall->add_flag("--drop-version-column", uninstall_flags.drop_version_column,
                      "also drop the target's version column (what --add-version-column added)");
  uninstall->add_flag("--drop-owner-column", uninstall_flags.drop_owner_column,
                      "also drop the target's owner column (what --add-owner-column added)");
  uninstall->add_flag("--plan", uninstall_flags.plan,
                      "print each statement it would run and the lock each takes; change nothing");
  uninstall->add_option("--lock-timeout", uninstall_flags.lock_timeout,
                        "the longest wait for a table's lock in one attempt (default 2s)");
  uninstall->callback([&] { exit_code = Uninstall(context, uninstall_flags); });

  auto* status =
      db->add_subcommand("status", "Print the installed schema version, target and queue");
  static bool json = false;
  status->add_flag("--json", json, "print JSON instead of text");
  status->callback([&] { exit_code = Status(context, json); });

  auto* seed = db->add_subcommand(
      "seed",
      "Create (or empty and refill) the demo table public.products with N rows; on a throwaway "
      "cluster unless --allow-database names the configured database");
  static long long records = 1000;
  static long long stock = 1000;
  seed->add_option("--records", records, "number of rows")->check(CLI::Range(1LL, 100000000LL));
  seed->add_option("--stock", stock, "initial stock of every row")->check(CLI::NonNegativeNumber);
  AddAllowDatabaseOption(*seed, context);
  seed->callback([&] {
    auto conn = db::Connect(context.ServerToErase());
    db::SeedDemoTable(*conn, records, stock);
    std::cout << "seeded public.products with " << records << " rows\n";
    exit_code = 0;
  });
}

}  // namespace coexist::cli
