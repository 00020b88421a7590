// coexist db up|down|install|status|seed

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "batch/check.h"
#include "batch/guard.h"
#include "cli/context.h"
#include "cli/shard_report.h"
#include "cli/status_report.h"
#include "common/error.h"
#include "config/duration.h"
#include "db/cluster.h"
#include "db/connection.h"
#include "db/migrations.h"
#include "db/status.h"
#include "db/target_table.h"

namespace coexist::cli {
namespace {

std::filesystem::path DataDir(const Context& context) {
  return context.options.data_dir.empty() ? db::DefaultLocalDataDir()
                                          : std::filesystem::path(context.options.data_dir);
}

struct InstallFlags {
  bool add_version_column = false;
  std::string lock_timeout = "2s";  // of each ALTER attempt
};

std::chrono::milliseconds LockTimeout(const InstallFlags& flags) {
  auto timeout = config::ParseDuration(flags.lock_timeout);
  if (!timeout || *timeout < std::chrono::milliseconds(1) || *timeout > std::chrono::minutes(1)) {
    throw UsageError("--lock-timeout: '" + flags.lock_timeout + "' is not a duration of 1ms..1m",
                     "e.g. --lock-timeout 2s.");
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*timeout);
}

// One database's install; `on` prefixes each line ("shard s1: ", or "").
int InstallOn(const std::string& conninfo, Context& context, const InstallFlags& flags,
              const std::string& on) {
  auto conn = db::Connect(conninfo);
  const auto& target = context.Config().target;
  if (flags.add_version_column) {
    db::AddColumnAttempts how;
    how.lock_timeout = LockTimeout(flags);
    // The target and the tables of `targets:`, each in its own transaction.
    std::vector<config::TargetTable> tables = {target};
    tables.insert(tables.end(), context.Config().targets.begin(), context.Config().targets.end());
    for (const auto& table : tables) {
      if (db::AddVersionColumn(*conn, table, how)) {
        std::cout << on << "column " << table.version_column << " added to " << table.Name()
                  << '\n';
      }
    }
  }
  // With a configuration, its target must be fit (78, at the key) before
  // anything is installed; without one, the demo table may simply not be
  // seeded yet. The rights are the batch role's business, not the owner's.
  if (context.HasConfigFile()) {
    batch::CheckConfig(*conn, context.Config(),
                       {.operation = batch::CheckScope::Operation::kSkip, .privileges = false});
  }
  auto installed = db::InstallSchema(*conn, target);
  int applied = installed.migrations_applied;
  if (installed.target_exists) {
    // The guard trigger (CX003/4/5) and the job's windows: docs/database-api.md.
    batch::InstallGuard(*conn, context.Config());
  } else {
    spdlog::warn("version trigger skipped target={} reason=table_missing", target.Name());
  }
  std::cout << on << "coexist schema at version " << db::LatestVersion() << " (" << applied
            << " migration" << (applied == 1 ? "" : "s") << " applied now)\n";
  return 0;
}

// Every shard in turn when the file lists shards: one that fails is
// reported by its name and the others are installed.
int Install(Context& context, const InstallFlags& flags) {
  if (flags.add_version_column) LockTimeout(flags);  // a bad flag before any database
  if (!context.Sharded()) return InstallOn(context.Server().conninfo(), context, flags, "");
  return EachShard(context.Shards(), [&](const batch::Shard& shard) {
    return InstallOn(shard.conninfo, context, flags, "shard " + shard.name + ": ");
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
      "Check the target (78 at the key when it does not fit), apply the coexist schema's "
      "migrations and install the version and guard triggers on the target");
  static InstallFlags install_flags;
  install->add_flag("--add-version-column", install_flags.add_version_column,
                    "first add the target's missing version column (ALTER TABLE ... ADD COLUMN "
                    "version bigint NOT NULL DEFAULT 0, instant on PostgreSQL 11+), waiting at "
                    "most --lock-timeout for the table's lock per attempt, 4 attempts");
  install->add_option("--lock-timeout", install_flags.lock_timeout,
                      "with --add-version-column: the longest wait for the table's lock in one "
                      "attempt (default 2s)");
  install->callback([&] { exit_code = Install(context, install_flags); });

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
