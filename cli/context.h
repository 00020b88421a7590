#pragma once

#include <optional>
#include <string>
#include <vector>

#include "batch/shards.h"
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
  // --shard NAME: the one shard of database.shards a command works.
  std::optional<std::string> shard;
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
  // ConfigurationError (78) when none is configured. When the file lists
  // shards it is the one --shard names, and without --shard a UsageError
  // (64) says to name one.
  const db::Server& Server();
  // The database of a command that erases or overwrites data
  // (DatabaseUse::kEraseData): a throwaway cluster, which lives as long as
  // this Context, or a configured database that --allow-database names
  // (a shard only when --shard names it).
  const db::Server& ServerToErase();

  // Whether the file lists shards: then `batch run`, `enqueue`, `db
  // install` and `config check --database` work Shards(), every other
  // command the one --shard names.
  bool Sharded() { return !Config().database.shards.empty(); }
  // The shards such a command works: all of database.shards, or the one
  // --shard names, in the file's order. Throws UsageError (64) for
  // --database-url or a --shard the file does not list, ConfigurationError
  // (78) for COEXIST_DATABASE_URL (each names one database, and the file
  // lists several), and ConfigError at a shard's url when libpq cannot
  // parse it. Call only when Sharded().
  std::vector<batch::Shard> Shards();

 private:
  const db::Server& Resolve(db::DatabaseUse use);
  // UsageError for --shard when the file lists no shards.
  void RefuseShardOption();
  // "3 shards (s1, s2, s3)", or just "s1, s2, s3".
  std::string ShardNames(bool counted = true);

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
void AddJobsCommand(CLI::App& app, Context& context, int& exit_code);
void AddDashboardCommand(CLI::App& app, Context& context, int& exit_code);
void AddItemsCommand(CLI::App& app, Context& context, int& exit_code);
void AddOnlineSimCommand(CLI::App& app, Context& context, int& exit_code);
void AddBatchCommand(CLI::App& app, Context& context, int& exit_code);
void AddEnqueueCommand(CLI::App& app, Context& context, int& exit_code);
void AddAdminCommands(CLI::App& app, Context& context, int& exit_code);
void AddSimulateCommand(CLI::App& app, Context& context, int& exit_code);

}  // namespace coexist::cli
