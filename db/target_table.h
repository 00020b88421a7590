#pragma once

#include <string>
#include <vector>

#include "config/target_table.h"

namespace pqxx {
class connection_base;
class transaction_base;
}  // namespace pqxx

namespace coexist::db {

// What coexist asks about the target, in one place: the status, the
// installers and the simulator read the same answers.

// Whether the target table exists (a plain regclass lookup in `tx`).
bool TargetExists(pqxx::transaction_base& tx, const config::TargetTable& target);

// The target's configured columns the table lacks, by their target: key
// ("key_column", "version_column", "owner_column"), in that order; empty
// when all are there (or the table does not exist: ask TargetExists first).
std::vector<std::string> MissingTargetColumns(pqxx::transaction_base& tx,
                                              const config::TargetTable& target);

// The key column's type as format_type spells it ("bigint", "uuid",
// "text", "character varying"), for casts in statements; throws
// ConfigurationError naming the table and column when either is missing.
std::string KeyTypeOf(pqxx::transaction_base& tx, const config::TargetTable& target);

enum class VersionTrigger {
  kMissing,   // no trigger named coexist_bump_version on the target (or no target)
  kOutdated,  // one is there, calling a function of the naming before 0009
  kCurrent,   // one is there, calling this schema's bump function for the target
};

// The target's version trigger, read in `tx`. Needs the coexist schema for
// kCurrent (before migration 0009 every trigger reads as kOutdated).
VersionTrigger VersionTriggerOf(pqxx::transaction_base& tx, const config::TargetTable& target);

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
