#include "capacity/workload.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "common/error.h"
#include "db/connection.h"
#include "db/server.h"
#include "db/target_table.h"

namespace coexist::capacity {
namespace {

// Runs `work`; SQL the database refuses is the scenario's fault, located at
// the key that wrote it.
template <typename Work>
auto Located(const config::Mark& at, const std::string& key, const std::string& what,
             const std::string& hint, Work&& work) {
  try {
    return work();
  } catch (const pqxx::sql_error& e) {
    throw config::ConfigError(at, key, what + ": " + FirstLine(e), hint);
  }
}

std::string Qualified(pqxx::transaction_base& tx, const std::string& schema,
                      const std::string& table) {
  return tx.quote_name(schema) + "." + tx.quote_name(table);
}

std::string FileName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// column name -> format_type of the table's columns.
std::map<std::string, std::string> ColumnTypes(pqxx::transaction_base& tx,
                                               const std::string& qualified) {
  std::map<std::string, std::string> out;
  for (const auto& row :
       tx.exec_params("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                      "WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped",
                      qualified)) {
    out[row[0].as<std::string>()] = row[1].as<std::string>();
  }
  return out;
}

std::string Names(const std::map<std::string, std::string>& columns) {
  std::string out;
  for (const auto& [name, type] : columns) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// INSERT ... SELECT over generate_series for one scenario.data entry: each
// column's expression cast to the column's type; key() columns pick from an
// array of the referenced column's values, one subquery per reference.
long long Generate(pqxx::connection_base& conn, const config::GeneratedTable& t) {
  pqxx::work tx(conn);
  std::string table = Qualified(tx, t.schema, t.table);
  auto types = ColumnTypes(tx, table);
  std::string names, values, joins;
  int references = 0;
  for (const auto& c : t.columns) {
    auto type = types.find(c.name);
    if (type == types.end()) {
      throw config::ConfigError(c.at, c.key, t.schema + "." + t.table + " has no column " + c.name,
                                "name the columns as the table has them: " + Names(types) + ".");
    }
    std::string expression = c.expression;
    if (!c.key_table.empty()) {
      std::string alias = "k" + std::to_string(++references);
      joins += fmt::format(
          " CROSS JOIN (SELECT array_agg({0} ORDER BY {0}) AS keys, count(*) AS cnt FROM {1}) {2}",
          tx.quote_name(c.key_column), Qualified(tx, c.key_schema, c.key_table), alias);
      // zipf: floor(cnt ^ u) for a uniform u in [0, 1) is the i-th key with a
      // probability proportional to 1/i.
      expression = c.key_zipf ? fmt::format("{0}.keys[floor(power({0}.cnt, random()))::int]", alias)
                              : fmt::format("{0}.keys[1 + floor(random() * {0}.cnt)::int]", alias);
    }
    names += (names.empty() ? "" : ", ") + tx.quote_name(c.name);
    values += (values.empty() ? "" : ", ") +
              fmt::format("({})::{} AS {}", expression, type->second, tx.quote_name(c.name));
  }
  std::string sql = fmt::format(
      "INSERT INTO {0} ({1}) SELECT {1} FROM (SELECT {2} FROM generate_series(1, {3}) AS g(n){4}) "
      "AS generated{5} ON CONFLICT DO NOTHING",
      table, names, values, t.rows, joins, t.where.empty() ? "" : " WHERE " + t.where);
  auto result = Located(t.at, t.key, t.schema + "." + t.table + " could not be filled",
                        "fix its column generators (SQL over n, the row's number) or its where:.",
                        [&] { return tx.exec(sql); });
  tx.commit();
  return static_cast<long long>(result.affected_rows());
}

}  // namespace

std::string FirstLine(const pqxx::sql_error& e) {
  std::string message = e.what();
  message = message.substr(0, message.find('\n'));
  if (message.starts_with("ERROR:")) message.erase(0, message.find_first_not_of(" ", 6));
  return message;
}

long long CopySample(const config::SampleSource& sample, pqxx::connection_base& conn) {
  std::string source = db::DescribeConninfo(sample.conninfo);
  auto from = db::Connect(sample.conninfo, "coexist-simulate-sample");
  std::vector<std::string> rows;
  std::vector<std::string> source_columns;
  {
    // Only ever read: the transaction is READ ONLY, so the source refuses
    // any write the where: might make (25006).
    pqxx::read_transaction tx(*from);
    tx.exec0("SET TRANSACTION READ ONLY");
    std::string table = Qualified(tx, sample.schema, sample.table);
    std::string where = sample.where.empty() ? "true" : "(" + sample.where + ")";
    const std::string hint = "the source (" + source + ") must have " + sample.schema + "." +
                             sample.table + ", and where: is a condition on its columns.";
    auto shape = Located(sample.at, "scenario.sample", "the source refused the query", hint,
                         [&] { return tx.exec("SELECT * FROM " + table + " WHERE false"); });
    for (pqxx::row::size_type i = 0; i < shape.columns(); ++i)
      source_columns.emplace_back(shape.column_name(i));
    auto result =
        Located(sample.where.empty() ? sample.at : sample.where_at,
                sample.where.empty() ? "scenario.sample" : "scenario.sample.where",
                "the source refused the query", hint, [&] {
                  return tx.exec_params("SELECT row_to_json(s)::text FROM (SELECT * FROM " + table +
                                            " WHERE " + where + " LIMIT $1) AS s",
                                        sample.rows);
                });
    for (const auto& row : result) rows.push_back(row[0].as<std::string>());
  }
  pqxx::work tx(conn);
  std::string table = Qualified(tx, sample.schema, sample.table);
  auto types = ColumnTypes(tx, table);
  std::string columns;
  for (const auto& name : source_columns) {
    if (types.count(name)) columns += (columns.empty() ? "" : ", ") + tx.quote_name(name);
  }
  if (columns.empty()) {
    throw config::ConfigError(
        sample.at, "scenario.sample",
        sample.schema + "." + sample.table + " has no column of the source's table of that name",
        "the rows are copied by column name into the table scenario.schema "
        "creates.");
  }
  constexpr size_t kBatch = 1000;
  for (size_t first = 0; first < rows.size(); first += kBatch) {
    std::string json = "[";
    for (size_t i = first; i < std::min(rows.size(), first + kBatch); ++i)
      json += (i == first ? "" : ",") + rows[i];
    json += "]";
    Located(sample.at, "scenario.sample", "the sampled rows do not fit " + table,
            "the table scenario.schema creates must take the source's rows.", [&] {
              return tx.exec_params("INSERT INTO " + table + " (" + columns + ") SELECT " +
                                        columns + " FROM json_populate_recordset(NULL::" + table +
                                        ", $1::json)",
                                    json);
            });
  }
  tx.commit();
  spdlog::info("sample copied table={}.{} rows={} source=\"{}\"", sample.schema, sample.table,
               rows.size(), source);
  return static_cast<long long>(rows.size());
}

long long PrepareUserTables(pqxx::connection_base& conn, const config::Workload& w,
                            const config::Config& config) {
  {
    pqxx::work tx(conn);
    for (const auto& schema : w.created_schemas)
      tx.exec("DROP SCHEMA IF EXISTS " + tx.quote_name(schema) + " CASCADE");
    for (const auto& name : w.created_tables) {
      auto dot = name.find('.');
      std::string schema = name.substr(0, dot);
      if (std::find(w.created_schemas.begin(), w.created_schemas.end(), schema) !=
          w.created_schemas.end())
        continue;
      tx.exec("DROP TABLE IF EXISTS " + Qualified(tx, schema, name.substr(dot + 1)) + " CASCADE");
    }
    Located(w.schema_at, "scenario.schema", "'" + FileName(w.schema_file) + "' failed",
            "the schema file runs in one transaction in every cell, after the schemas it creates "
            "are dropped; fix the statement.",
            [&] { return tx.exec(w.schema_sql); });
    tx.commit();
  }
  if (w.sample) CopySample(*w.sample, conn);
  for (const auto& table : w.data) {
    long long rows = Generate(conn, table);
    spdlog::debug("rows generated table={}.{} rows={}", table.schema, table.table, rows);
  }
  db::InstallVersionTrigger(conn, config.target);
  for (const auto& target : config.targets) db::InstallVersionTrigger(conn, target);
  pqxx::nontransaction tx(conn);
  for (const auto& name : w.created_tables) {
    auto dot = name.find('.');
    tx.exec("ANALYZE " + Qualified(tx, name.substr(0, dot), name.substr(dot + 1)));
  }
  return tx
      .exec("SELECT count(*) FROM " +
            Qualified(tx, config.target.schema, config.target.table))[0][0]
      .as<long long>();
}

void GrantUserTables(pqxx::transaction_base& tx, const config::Workload& w,
                     const std::string& role) {
  std::string name = tx.quote_name(role);
  for (const auto& schema : w.created_schemas) {
    std::string s = tx.quote_name(schema);
    tx.exec("GRANT USAGE ON SCHEMA " + s + " TO " + name +
            "; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + s + " TO " + name +
            "; GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA " + s + " TO " + name);
  }
  for (const auto& table : w.created_tables) {
    auto dot = table.find('.');
    tx.exec("GRANT SELECT, INSERT, UPDATE, DELETE ON " +
            Qualified(tx, table.substr(0, dot), table.substr(dot + 1)) + " TO " + name);
  }
}

std::string EnqueueQuery(pqxx::transaction_base& tx, const config::Config& config,
                         long long items) {
  if (!config.enqueue.select.empty()) {
    std::string select = config.enqueue.select;
    while (!select.empty() &&
           (std::isspace(static_cast<unsigned char>(select.back())) || select.back() == ';'))
      select.pop_back();
    return fmt::format("SELECT * FROM ({}\n) AS job_items LIMIT {}", select, items);
  }
  std::string table = Qualified(tx, config.target.schema, config.target.table);
  return fmt::format(
      "WITH k AS (SELECT array_agg({0} ORDER BY {0}) AS a FROM {1}) "
      "SELECT a[1 + (g - 1) % cardinality(a)] FROM k, generate_series(1, {2}) AS g",
      tx.quote_name(config.target.key_column), table, items);
}

long long AppliedCheck(pqxx::transaction_base& tx, const config::Workload& w) {
  auto result = Located(w.applied_check_at, "scenario.applied_check", "the check failed",
                        "scenario.applied_check is a query returning one number: the items not "
                        "applied exactly once.",
                        [&] { return tx.exec(w.applied_check); });
  if (result.size() != 1 || result.columns() != 1 || result[0][0].is_null()) {
    throw config::ConfigError(w.applied_check_at, "scenario.applied_check",
                              "the query does not return one number",
                              "return one row of one column: the items not applied exactly once "
                              "(0 when all were).");
  }
  return result[0][0].as<long long>();
}

std::string ReadInvariant(pqxx::transaction_base& tx, const config::Workload& w) {
  auto result = Located(w.invariant_at, "scenario.invariant", "the invariant's query failed",
                        "scenario.invariant is a query returning one value that neither side may "
                        "change, e.g. SELECT sum(balance) FROM ledger.accounts.",
                        [&] { return tx.exec(w.invariant); });
  if (result.size() != 1 || result.columns() != 1) {
    throw config::ConfigError(w.invariant_at, "scenario.invariant",
                              "the query does not return one value",
                              "return one row of one column, e.g. SELECT sum(balance) FROM "
                              "ledger.accounts.");
  }
  return result[0][0].is_null() ? "" : result[0][0].as<std::string>();
}

long long InvariantDrift(const std::string& before, const std::string& after) {
  if (before == after) return 0;
  try {
    size_t used_before = 0, used_after = 0;
    long double a = std::stold(before, &used_before), b = std::stold(after, &used_after);
    if (used_before == before.size() && used_after == after.size()) {
      return std::max(1LL, static_cast<long long>(std::llround(std::fabs(b - a))));
    }
  } catch (const std::exception&) {
  }
  return 1;
}

std::vector<std::pair<std::string, std::string>> DescribeWorkload(
    const config::ScenarioCell& cell) {
  const config::Workload& w = cell.settings.workload;
  const config::Config& c = cell.config;
  std::vector<std::pair<std::string, std::string>> out;
  if (!w.UserTables()) {
    out.emplace_back("table", fmt::format("{} (the demo table, {} rows seeded per cell)",
                                          c.target.Name(), cell.settings.records));
  } else {
    std::string rows;
    if (w.sample) {
      rows +=
          fmt::format("; up to {} rows of {}.{} sampled from {}", w.sample->rows, w.sample->schema,
                      w.sample->table, db::DescribeConninfo(w.sample->conninfo));
    }
    for (const auto& t : w.data) {
      rows += fmt::format("; {}.{} {} rows generated", t.schema, t.table, t.rows);
    }
    out.emplace_back(
        "table", fmt::format("{} (schema {}{})", c.target.Name(), FileName(w.schema_file), rows));
  }
  std::string mix;
  auto add = [&](const std::string& name, double weight, bool sql) {
    if (weight > 0)
      mix += fmt::format("{}{} {:g}{}", mix.empty() ? "" : ", ", name, weight, sql ? " (SQL)" : "");
  };
  const config::OnlineMix& m = c.online.mix;
  add("view", m.view, false);
  add("optimistic_edit", m.optimistic_edit, false);
  add("pessimistic_edit", m.pessimistic_edit, false);
  add("offline_edit", m.offline_edit, false);
  add("atomic_decrement", m.atomic_decrement, false);
  add("nolock", m.nolock, false);
  add("multi_edit", m.multi_edit, false);
  for (const auto& kind : c.online.custom_kinds) add(kind.name, kind.weight, true);
  out.emplace_back("online", c.online.model == config::LoadModel::kClosed
                                 ? fmt::format("{} users, think time {} ms; mix: {}",
                                               c.online.users, c.online.think_time.count(), mix)
                                 : fmt::format("{:g} transactions/s; mix: {}", c.online.rate, mix));
  std::string operation =
      fmt::format("{}, keys: {}", c.operation.Configured() ? c.operation.Form() : "item_sql",
                  c.operation.keys == config::ItemKeys::kMany ? "many" : "one");
  std::string queued = c.batch.range ? "a range job over the rows where " + c.batch.range->where
                       : c.enqueue.select.empty() ? "items spread over the target's keys"
                                                  : "items from its enqueue.select";
  if (!w.job_file.empty()) {
    out.emplace_back("batch", fmt::format("job {} from {}: {}; {}", c.batch.job,
                                          FileName(w.job_file), operation, queued));
  } else if (!c.operation.Configured()) {
    out.emplace_back("batch", std::string("the demo's operation (settled + 1 and a ledger row per "
                                          "item)") +
                                  (c.batch.range ? "; " + queued : ""));
  } else {
    out.emplace_back("batch", fmt::format("job {}: the scenario's operation: {}; {}", c.batch.job,
                                          operation, queued));
  }
  std::string checks;
  if (!w.applied_check.empty()) checks = "scenario.applied_check";
  if (!w.invariant.empty())
    checks += (checks.empty() ? "" : ", ") + std::string("scenario.invariant");
  if (checks.empty() && !w.UserTables() && w.job_file.empty() && !c.operation.Configured())
    checks = "the demo's ledger (public.batch_ledger)";
  out.emplace_back("checks", checks.empty() ? "none (no scenario.applied_check)" : checks);
  return out;
}

}  // namespace coexist::capacity
