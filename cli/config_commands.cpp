// coexist config check FILE: a configuration or a `simulate` scenario.

#include <CLI/CLI.hpp>
#include <iostream>

#include "batch/check.h"
#include "batch/worker_session.h"
#include "cli/context.h"
#include "cli/shard_report.h"
#include "common/error.h"
#include "config/config.h"
#include "config/scenario.h"
#include "config_core/duration.h"
#include "db/connection.h"

namespace coexist::cli {

namespace {

// `config check FILE --database`: the configuration against the live
// catalog (batch/check.h). Prints every problem as main prints one (config
// error + HINT) and each warning; 78 when there is a problem. `notes` gets
// the lines that say what it found (the prioritize extension, when
// pacing.cpu_priority is set), printed after the file's summary.
int CheckAgainstDatabase(Context& context, const std::string& file,
                         std::vector<std::string>& notes) {
  if (context.options.config_path.empty()) context.options.config_path = file;
  if (context.options.config_path != file) {
    throw UsageError(
        "config check " + file + " --database was given --config " + context.options.config_path,
        "give the file once: coexist config check FILE --database.");
  }
  // One database's catalog; `on` names the shard ("shard s1: ", or "").
  auto check = [&context, &notes](const std::string& conninfo, const std::string& on) {
    auto conn = db::Connect(conninfo);
    auto report = batch::CheckDatabase(*conn, context.Config(),
                                       {.operation = batch::CheckScope::Operation::kIfConfigured});
    for (const auto& warning : report.warnings) std::cerr << "warning: " << on << warning << '\n';
    if (context.Config().pacing.cpu_nice > 0) {
      notes.push_back(on + batch::DescribePrioritize(*conn, context.Config()));
    }
    for (const auto& problem : report.problems) {
      std::cerr << "config error: " << on << problem.what() << '\n';
      if (!problem.hint().empty()) std::cerr << "HINT: " << problem.hint() << '\n';
    }
    return report.problems.empty() ? 0 : ToInt(ExitCode::kConfig);
  };
  if (!context.Sharded()) return check(context.Server().conninfo(), "");
  // Every shard: one that cannot be reached is reported by its name, and
  // the others are checked.
  return EachShard(context.Shards(), [&](const batch::Shard& shard) {
    return check(shard.conninfo, "shard " + shard.name + ": ");
  });
}

// "url set (not shown)", "not set", or the shards by name (their urls not shown).
std::string DatabaseLine(const config::DatabaseConfig& database) {
  if (database.shards.empty()) return database.url ? "url set (not shown)" : "not set";
  std::string names;
  for (const auto& shard : database.shards) names += (names.empty() ? "" : ",") + shard.name;
  return "shards=" + names +
         " (urls not shown) max_parallel_shards=" + std::to_string(database.max_parallel_shards);
}

}  // namespace

void AddConfigCommands(CLI::App& app, Context& context, int& exit_code) {
  auto* config = app.add_subcommand("config", "Work with configuration files");
  config->require_subcommand(1);
  auto* check = config->add_subcommand(
      "check", "Validate a configuration file: exit 0 when valid, 78 (EX_CONFIG) otherwise");
  static std::string file;
  check->add_option("file", file, "YAML file to check")->required();
  static bool database = false;
  check->add_flag("--database", database,
                  "also check the target, the role's rights and the operation against the "
                  "database (nothing is written)");
  check->callback([&] {
    // Throws ConfigError, which main reports with file:line:column and 78.
    if (config::IsScenarioFile(file)) {
      // A `coexist simulate` scenario: every cell of its sweep is validated.
      auto scenario = config::LoadScenario(file);
      std::cout << file << ": valid scenario '" << scenario.settings.name << "', "
                << scenario.cells.size() << " cell" << (scenario.cells.size() == 1 ? "" : "s")
                << '\n';
      for (const auto& axis : scenario.sweep) {
        std::cout << "  sweep " << axis.key << ":";
        for (const auto& value : axis.values) std::cout << ' ' << value;
        std::cout << '\n';
      }
      exit_code = 0;
      return;
    }
    auto loaded = config::LoadFile(file);
    std::vector<std::string> notes;
    if (database) {
      // The file's own errors first (above), then the catalog's.
      exit_code = CheckAgainstDatabase(context, file, notes);
      if (exit_code != 0) return;
    }
    std::cout << file << ": valid\n"
              << "  target " << loaded.target.Name() << " key=" << loaded.target.key_column
              << " version=" << loaded.target.version_column
              << " owner=" << loaded.target.owner_column.value_or("(none)") << '\n'
              << "  batch job=" << loaded.batch.job << " chunk_size=" << loaded.batch.chunk_size
              << " workers=" << loaded.batch.workers
              << " max_attempts=" << loaded.batch.max_attempts << '\n'
              << "  database " << DatabaseLine(loaded.database)
              << " statement_timeout=" << config::FormatDuration(loaded.database.statement_timeout)
              << '\n';
    if (database && context.Sharded()) {
      for (const auto& shard : context.Shards()) {
        std::cout << "  checked against shard " << shard.name << ": "
                  << db::DescribeConninfo(shard.conninfo) << '\n';
      }
    } else if (database) {
      std::cout << "  checked against the database "
                << db::DescribeConninfo(context.Server().conninfo()) << '\n';
    }
    for (const auto& note : notes) std::cout << "  " << note << '\n';
    exit_code = 0;
  });
}

}  // namespace coexist::cli
