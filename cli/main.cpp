// coexist: batch jobs that share PostgreSQL rows with online users.
// Startup runs as numbered steps; a failure that escapes them gets its exit
// status, message and hint from cli::Describe (cli/failure.h).

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.h"
#include "cli/failure.h"
#include "common/error.h"
#include "common/log.h"
#include "common/signals.h"

namespace {

using coexist::ExitCode;
using coexist::ToInt;

int Report(const std::string& message, const std::string& hint, ExitCode code) {
  std::cerr << message << '\n';
  if (!hint.empty()) std::cerr << "HINT: " << hint << '\n';
  return ToInt(code);
}

// Step 3: logging, from the flags, else the configuration's log: section.
void SetupLogging(coexist::cli::Context& context) {
  std::string level = context.options.log_level;
  std::string format = context.options.log_format;
  if (context.HasConfigFile() && (level.empty() || format.empty())) {
    const auto& log = context.Config().log;
    if (level.empty()) level = log.level;
    if (format.empty()) format = log.format;
  }
  auto parsed = coexist::log::ParseFormat(format.empty() ? "text" : format);
  if (!parsed)
    throw coexist::UsageError("unknown log format '" + format + "'", "use text or json.");
  coexist::log::Setup(level.empty() ? "info" : level, *parsed);
}

}  // namespace

int main(int argc, char** argv) {
  // Step 1: signals, before any thread exists (see common/signals.h).
  coexist::signals::Install();

  // Step 2: the command line.
  coexist::cli::Context context;
  int exit_code = 0;
  CLI::App app{
      "coexist: a batch job processor that shares PostgreSQL rows with online users, an online "
      "workload simulator, and capacity-planning runs.\n"
      "Commands that erase data (simulate, demo, db seed, online-sim) run on a throwaway "
      "PostgreSQL cluster, removed on exit, unless --allow-database names the configured "
      "database; the others need a configured database."};
  app.set_version_flag("--version", "coexist 0.1.0");
  app.require_subcommand(1);
  app.fallthrough();
  auto& options = context.options;
  app.add_option("-c,--config", options.config_path, "YAML configuration file");
  app.add_option("--database-url", options.database_url,
                 "libpq URL or key=value string (else COEXIST_DATABASE_URL, database.url, PG* "
                 "variables, or the 'db up' cluster); visible in ps: prefer PGPASSFILE for the "
                 "password");
  app.add_option("--data-dir", options.data_dir, "data folder of the 'db up' cluster");
  app.add_option("--shard", options.shard,
                 "the shard NAME of database.shards to work: batch run, enqueue, db install and "
                 "config check --database work every shard without it; the other commands work "
                 "one database and need it when the file lists shards");
  app.add_option("--log-level", options.log_level,
                 "trace, debug, info, warn, error, critical or off (default info)");
  app.add_option("--log-format", options.log_format, "text or json (default text)");
  coexist::cli::AddDbCommands(app, context, exit_code);
  coexist::cli::AddConfigCommands(app, context, exit_code);
  coexist::cli::AddDemoCommand(app, context, exit_code);
  coexist::cli::AddCtlCommand(app, context, exit_code);
  coexist::cli::AddJobsCommand(app, context, exit_code);
  coexist::cli::AddDashboardCommand(app, context, exit_code);
  coexist::cli::AddItemsCommand(app, context, exit_code);
  coexist::cli::AddOnlineSimCommand(app, context, exit_code);
  coexist::cli::AddBatchCommand(app, context, exit_code);
  coexist::cli::AddEnqueueCommand(app, context, exit_code);
  coexist::cli::AddAdminCommands(app, context, exit_code);
  coexist::cli::AddSimulateCommand(app, context, exit_code);
  app.parse_complete_callback([&] { SetupLogging(context); });

  try {
    // Step 4: parse, then run the chosen command's callback.
    app.parse(argc, argv);
    return exit_code;
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : ToInt(ExitCode::kUsage);
  } catch (const std::exception& e) {
    auto failure = coexist::cli::Describe(e);
    return Report(failure.message, failure.hint, failure.code);
  }
}
