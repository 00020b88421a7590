#pragma once

#include <optional>
#include <string>

namespace pqxx {
class connection_base;
}

namespace coexist::db {

// The user's own table that online users and the batch both write.
// Names are validated identifiers (config/ checks them); SQL quotes them.
// The key column must be of an integer type (queue.record_key is bigint).
struct TargetTable {
  std::string schema = "public";
  std::string table = "products";
  std::string key_column = "id";
  std::string version_column = "version";
  // Which side owns a row ('online' or 'batch'); status_partition needs it.
  std::optional<std::string> owner_column = "owner";

  // "public.products", for messages and logs (not for SQL).
  std::string Name() const { return schema + "." + table; }
};

// Installs (or re-installs) the version trigger on the target: every UPDATE
// bumps the version column, whoever writes. Needs the coexist schema.
// Throws pqxx::sql_error when the table or column is missing or the version
// column is not an integer.
void InstallVersionTrigger(pqxx::connection_base& conn, const TargetTable& target);

// The demo target, public.products: id, stock, version, owner, note,
// updated_at, settled (what a simulation's batch adds to). Creates it when missing, replaces its
// rows with ids 1..records (stock = initial_stock, version 0, owner 'online'), and installs the
// version trigger (and the coexist schema when missing).
void SeedDemoTable(pqxx::connection_base& conn, long long records, long long initial_stock = 1000);

}  // namespace coexist::db
