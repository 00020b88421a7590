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

  // The name of the statement Apply runs, prepared on the server (not
  // lazily), with the items' keys as its only parameter when the operation
  // has no params: the range walk's one call runs it by name
  // (batch/range_chunk_call.h).
  const char* statement() const { return per_item_ ? "apply_items" : "apply_chunk"; }

 private:
  const config::OperationConfig& config_;
  bool per_item_ = false;
  bool many_keys_ = false;
};

// The chunk SQL operation.set stands for (Operation's apply_chunk): the
// UPDATE of the keys in $1.
std::string SetStatement(pqxx::connection_base& conn, const config::Config& config,
                         const std::string& key_type);

// The UPDATE operation.set stands for, of the target's rows that `rows` (a
// condition on them) selects and, for a range job, its predicate selects
// too (the range walk's one call: batch/range_chunk_call.h).
std::string SetUpdate(pqxx::connection_base& conn, const config::Config& config,
                      const std::string& rows);

// The start-up check of the operation (batch/runner.cpp): builds it on
// `conn` without running any of its SQL. Throws config::ConfigError at the
// key's file:line:column when the database rejects it, and when it is not
// exactly one statement.
void CheckOperation(pqxx::connection_base& conn, const config::Config& config);

}  // namespace coexist::batch
