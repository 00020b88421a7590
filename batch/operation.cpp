#include "batch/operation.h"

#include <nlohmann/json.hpp>
#include <random>

namespace coexist::batch {
namespace {

// A dollar-quote tag that cannot occur in the user's SQL.
std::string QuoteTag(const std::string& sql) {
  std::string tag = "$coexist_op$";
  for (int i = 0; sql.find(tag) != std::string::npos; ++i) {
    tag = "$coexist_op" + std::to_string(i) + "$";
  }
  return tag;
}

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

}  // namespace

Operation::Operation(pqxx::connection_base& conn, const config::OperationConfig& config)
    : config_(config), per_item_(!config.item_sql.empty()) {
  if (!per_item_) {
    conn.prepare("apply_chunk", config.chunk_sql);
    // libpqxx prepares lazily; parse it now so a bad statement fails here.
    pqxx::nontransaction tx(conn);
    tx.exec("PREPARE coexist_check_chunk_sql AS " + config.chunk_sql);
    tx.exec("DEALLOCATE coexist_check_chunk_sql");
    return;
  }
  // $1 bigint, $2.. text: inside the function body they are its arguments.
  std::string args = "bigint";
  std::string call_args = "u.k";
  std::string unnest = "unnest($1::bigint[]";
  for (size_t i = 0; i < config.params.size(); ++i) {
    std::string n = std::to_string(i + 2);
    args += ", text";
    call_args += ", u.p" + n;
    unnest += ", $" + n + "::text[]";
  }
  std::string columns = "k";
  for (size_t i = 0; i < config.params.size(); ++i) columns += ", p" + std::to_string(i + 2);
  std::string body = WithoutTrailingSemicolons(config.item_sql);
  std::string tag = QuoteTag(body);
  pqxx::nontransaction tx(conn);
  tx.exec("CREATE OR REPLACE FUNCTION pg_temp.coexist_item(" + args +
          ") RETURNS integer LANGUAGE sql VOLATILE AS " + tag + body + ";\nSELECT 1" + tag);
  conn.prepare("apply_items", "SELECT sum(pg_temp.coexist_item(" + call_args + ")) FROM " + unnest +
                                  ") AS u(" + columns + ")");
}

void Operation::Apply(pqxx::transaction_base& tx, const std::vector<Item>& items) const {
  if (items.empty()) return;
  std::vector<long long> keys;
  keys.reserve(items.size());
  for (const auto& item : items) keys.push_back(item.key);
  std::vector<std::string> params = {ArrayLiteral(keys)};
  if (!config_.params.empty()) {
    for (auto& array : FieldArrays(items, config_.params)) params.push_back(std::move(array));
  }
  tx.exec_prepared(per_item_ ? "apply_items" : "apply_chunk",
                   pqxx::prepare::make_dynamic_params(params));
}

}  // namespace coexist::batch
