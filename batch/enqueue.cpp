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
  if (!key.is_string() && !key.is_number_integer()) {
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

EnqueueResult EnqueueItems(const std::string& conninfo, const std::string& job,
                           const std::vector<EnqueueItem>& items, const std::string& key_type) {
  auto conn = db::Connect(conninfo, "coexist-enqueue");
  db::InstallMigrations(*conn);
  EnqueueResult result;
  pqxx::work tx(*conn);
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
      result.added += db::InsertItems(tx, job, key_type, keys, payloads, idempotency);
    } catch (const pqxx::data_exception& e) {
      // 22P02 and friends: a key that is not a value of the key's type.
      std::string what = e.what();
      throw Error(ExitCode::kDataError,
                  "a key is not a " + key_type + ": " + what.substr(0, what.find('\n')),
                  "nothing was enqueued; fix that key and enqueue again.");
    }
  }
  tx.commit();
  AnalyzeAfterLargeEnqueue(*conn, result.added);
  result.duplicates = static_cast<long long>(items.size()) - result.added;
  return result;
}

EnqueueResult EnqueueSelect(const std::string& conninfo, const std::string& job,
                            const std::string& select_sql, const std::string& key_type) {
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
  // An array in the key column: the keys of an item of several records.
  bool several = tx.exec_params1("SELECT typcategory = 'A' FROM pg_type WHERE oid = $1",
                                 static_cast<long long>(shape.column_type(0)))[0]
                     .as<bool>();
  std::string keys =
      several ? db::SortedKeysSql("s.k", key_type) : "ARRAY[s.k::" + key_type + "::text]";
  db::SelectedInsert inserted;
  try {
    inserted =
        db::InsertSelected(tx, job,
                           "SELECT " + keys + " AS ks, " + payload + " AS p, " + idempotency +
                               " AS ik FROM (" + select_sql + ") AS s(" + aliases + ")");
  } catch (const pqxx::not_null_violation&) {
    throw Error(ExitCode::kDataError,
                "a row of the query has no key (NULL, or an empty array of keys)",
                "nothing was enqueued; leave such rows out (WHERE ... IS NOT NULL) and enqueue "
                "again.");
  }
  tx.commit();
  AnalyzeAfterLargeEnqueue(*conn, inserted.added);
  EnqueueResult result;
  result.added = inserted.added;
  result.duplicates = inserted.rows - result.added;
  return result;
}

}  // namespace coexist::batch
