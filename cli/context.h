#pragma once

#include <optional>
#include <string>

#include "config/config.h"
#include "db/server.h"

namespace CLI {
class App;
}

namespace coexist::cli {

// Options every subcommand understands, and what they resolve to.
struct GlobalOptions {
  std::string config_path;   // --config FILE
  std::string database_url;  // --database-url URL
  std::string data_dir;      // --data-dir: the `db up` cluster's folder
  std::string log_level;     // --log-level; empty: config's, else info
  std::string log_format;    // --log-format text|json
  // --allow-database NAME of the commands that erase data: the database
  // they may erase when one is configured (db/server.h, DatabaseUse).
  std::optional<std::string> allow_database;
};

// Shared by the commands of one invocation.
class Context {
 public:
  GlobalOptions options;

  // The configuration from --config, loaded once; defaults without --config.
  const config::Config& Config();
  bool HasConfigFile() const { return !options.config_path.empty(); }

  // Where the database of a command that keeps state is (db/server.h's
  // rules, DatabaseUse::kKeepState): never a throwaway cluster; throws
  // ConfigurationError (78) when none is configured.
  const db::Server& Server();
  // The database of a command that erases or overwrites data
  // (DatabaseUse::kEraseData): a throwaway cluster, which lives as long as
  // this Context, or a configured database that --allow-database names.
  const db::Server& ServerToErase();

 private:
  const db::Server& Resolve(db::DatabaseUse use);

  std::optional<config::Config> config_;
  std::optional<db::Server> server_;
};

// Adds --allow-database NAME to a command that erases data.
void AddAllowDatabaseOption(CLI::App& command, Context& context);

// Each file under cli/ adds its subcommands. The callbacks store their exit
// status in `exit_code`.
void AddDbCommands(CLI::App& app, Context& context, int& exit_code);
void AddConfigCommands(CLI::App& app, Context& context, int& exit_code);
void AddDemoCommand(CLI::App& app, Context& context, int& exit_code);
void AddCtlCommand(CLI::App& app, Context& context, int& exit_code);
void AddOnlineSimCommand(CLI::App& app, Context& context, int& exit_code);
void AddBatchCommand(CLI::App& app, Context& context, int& exit_code);
void AddEnqueueCommand(CLI::App& app, Context& context, int& exit_code);
void AddAdminCommands(CLI::App& app, Context& context, int& exit_code);
void AddSimulateCommand(CLI::App& app, Context& context, int& exit_code);

}  // namespace coexist::cli
