#pragma once

// Installing the coexist schema: its migrations, then the target's version
// trigger (db/target_table.h); and the demo table the simulators and tests use.

#include "db/target_table.h"

namespace pqxx {
class connection_base;
class transaction_base;
}  // namespace pqxx

namespace coexist::db {

struct SchemaInstall {
  int migrations_applied = 0;
  bool target_exists = false;  // false: the version trigger was not installed
};

// The install sequence of `coexist db install` and the simulators: the
// coexist schema's migrations (each in a transaction of its own), then the
// version trigger on the target when it exists and its trigger is not
// current (re-pointing it takes a lock that queues behind online
// transactions, so a current one is left alone). A missing target is the
// caller's to judge. `conn` must have no transaction open. Throws
// pqxx::sql_error when the database refuses (42501 without the rights to
// create, 42703 when the version column is missing).
SchemaInstall InstallSchema(pqxx::connection_base& conn, const config::TargetTable& target);

// The demo target, public.products: id, stock, version, owner, note,
// updated_at, settled (what a simulation's batch adds to). Creates it when
// missing, replaces its rows with ids 1..records (stock = initial_stock,
// version 0, owner 'online'), and installs the version trigger (and the
// coexist schema when missing).
void SeedDemoTable(pqxx::connection_base& conn, long long records, long long initial_stock = 1000);

// Grants `role` (a role name, quoted here) what an online application needs
// of the coexist schema, as docs/operations.md ("Database roles") lists it:
// USAGE on the schema, the edit locks' table (the edit-lock API runs as its
// caller), and SELECT on the windows and targets the guard trigger reads.
void GrantOnlineUse(pqxx::transaction_base& tx, const std::string& role);

}  // namespace coexist::db
