// coexist demo: the README's first command.

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/context.h"
#include "cli/status_report.h"
#include "db/connection.h"
#include "db/target_table.h"
#include "schema/install.h"
#include "schema/migrations.h"
#include "schema/status.h"

namespace coexist::cli {

void AddDemoCommand(CLI::App& app, Context& context, int& exit_code) {
  auto* demo = app.add_subcommand(
      "demo",
      "Install the schema and seed the demo table on a throwaway cluster (a configured database "
      "only with --allow-database NAME), then print its status");
  static long long records = 1000;
  demo->add_option("--records", records, "rows in the demo table")
      ->check(CLI::Range(1LL, 10000000LL));
  AddAllowDatabaseOption(*demo, context);
  demo->callback([&] {
    const auto& server = context.ServerToErase();
    auto conn = db::Connect(server);
    db::InstallMigrations(*conn);
    db::SeedDemoTable(*conn, records);
    PrintStatus(std::cout, db::ReadStatus(*conn, config::TargetTable{}), server);
    exit_code = 0;
  });
}

}  // namespace coexist::cli
