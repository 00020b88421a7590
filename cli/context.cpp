#include "cli/context.h"

#include <CLI/CLI.hpp>

namespace coexist::cli {

const config::Config& Context::Config() {
  if (!config_) {
    config_ = HasConfigFile() ? config::LoadFile(options.config_path) : config::Config{};
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
    server_ = db::Server::Resolve(choice);
  }
  return *server_;
}

void AddAllowDatabaseOption(CLI::App& command, Context& context) {
  command.add_option(
      "--allow-database", context.options.allow_database,
      "erase the configured database NAME (its name as the server reports it); without it this "
      "command runs only on a throwaway cluster and refuses any configured database");
}

}  // namespace coexist::cli
