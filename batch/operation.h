#pragma once

// The configured operation (config `operation:`), applied to a set of items
// in ONE statement: chunk SQL gets the keys and payload fields as arrays;
// per-item SQL becomes a session-local SQL function called over unnest
// arrays, so neither form costs a round trip per item. Include only from
// batch/*.cpp (libpqxx).
//
// Thread safety: one Operation per connection, used by one thread.

#include <pqxx/pqxx>
#include <vector>

#include "batch/record_sql.h"
#include "config/config.h"

namespace coexist::batch {

class Operation {
 public:
  // Prepares the statement (and, for item_sql, creates the pg_temp function)
  // on `conn`, running none of the configured SQL. Throws pqxx::sql_error
  // when the SQL does not parse, names what does not exist, or is more than
  // one statement; CheckOperation reports that as a configuration error.
  // `key_type` is the target key column's type (RecordSql::key_type()):
  // item_sql's $1 has it; chunk_sql's $1 is a text array its SQL casts
  // (`$1::bigint[]`, `$1::uuid[]`). With `keys: many` item_sql's $1 is an
  // array of that type (the item's keys, in lock order) and each element of
  // chunk_sql's $1 is one item's keys as an array literal (`k::uuid[]`).
  // operation.set becomes chunk SQL coexist writes: `UPDATE <target> SET
  // <set> WHERE <key> = ANY (<the keys>)`, and a range job's predicate.
  Operation(pqxx::connection_base& conn, const config::Config& config, const std::string& key_type);

  // Applies the operation to `items` in one statement. Throws what the SQL
  // throws; the caller scans the chunk (halves, then single items).
  void Apply(pqxx::transaction_base& tx, const std::vector<Item>& items) const;

 private:
  const config::OperationConfig& config_;
  bool per_item_ = false;
  bool many_keys_ = false;
};

// The chunk SQL operation.set stands for (Operation's apply_chunk).
std::string SetStatement(pqxx::connection_base& conn, const config::Config& config,
                         const std::string& key_type);

// The start-up check of the operation (batch/runner.cpp): builds it on
// `conn` without running any of its SQL. Throws config::ConfigError at the
// key's file:line:column when the database rejects it, and when it is not
// exactly one statement.
void CheckOperation(pqxx::connection_base& conn, const config::Config& config);

}  // namespace coexist::batch
