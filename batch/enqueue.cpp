#include "batch/enqueue.h"

#include <spdlog/spdlog.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "common/error.h"
#include "db/array_literal.h"
#include "db/connection.h"
#include "schema/migrations.h"
#include "schema/queue_store.h"
#include "schema/queue_store_ops.h"

namespace coexist::batch {
namespace {

constexpr size_t kBatch = 10'000;
constexpr long long kMaxKey = std::numeric_limits<long long>::max();  // bigint's

[[noreturn]] void Bad(const std::string& name, long line, const std::string& message) {
  throw Error(ExitCode::kDataError, name + ":" + std::to_string(line) + ": " + message,
              "CSV lines are key[,payload[,idempotency_key]]; JSON lines are "
              "{\"key\": 1, \"payload\": {...}, \"idempotency_key\": \"...\"} (\"keys\": "
              "[1, 2] for an item of several records).");
}

// One CSV record's fields (RFC 4180: "..." with "" for a quote).
std::vector<std::string> SplitCsv(const std::string& line, const std::string& name, long number) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  if (quoted) Bad(name, number, "unclosed quote");
  return fields;
}

long long ParseKey(const std::string& text, const std::string& name, long number) {
  size_t used = 0;
  long long key = 0;
  try {
    key = std::stoll(text, &used);
  } catch (const std::out_of_range&) {
    Bad(name, number,
        "key " + text + " is out of range (keys are bigint, at most " + std::to_string(kMaxKey) +
            ")");
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) Bad(name, number, "'" + text + "' is not an integer key");
  return key;
}

// One key of a JSON line: an integer within bigint for an integer key
// column, else a non-empty string or a number.
std::string KeyOf(const nlohmann::json& key, bool integer_keys, const std::string& name,
                  long number) {
  if (integer_keys) {
    if (!key.is_number_integer()) Bad(name, number, "\"key\" must be an integer");
    // nlohmann keeps 2^63..2^64-1 as an unsigned number; get<long long>
    // would wrap it to a negative key.
    if (key.is_number_unsigned() &&
        key.get<unsigned long long>() > static_cast<unsigned long long>(kMaxKey)) {
      Bad(name, number,
          "key " + key.dump() + " is out of range (keys are bigint, at most " +
              std::to_string(kMaxKey) + ")");
    }
    return std::to_string(key.get<long long>());
  }
  // A number as written (3.05 stays 3.05): EnqueueItems checks it against
  // the key column's type like any other key.
  if (!key.is_string() && !key.is_number()) {
    Bad(name, number, "\"key\" must be a string or a number");
  }
  std::string text = key.is_string() ? key.get<std::string>() : key.dump();
  if (text.empty()) Bad(name, number, "the key is empty");
  return text;
}

std::string CheckPayload(const std::string& text, const std::string& name, long number) {
  if (text.empty()) return "{}";
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) Bad(name, number, "the payload is not a JSON object");
  return json.dump();
}

}  // namespace

std::vector<EnqueueItem> ParseCsv(std::istream& in, const std::string& name, bool integer_keys,
                                  bool shard_field) {
  std::vector<EnqueueItem> items;
  std::string line;
  size_t most = shard_field ? 4 : 3;
  for (long number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto fields = SplitCsv(line, name, number);
    if (number == 1 && fields[0] == "key") continue;  // header
    if (fields.size() > most) Bad(name, number, "more than " + std::to_string(most) + " fields");
    EnqueueItem item;
    item.line = number;
    if (fields.size() > 3) item.shard = fields[3];
    // An array literal ("{3,1,2}", quoted in CSV for its commas) names an
    // item's several records, as an array column of --select does.
    const std::string& key = fields[0];
    std::vector<std::string> keys = {key};
    bool several = key.size() >= 2 && key.front() == '{' && key.back() == '}';
    if (several) {
      keys = db::ParseArrayLiteral(key);
      if (keys.empty()) Bad(name, number, "the array of keys is empty");
    }
    for (auto& k : keys) {
      if (integer_keys) {
        k = std::to_string(ParseKey(k, name, number));
      } else if (k.empty()) {
        Bad(name, number, "the key is empty");
      }
    }
    if (several) {
      item.keys = std::move(keys);
    } else {
      item.key = std::move(keys[0]);
    }
    if (fields.size() > 1) item.payload = CheckPayload(fields[1], name, number);
    if (fields.size() > 2 && !fields[2].empty()) item.idempotency_key = fields[2];
    items.push_back(std::move(item));
  }
  return items;
}

std::vector<EnqueueItem> ParseJsonLines(std::istream& in, const std::string& name,
                                        bool integer_keys, bool shard_field) {
  std::vector<EnqueueItem> items;
  std::string line;
  for (long number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!json.is_object()) Bad(name, number, "not a JSON object");
    EnqueueItem item;
    item.line = number;
    if (json.contains("keys")) {
      if (json.contains("key")) Bad(name, number, "give \"key\" or \"keys\", not both");
      const auto& keys = json["keys"];
      if (!keys.is_array() || keys.empty()) {
        Bad(name, number, "\"keys\" must be a non-empty array of keys");
      }
      for (const auto& key : keys) item.keys.push_back(KeyOf(key, integer_keys, name, number));
    } else if (!json.contains("key")) {
      Bad(name, number, "\"key\" is missing");
    } else {
      item.key = KeyOf(json["key"], integer_keys, name, number);
    }
    if (json.contains("payload")) {
      if (!json["payload"].is_object()) Bad(name, number, "\"payload\" must be an object");
      item.payload = json["payload"].dump();
    }
    if (json.contains("idempotency_key") && !json["idempotency_key"].is_null()) {
      const auto& k = json["idempotency_key"];
      item.idempotency_key = k.is_string() ? k.get<std::string>() : k.dump();
    }
    if (shard_field && json.contains("shard") && !json["shard"].is_null()) {
      if (!json["shard"].is_string()) Bad(name, number, "\"shard\" must be a shard's name");
      item.shard = json["shard"].get<std::string>();
    }
    for (const auto& [field, value] : json.items()) {
      if (field == "shard" && !shard_field) {
        Bad(name, number, "\"shard\" names the item's shard only under database.shard_by: column");
      }
      if (field != "key" && field != "keys" && field != "payload" && field != "idempotency_key" &&
          field != "shard") {
        Bad(name, number, "unknown field \"" + field + "\"");
      }
    }
    items.push_back(std::move(item));
  }
  return items;
}

namespace {

// The claim's key-order test (is an earlier item of my keys pending?) is
// planned from the queue's statistics; right after a large enqueue they
// still describe the queue before it, and a run started at once (cron:
// enqueue, then run) got plans that read the job's pending items per
// candidate: 50,000 items of 4 keys, half of them behind the other half,
// took 23-33 s on a fresh database instead of 3.2 s. Autovacuum would
// analyze the queue too, but later than a run starts. ANALYZE samples a
// bounded number of rows; a role that does not own the queue gets a
// warning from the server and nothing else.
void AnalyzeAfterLargeEnqueue(pqxx::connection& conn, long long added) {
  if (added < kAnalyzeQueueAfter) return;
  pqxx::nontransaction tx(conn);
  db::AnalyzeQueue(tx);
}

}  // namespace

namespace {

// The key column as messages name it: "public.film.film_id (integer)".
std::string ColumnName(const EnqueueTarget& target, const std::string& key_type) {
  if (target.table == nullptr) return "the key column (" + key_type + ")";
  return "the key column " + target.table->Name() + "." + target.table->key_column + " (" +
         key_type + ")";
}

// The rule a key meets, in the words of the hint.
std::string Rule(const std::string& key_type, const std::string& source_type) {
  if (source_type.empty()) {
    return "a key given as text is taken when it parses as " + key_type +
           " (its spelling is then made canonical: 042 is 42)";
  }
  return "a key is taken when it casts to " + key_type + " and back to " + source_type +
         " unchanged (3.00 is 3; 3.05 is refused, never rounded)";
}

// The test of one key `v` of type `source_type` ("" for text: it must
// parse), as SQL that is true when it fits and fails or is false otherwise.
std::string FitsSql(const std::string& v, const std::string& key_type,
                    const std::string& source_type, bool has_equality) {
  if (source_type.empty()) return v + " IS NULL OR (" + v + ")::" + key_type + " IS NOT NULL";
  if (!has_equality) {
    return "(" + v + ")::" + key_type + "::" + source_type + "::text = (" + v + ")::text";
  }
  return "(" + v + ")::" + key_type + "::" + source_type + " IS NOT DISTINCT FROM " + v;
}

// A session-local function that tells, without failing, whether a key fits
// (FitsSql; a cast that fails is false), to name the keys that do not once
// a set-based statement failed on the first of them.
void CreateFitsFunction(pqxx::transaction_base& tx, const std::string& key_type,
                        const std::string& source_type, bool has_equality) {
  std::string param = source_type.empty() ? "text" : source_type;
  tx.exec("CREATE OR REPLACE FUNCTION pg_temp.coexist_key_fits(v " + param +
          ") RETURNS boolean LANGUAGE plpgsql AS $fits$ BEGIN RETURN coalesce(" +
          FitsSql("v", key_type, source_type, has_equality) +
          ", false); EXCEPTION WHEN data_exception THEN RETURN false; END $fits$");
}

// "3.05, 7.64, 5.23, ..." : the keys shown, and an ellipsis when `count`
// has more than them.
std::string KeyList(const std::vector<std::string>& shown, long long count) {
  std::string list;
  for (const auto& key : shown) list += (list.empty() ? "" : ", ") + key;
  if (count > static_cast<long long>(shown.size())) list += ", ...";
  return list;
}

[[noreturn]] void RefuseKeys(const std::string& what, long long count,
                             const std::vector<std::string>& shown, const std::string& column,
                             const std::string& rule, const std::string& fix) {
  std::string list = KeyList(shown, count);
  throw Error(ExitCode::kDataError,
              std::to_string(count) + " " + what + (count == 1 ? " is" : " are") +
                  " not a value of " + column + ": " + list,
              "nothing was enqueued; " + rule + ". " + fix);
}

// "'abc' (line 3)": a refused key of a file.
std::string Located(const std::string& key, long line) {
  return "'" + key + "'" + (line > 0 ? " (line " + std::to_string(line) + ")" : "");
}

// After an insert failed on a key (22P02, 22003, ...): which keys of the
// items do not parse as `key_type`, read in a transaction of their own.
[[noreturn]] void RefuseItemKeys(pqxx::connection& conn, const std::vector<EnqueueItem>& items,
                                 const std::string& key_type, const EnqueueTarget& target,
                                 const std::string& server_error) {
  std::vector<std::string> keys;
  std::vector<long> lines;
  for (const auto& item : items) {
    for (const auto& key : item.keys.empty() ? std::vector<std::string>{item.key} : item.keys) {
      keys.push_back(key);
      lines.push_back(item.line);
    }
  }
  std::string column = ColumnName(target, key_type);
  std::string fix = "Fix those keys and enqueue again.";
  pqxx::work tx(conn);
  CreateFitsFunction(tx, key_type, "", false);
  auto rows = tx.exec_params(
      "SELECT n, count(*) OVER () FROM unnest($1::text[]) WITH ORDINALITY AS u(k, n) "
      "WHERE NOT pg_temp.coexist_key_fits(k) ORDER BY n LIMIT 5",
      db::ArrayLiteral(keys));
  if (rows.empty()) {  // not the keys' fault after all: say what the server said
    throw Error(ExitCode::kDataError, "a key does not fit " + column + ": " + server_error,
                "nothing was enqueued. " + fix);
  }
  std::vector<std::string> shown;
  for (const auto& row : rows) {
    auto at = static_cast<size_t>(row[0].as<long long>() - 1);
    shown.push_back(Located(keys[at], lines[at]));
  }
  RefuseKeys("key" + std::string(rows[0][1].as<long long>() == 1 ? "" : "s") + " (text)",
             rows[0][1].as<long long>(), shown, column, Rule(key_type, ""), fix);
}

// Whether the role may read the target's key column, and the SQL test of
// an added item's keys `ks` having no row there ("" when it may not read).
std::string MissingSql(pqxx::transaction_base& tx, const EnqueueTarget& target,
                       const std::string& key_type) {
  if (target.table == nullptr) return "";
  std::string table =
      tx.quote_name(target.table->schema) + "." + tx.quote_name(target.table->table);
  std::string key = tx.quote_name(target.table->key_column);
  bool may_read =
      tx.exec_params1("SELECT coalesce(has_column_privilege(to_regclass($1), $2, 'SELECT'), false)",
                      table, target.table->key_column)[0]
          .as<bool>();
  if (!may_read) return "";
  return "EXISTS (SELECT 1 FROM unnest(ks) AS mk(k) WHERE NOT EXISTS (SELECT 1 FROM " + table +
         " AS t WHERE t." + key + " = mk.k::" + key_type + "))";
}

// Fills the result's missing count; refuses when asked to (nothing is
// committed yet).
void NoteMissing(EnqueueResult& result, const db::Inserted& inserted, bool counted,
                 const EnqueueTarget& target) {
  result.missing = inserted.missing;
  result.missing_keys = inserted.missing_keys;
  result.missing_counted = counted;
  if (!target.refuse_missing || inserted.missing == 0) return;
  std::string list = KeyList(inserted.missing_keys, inserted.missing);
  throw Error(ExitCode::kDataError,
              std::to_string(inserted.missing) +
                  (inserted.missing == 1 ? " item names" : " items name") +
                  " a key with no row in " + target.table->Name() + ": " + list,
              "nothing was enqueued (--refuse-missing). Leave those keys out, or enqueue without "
              "--refuse-missing when the operation creates the rows (batch.missing_rows: apply, "
              "docs/batch.md).");
}

}  // namespace

EnqueueResult EnqueueItems(const std::string& conninfo, const std::string& job,
                           const std::vector<EnqueueItem>& items, const std::string& key_type,
                           const EnqueueTarget& target) {
  auto conn = db::Connect(conninfo, "coexist-enqueue");
  db::InstallMigrations(*conn);
  EnqueueResult result;
  db::Inserted total;
  bool counted = false;
  {
    pqxx::work tx(*conn);
    std::string missing_sql = MissingSql(tx, target, key_type);
    counted = !missing_sql.empty();
    std::string server_error;
    for (size_t start = 0; start < items.size(); start += kBatch) {
      size_t end = std::min(items.size(), start + kBatch);
      std::vector<std::vector<std::string>> keys;
      std::vector<std::optional<std::string>> payloads;
      std::vector<std::optional<std::string>> idempotency;
      for (size_t i = start; i < end; ++i) {
        keys.push_back(items[i].keys.empty() ? std::vector<std::string>{items[i].key}
                                             : items[i].keys);
        payloads.emplace_back(items[i].payload);
        idempotency.push_back(items[i].idempotency_key);
      }
      try {
        auto inserted =
            db::InsertItems(tx, job, key_type, keys, payloads, idempotency, missing_sql);
        total.added += inserted.added;
        total.missing += inserted.missing;
        for (auto& key : inserted.missing_keys) {
          if (total.missing_keys.size() < 5) total.missing_keys.push_back(std::move(key));
        }
      } catch (const pqxx::data_exception& e) {
        // 22P02, 22003 and friends: a key that is not a value of the key's
        // type. The transaction is lost; another one names the keys.
        std::string what = e.what();
        server_error = what.substr(0, what.find('\n'));
        break;
      }
    }
    if (!server_error.empty()) {
      tx.abort();
      RefuseItemKeys(*conn, items, key_type, target, server_error);
    }
    NoteMissing(result, total, counted, target);
    tx.commit();
  }
  AnalyzeAfterLargeEnqueue(*conn, total.added);
  result.added = total.added;
  result.duplicates = static_cast<long long>(items.size()) - total.added;
  return result;
}

namespace {

// The query's key column: its type (an array's element type) as
// format_type spells it, and what the check of its values needs.
struct SourceKey {
  bool several = false;  // an array: the keys of an item of several records
  std::string type;      // "" for a string type: its values must parse
  bool has_equality = true;
  // Every value fits: the key type itself, an integer type it widens, a
  // string into a string key.
  bool lossless = false;
};

SourceKey SourceKeyOf(pqxx::transaction_base& tx, long long type_oid, const std::string& key_type) {
  auto row = tx.exec_params1(
      "SELECT t.typcategory = 'A', format_type(e.oid, NULL), e.typcategory = 'S', "
      "       EXISTS (SELECT 1 FROM pg_operator WHERE oprname = '=' AND oprleft = e.oid "
      "                  AND oprright = e.oid) "
      "  FROM pg_type t JOIN pg_type e ON e.oid = CASE WHEN t.typcategory = 'A' "
      "                                   THEN t.typelem ELSE t.oid END "
      " WHERE t.oid = $1",
      type_oid);
  SourceKey source;
  source.several = row[0].as<bool>();
  std::string type = row[1].as<std::string>();
  source.has_equality = row[3].as<bool>();
  source.type = type;
  source.lossless = type == key_type ||
                    (key_type == "bigint" && (type == "integer" || type == "smallint")) ||
                    (key_type == "integer" && type == "smallint");
  if (row[2].as<bool>()) {  // a string: parsed as the key, and a string key takes it as it is
    source.lossless = key_type == "text" || key_type == "character varying";
    source.type = "";
  }
  return source;
}

// Refuses the query's keys that do not fit the key column, before anything
// is inserted: first set-based, in a savepoint (a cast that fails fails the
// pass), then, only when that pass failed, through pg_temp.coexist_key_fits
// to name them. A query of the key's own type is not read again.
void CheckSelectedKeys(pqxx::work& tx, const std::string& values_sql, const SourceKey& source,
                       const std::string& key_type, const EnqueueTarget& target) {
  std::string shown_type = source.type.empty() ? "text" : source.type;
  auto refuse = [&](const pqxx::result& rows) {
    std::vector<std::string> shown;
    for (const auto& row : rows) shown.push_back(row[0].c_str());
    RefuseKeys(std::string("of the query's keys (") + shown_type + ")", rows[0][1].as<long long>(),
               shown, ColumnName(target, key_type), Rule(key_type, source.type),
               "Return the column's own values (SELECT " +
                   (target.table != nullptr ? target.table->key_column : std::string("id")) +
                   " FROM ...), or cast in the query where that is what you mean (round(x)::" +
                   key_type + ").");
  };
  if (!source.type.empty() && !source.lossless) {
    try {
      pqxx::subtransaction check(tx, "key_check");
      auto rows = check.exec(
          "SELECT v::text, count(*) OVER () FROM (" + values_sql + ") AS c(v) WHERE NOT coalesce(" +
          FitsSql("v", key_type, source.type, source.has_equality) + ", false) LIMIT 5");
      check.commit();
      if (!rows.empty()) refuse(rows);
      return;
    } catch (const pqxx::data_exception&) {
      // a cast failed: named below
    }
  } else if (!source.type.empty() || source.lossless) {
    return;
  } else {
    // Text keys: parsing them is the test, tried in a savepoint.
    try {
      pqxx::subtransaction check(tx, "key_check");
      check.exec("SELECT count(*) FROM (" + values_sql + ") AS c(v) WHERE v::" + key_type +
                 " IS NULL");
      check.commit();
      return;
    } catch (const pqxx::data_exception&) {
    }
  }
  CreateFitsFunction(tx, key_type, source.type, source.has_equality);
  auto rows = tx.exec("SELECT v::text, count(*) OVER () FROM (" + values_sql +
                      ") AS c(v) WHERE NOT pg_temp.coexist_key_fits(v) LIMIT 5");
  if (!rows.empty()) refuse(rows);
}

}  // namespace

EnqueueResult EnqueueSelect(const std::string& conninfo, const std::string& job,
                            const std::string& select_sql, const std::string& key_type,
                            const EnqueueTarget& target) {
  auto conn = db::Connect(conninfo, "coexist-enqueue");
  db::InstallMigrations(*conn);
  pqxx::work tx(*conn);
  // The operator's query is SQL by design; it is wrapped, not altered.
  auto shape = tx.exec("SELECT * FROM (" + select_sql + ") AS s LIMIT 0");
  auto columns = shape.columns();
  if (columns < 1 || columns > 3) {
    throw UsageError("the query returns " + std::to_string(columns) + " columns",
                     "return key[, payload jsonb[, idempotency_key text]].");
  }
  // The columns are taken by position, whatever their names: unnamed
  // expressions are all "?column?", and a name may repeat.
  std::string aliases = "k";
  if (columns > 1) aliases += ", p";
  if (columns > 2) aliases += ", ik";
  std::string payload = columns > 1 ? "coalesce(s.p::jsonb, '{}')" : "'{}'::jsonb";
  std::string idempotency = columns > 2 ? "s.ik::text" : "NULL::text";
  std::string from = " FROM (" + select_sql + ") AS s(" + aliases + ")";
  // An array in the key column: the keys of an item of several records.
  auto source = SourceKeyOf(tx, static_cast<long long>(shape.column_type(0)), key_type);
  try {
    CheckSelectedKeys(tx, (source.several ? "SELECT unnest(s.k)" : "SELECT s.k") + from, source,
                      key_type, target);
  } catch (const pqxx::sql_error& e) {
    // 42846: no cast from the query's type to the key's, or back.
    if (e.sqlstate() != "42846") throw;
    std::string what = e.what();
    throw Error(ExitCode::kDataError,
                "the query's keys (" + (source.type.empty() ? "text" : source.type) +
                    ") do not cast to " + ColumnName(target, key_type) + ": " +
                    what.substr(0, what.find('\n')),
                "nothing was enqueued; return the key column's own values, or cast them in the "
                "query.");
  }
  std::string keys =
      source.several ? db::SortedKeysSql("s.k", key_type) : "ARRAY[s.k::" + key_type + "::text]";
  std::string missing_sql = MissingSql(tx, target, key_type);
  db::SelectedInsert inserted;
  try {
    inserted = db::InsertSelected(
        tx, job,
        "SELECT " + keys + " AS ks, " + payload + " AS p, " + idempotency + " AS ik" + from,
        missing_sql);
  } catch (const pqxx::not_null_violation&) {
    throw Error(ExitCode::kDataError,
                "a row of the query has no key (NULL, or an empty array of keys)",
                "nothing was enqueued; leave such rows out (WHERE ... IS NOT NULL) and enqueue "
                "again.");
  }
  EnqueueResult result;
  NoteMissing(result, inserted, !missing_sql.empty(), target);
  tx.commit();
  AnalyzeAfterLargeEnqueue(*conn, inserted.added);
  result.added = inserted.added;
  result.duplicates = inserted.rows - result.added;
  return result;
}

}  // namespace coexist::batch
