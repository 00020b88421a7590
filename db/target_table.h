#pragma once

#include <string>

#include "config/target_table.h"

namespace pqxx {
class connection_base;
}

namespace coexist::db {

// Installs (or re-installs) the version trigger on the target: every UPDATE
// bumps the version column, whoever writes. Needs the coexist schema.
// Throws pqxx::sql_error when the table or column is missing or the version
// column is not an integer.
void InstallVersionTrigger(pqxx::connection_base& conn, const config::TargetTable& target);

// The demo target, public.products: id, stock, version, owner, note,
// updated_at, settled (what a simulation's batch adds to). Creates it when
// missing, replaces its rows with ids 1..records (stock = initial_stock,
// version 0, owner 'online'), and installs the version trigger (and the
// coexist schema when missing).
void SeedDemoTable(pqxx::connection_base& conn, long long records, long long initial_stock = 1000);

}  // namespace coexist::db
