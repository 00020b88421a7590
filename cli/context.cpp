#include "cli/context.h"

namespace coexist::cli {

const config::Config& Context::Config() {
  if (!config_) {
    config_ = HasConfigFile() ? config::LoadFile(options.config_path) : config::Config{};
  }
  return *config_;
}

const db::Server& Context::Server(bool allow_throwaway) {
  if (!server_) {
    db::ServerChoice choice;
    if (!options.database_url.empty()) choice.command_line_url = options.database_url;
    choice.config_url = Config().database.url;
    choice.local_data_dir = options.data_dir;
    choice.allow_throwaway = allow_throwaway;
    server_ = db::Server::Resolve(choice);
  }
  return *server_;
}

}  // namespace coexist::cli
