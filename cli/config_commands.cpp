// coexist config check FILE: a configuration or a `simulate` scenario.

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.h"
#include "config/config.h"
#include "config/duration.h"
#include "config/scenario.h"

namespace coexist::cli {

void AddConfigCommands(CLI::App& app, Context& /*context*/, int& exit_code) {
  auto* config = app.add_subcommand("config", "Work with configuration files");
  config->require_subcommand(1);
  auto* check = config->add_subcommand(
      "check", "Validate a configuration file: exit 0 when valid, 78 (EX_CONFIG) otherwise");
  static std::string file;
  check->add_option("file", file, "YAML file to check")->required();
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
    std::cout << file << ": valid\n"
              << "  target " << loaded.target.Name() << " key=" << loaded.target.key_column
              << " version=" << loaded.target.version_column
              << " owner=" << loaded.target.owner_column.value_or("(none)") << '\n'
              << "  batch job=" << loaded.batch.job << " chunk_size=" << loaded.batch.chunk_size
              << " workers=" << loaded.batch.workers
              << " max_attempts=" << loaded.batch.max_attempts << '\n'
              << "  database " << (loaded.database.url ? "url set (not shown)" : "not set")
              << " statement_timeout=" << config::FormatDuration(loaded.database.statement_timeout)
              << '\n';
    exit_code = 0;
  });
}

}  // namespace coexist::cli
