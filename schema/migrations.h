#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace pqxx {
class connection_base;
class transaction_base;
}  // namespace pqxx

namespace coexist::db {

// A numbered SQL file under schema/migrations/, compiled into the binary.
// File names are NNNN_name.sql; versions are contiguous from 1.
struct Migration {
  int version;
  std::string name;  // "0001_core"
  std::string_view sql;
};

// All migrations in version order.
const std::vector<Migration>& AllMigrations();

// The newest migration compiled into this binary.
int LatestVersion();

// Applies the missing migrations, each in its own transaction, recorded in
// coexist.schema_migrations. Concurrent installers serialise on an advisory
// lock, so running it twice, or twice at once, applies each migration once.
// Returns how many were applied now. When none is missing it only reads
// (needs no right beyond SELECT on coexist.schema_migrations). Throws
// ConfigurationError when one is missing and the role may not create it,
// other pqxx errors on failure; the failing migration rolls back whole.
int InstallMigrations(pqxx::connection_base& conn);

struct AppliedMigration {
  int version;
  std::string name;
  std::string applied_at;
};

// Whether the coexist schema is installed (coexist.schema_migrations exists).
bool SchemaInstalled(pqxx::transaction_base& tx);

// The versions coexist.schema_migrations records (call it when installed).
std::set<int> AppliedVersions(pqxx::transaction_base& tx);

// What coexist.schema_migrations records; empty when coexist is not installed.
std::vector<AppliedMigration> AppliedMigrations(pqxx::connection_base& conn);

}  // namespace coexist::db
