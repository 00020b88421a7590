#include "batch/operation.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "common/sql_text.h"
#include "config_core/config_error.h"
#include "db/connection.h"
#include "db/failure.h"
#include "db/sqlstate.h"
#include "db/target_table.h"

namespace coexist::batch {
namespace {

// A dollar-quote tag that cannot occur in the user's SQL.
std::string WithoutTrailingSemicolons(std::string sql) {
  while (!sql.empty() &&
         (sql.back() == ';' || std::isspace(static_cast<unsigned char>(sql.back())))) {
    sql.pop_back();
  }
  return sql;
}

// The payload fields of every item as one array literal per field.
std::vector<std::string> FieldArrays(const std::vector<Item>& items,
                                     const std::vector<std::string>& fields) {
  std::vector<std::vector<std::optional<std::string>>> columns(fields.size());
  for (const auto& item : items) {
    auto payload = nlohmann::json::parse(item.payload, nullptr, /*allow_exceptions=*/false);
    for (size_t f = 0; f < fields.size(); ++f) {
      std::optional<std::string> value;
      if (payload.is_object() && payload.contains(fields[f]) && !payload[fields[f]].is_null()) {
        const auto& v = payload[fields[f]];
        value = v.is_string() ? v.get<std::string>() : v.dump();
      }
      columns[f].push_back(std::move(value));
    }
  }
  std::vector<std::string> out;
  for (const auto& column : columns) out.push_back(ArrayLiteral(column));
  return out;
}

// How many statements `sql` holds, as psql would split it: semicolons outside
// quotes ('...', E'...', "..."), dollar quotes and comments; empty statements
// do not count. Only words the error message: the database itself refuses a
// second statement (see Operation), whatever this count says.
int CountStatements(const std::string& sql) {
  int count = 0;
  bool content = false;  // the current statement has more than blanks and comments
  for (size_t i = 0; i < sql.size();) {
    size_t end = i;
    auto skipped = sql_text::Skip(sql, i, end);
    if (skipped != sql_text::NotCode::kNone) {
      content = content || skipped == sql_text::NotCode::kQuoted;
      i = end;
      continue;
    }
    if (sql[i] == ';') {
      if (content) ++count;
      content = false;
    } else if (!std::isspace(static_cast<unsigned char>(sql[i]))) {
      content = true;
    }
    ++i;
  }
  return count + (content ? 1 : 0);
}

// The typed parameter list of item_sql: $1 the key's type, $2.. text.
std::string ItemParameterTypes(const std::string& key_type, size_t params) {
  std::string types = key_type;
  for (size_t i = 0; i < params; ++i) types += ", text";
  return types;
}

// What $1 and $2.. are, for the error of a rejected operation.
std::string KeysHint(const config::OperationConfig& op, const std::string& key_type) {
  bool many = op.keys == config::ItemKeys::kMany;
  if (!op.item_sql.empty()) {
    return many ? "$1 is the item's keys (" + key_type +
                      "[], in lock order), $2.. the params fields (text); cast them."
                : "$1 is the key (" + key_type + "), $2.. the params fields (text); cast them.";
  }
  return many ? "$1 is one array literal of keys per item (text[]: unnest($1::text[]) AS i(keys), "
                "then i.keys::" +
                    key_type + "[]), $2.. the params fields (text[]); cast them."
              : "$1 is the keys (cast it: $1::" + key_type +
                    "[]), $2.. the params fields (text[]); cast them.";
}

}  // namespace

std::string SetUpdate(pqxx::connection_base& conn, const config::Config& config,
                      const std::string& rows) {
  const auto& t = config.target;
  // The line breaks end a `--` comment the list or the predicate may end with.
  std::string sql = "UPDATE " + conn.quote_name(t.schema) + "." + conn.quote_name(t.table) +
                    " SET " + config.operation.set + "\n WHERE " + rows;
  if (config.batch.range) sql += " AND (" + config.batch.range->where + "\n)";
  return sql;
}

std::string SetStatement(pqxx::connection_base& conn, const config::Config& config,
                         const std::string& key_type) {
  return SetUpdate(
      conn, config,
      conn.quote_name(config.target.key_column) + " = ANY ($1::text[]::" + key_type + "[])");
}

Operation::Operation(pqxx::connection_base& conn, const config::Config& whole,
                     const std::string& key_type)
    : config_(whole.operation),
      per_item_(!whole.operation.item_sql.empty()),
      many_keys_(whole.operation.keys == config::ItemKeys::kMany) {
  const auto& config = config_;
  // With keys: many, item_sql's $1 is the item's keys as an array.
  const std::string key_param = many_keys_ ? key_type + "[]" : key_type;
  if (!per_item_) {
    // Prepared through the extended protocol (PQprepare), now rather than
    // lazily: the database parses and checks it without running any of it,
    // and refuses a string of two statements ("...; DROP TABLE x"), which a
    // simple-protocol "PREPARE ... AS <sql>" would have run the tail of.
    conn.prepare("apply_chunk",
                 config.set.empty() ? config.chunk_sql : SetStatement(conn, whole, key_type));
    conn.prepare_now("apply_chunk");
    return;
  }
  // $1 the key's type, $2.. text: inside the function body they are its
  // arguments.
  std::string args = key_param;
  std::string call_args = many_keys_ ? "u.k::" + key_param : "u.k";
  // The keys travel as text (one array literal per item with keys: many).
  std::string unnest = many_keys_ ? "unnest($1::text[]" : "unnest($1::text[]::" + key_type + "[]";
  for (size_t i = 0; i < config.params.size(); ++i) {
    std::string n = std::to_string(i + 2);
    args += ", text";
    call_args += ", u.p" + n;
    unnest += ", $" + n + "::text[]";
  }
  std::string columns = "k";
  for (size_t i = 0; i < config.params.size(); ++i) columns += ", p" + std::to_string(i + 2);
  std::string body = WithoutTrailingSemicolons(config.item_sql);
  std::string tag = sql_text::DollarQuoteTag(body, "coexist_op");
  // A SQL function's body may hold several statements, so item_sql is first
  // prepared alone, with its parameter types, as ONE command of the
  // extended protocol (exec_params): a second statement is refused there and
  // nothing runs. A single statement PREPARE cannot take (CALL ...) is then
  // prepared as it is (PQprepare), which refuses two statements as well.
  bool prepared = false;
  {
    pqxx::nontransaction tx(conn);
    try {
      tx.exec_params("PREPARE coexist_check_item_sql (" +
                     ItemParameterTypes(key_param, config.params.size()) + ") AS " + body);
      tx.exec_params("DEALLOCATE coexist_check_item_sql");
      prepared = true;
    } catch (const pqxx::sql_error&) {
    }
  }
  if (!prepared) db::ParseOnly(conn, body);
  pqxx::nontransaction tx(conn);
  tx.exec_params("CREATE OR REPLACE FUNCTION pg_temp.coexist_item(" + args +
                 ") RETURNS integer LANGUAGE sql VOLATILE AS " + tag + body + ";\nSELECT 1" + tag);
  conn.prepare("apply_items", "SELECT sum(pg_temp.coexist_item(" + call_args + ")) FROM " + unnest +
                                  ") AS u(" + columns + ")");
  conn.prepare_now("apply_items");
}

void CheckOperation(pqxx::connection_base& conn, const config::Config& config) {
  const auto& op = config.operation;
  bool per_item = !op.item_sql.empty();
  std::string key = std::string("operation.") + op.Form();
  config::Mark at = op.FormAt();
  if (at.file.empty()) at = {config.source, 0, 0};
  std::string key_type;
  {
    pqxx::nontransaction tx(conn);
    key_type = db::KeyTypeOf(tx, config.target);
  }
  try {
    Operation check(conn, config, key_type);
  } catch (const pqxx::sql_error& e) {
    int statements = CountStatements(per_item ? op.item_sql : op.chunk_sql);
    if (statements > 1 && e.sqlstate() == "42601") {
      throw config::ConfigError(
          at, key,
          "holds " + std::to_string(statements) +
              " SQL statements; the operation must be exactly one",
          "none of it was run. Join the steps into one statement (WITH u AS (UPDATE ...) "
          "INSERT ...), or call a function that does them.");
    }
    if (per_item && db::SqlStateOf(e) == db::sqlstate::kInsufficientPrivilege &&
        std::string(e.what()).find("temporary") != std::string::npos) {
      throw config::ConfigError(at, key, std::string("the database rejects it: ") + e.what(),
                                "item_sql runs as a session-local function: GRANT TEMP ON "
                                "DATABASE to the batch role (docs/operations.md, \"Database "
                                "roles\"), or write it as chunk_sql.");
    }
    throw config::ConfigError(at, key, std::string("the database rejects it: ") + e.what(),
                              op.set.empty()
                                  ? KeysHint(op, key_type)
                                  : "write the SET list of an UPDATE of " + config.target.Name() +
                                        " (status = 'settled', n = n + 1): coexist "
                                        "writes the rest.");
  }
}

void Operation::Apply(pqxx::transaction_base& tx, const std::vector<Item>& items) const {
  if (items.empty()) return;
  std::vector<RecordKey> keys;
  keys.reserve(items.size());
  for (const auto& item : items) keys.push_back(many_keys_ ? ArrayLiteral(item.keys) : item.key);
  std::vector<std::string> params = {ArrayLiteral(keys)};
  if (!config_.params.empty()) {
    for (auto& array : FieldArrays(items, config_.params)) params.push_back(std::move(array));
  }
  tx.exec_prepared(statement(), pqxx::prepare::make_dynamic_params(params));
}

}  // namespace coexist::batch
