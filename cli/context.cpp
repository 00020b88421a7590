#include "cli/context.h"

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "common/error.h"
#include "db/connection.h"

namespace coexist::cli {

const config::Config& Context::Config() {
  if (!config_) {
    config_ = HasConfigFile() ? config::LoadFile(options.config_path) : config::Config{};
    // Every command's connections notice a server that stops answering.
    db::WatchForStalls(config_->database.stall_timeout);
  }
  return *config_;
}

const db::Server& Context::Server() { return Resolve(db::DatabaseUse::kKeepState); }

const db::Server& Context::ServerToErase() { return Resolve(db::DatabaseUse::kEraseData); }

const db::Server& Context::Resolve(db::DatabaseUse use) {
  if (!server_) {
    db::ServerChoice choice;
    if (!options.database_url.empty()) choice.command_line_url = options.database_url;
    choice.config_url = Config().database.url;
    choice.config_url_at = Config().database.url_at;
    choice.local_data_dir = options.data_dir;
    choice.use = use;
    choice.allow_database = options.allow_database;
    if (!Sharded()) {
      RefuseShardOption();
    } else if (use == db::DatabaseUse::kEraseData && !options.shard) {
      // No shard is erased unless --shard names it: a throwaway cluster,
      // or the database --database-url names.
      choice.config_url.reset();
    } else {
      if (!options.shard) {
        throw UsageError(
            Config().source + " lists " + ShardNames() + ": this command works one database",
            "pass --shard NAME to say which.");
      }
      batch::Shard shard = Shards().front();  // the one --shard names, its url checked
      choice.config_url = shard.conninfo;
      for (const auto& listed : Config().database.shards) {
        if (listed.name == shard.name) choice.config_url_at = listed.url_at;
      }
    }
    server_ = db::Server::Resolve(choice);
  }
  return *server_;
}

std::vector<batch::Shard> Context::Shards() {
  const auto& database = Config().database;
  if (!options.database_url.empty()) {
    throw UsageError(
        "--database-url names one database, and " + Config().source + " lists " + ShardNames(),
        "leave --database-url out: the file names each shard's database.");
  }
  if (std::getenv("COEXIST_DATABASE_URL") != nullptr) {
    throw ConfigurationError("COEXIST_DATABASE_URL names one database, and " + Config().source +
                                 " lists " + ShardNames(),
                             "unset COEXIST_DATABASE_URL: the file names each shard's database.");
  }
  std::vector<batch::Shard> shards;
  for (size_t i = 0; i < database.shards.size(); ++i) {
    const auto& shard = database.shards[i];
    if (options.shard && *options.shard != shard.name) continue;
    try {
      db::CheckConninfo(shard.url);
    } catch (const ConfigurationError& e) {
      throw config::ConfigError(shard.url_at, "database.shards[" + std::to_string(i) + "].url",
                                e.what(), e.hint());
    }
    shards.push_back({shard.name, shard.url});
  }
  if (shards.empty()) {
    throw UsageError(
        "--shard " + *options.shard + ": " + Config().source + " lists no shard of that name",
        "its shards are " + ShardNames(false) + ".");
  }
  return shards;
}

void Context::RefuseShardOption() {
  if (!options.shard) return;
  throw UsageError("--shard " + *options.shard + ": " +
                       (HasConfigFile() ? Config().source + " lists no shards"
                                        : std::string("no --config FILE lists shards")),
                   "--shard picks one database of database.shards; leave it out for a job of "
                   "one database.");
}

std::string Context::ShardNames(bool counted) {
  std::string names;
  for (const auto& shard : Config().database.shards) {
    names += (names.empty() ? "" : ", ") + shard.name;
  }
  if (!counted) return names;
  size_t n = Config().database.shards.size();
  return std::to_string(n) + (n == 1 ? " shard (" : " shards (") + names + ")";
}

void AddAllowDatabaseOption(CLI::App& command, Context& context) {
  command.add_option(
      "--allow-database", context.options.allow_database,
      "erase the configured database NAME (its name as the server reports it); without it this "
      "command runs only on a throwaway cluster and refuses any configured database");
}

}  // namespace coexist::cli
