// Targets keyed by something other than our demo's bigint: uuid, text and
// integer keys, in a schema of their own, with repeated keys spelled in
// more than one way (a uuid in upper and lower case, an integer with a
// leading zero), under every policy. coexist keeps a key in the canonical
// text form of the key column's type, so two spellings of one record are
// one key: claimed one at a time, edit-locked as one, applied once each.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

#include "batch/enqueue.h"
#include "batch/runner.h"
#include "common/error.h"
#include "config/config.h"
#include "tests/support/database_test.h"

namespace coexist::batch {
namespace {

struct KeyType {
  const char* name;
  const char* column_type;
  const char* key_of_g;  // SQL: the key of row g (g = 1..30)
};

const KeyType kKeyTypes[] = {
    {"uuid", "uuid", "md5(g::text)::uuid"},
    {"text", "text", "'sku-' || g"},
    {"integer", "integer", "g"},
};

const char* const kPolicies[] = {
    "  name: skip_locked\n",
    "  name: online_priority\n  max_wait: 1s\n",
    "  name: batch_priority\n",
    "  name: status_partition\n",
};

std::string Upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return text;
}

class KeyTypesTest : public testing::DatabaseTest,
                     public ::testing::WithParamInterface<std::tuple<KeyType, const char*>> {
 protected:
  const KeyType& type() const { return std::get<0>(GetParam()); }

  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue(std::string("CREATE SCHEMA app;"
                           "CREATE TABLE app.items (k ") +
               type().column_type +
               " PRIMARY KEY, qty integer NOT NULL DEFAULT 0,"
               "  version bigint NOT NULL DEFAULT 0, holder text NOT NULL DEFAULT 'online');"
               "INSERT INTO app.items (k) SELECT " +
               type().key_of_g +
               " FROM generate_series(1, 30) g;"
               "CREATE TABLE app.applied (k text NOT NULL, uid text NOT NULL)");
  }

  // The keys of rows 1..30, as the table spells them.
  std::vector<std::string> Keys() {
    std::vector<std::string> keys;
    auto conn = Connect();
    pqxx::read_transaction tx(*conn);
    for (const auto& row : tx.exec(std::string("SELECT (") + type().key_of_g +
                                   ")::text FROM generate_series(1, 30) g ORDER BY g")) {
      keys.push_back(row[0].as<std::string>());
    }
    return keys;
  }

  // Another spelling of the same key: a uuid in upper case, an integer
  // with a leading zero; text keys have only one.
  std::string Respelled(const std::string& key) {
    if (std::string(type().name) == "uuid") return Upper(key);
    if (std::string(type().name) == "integer") return "0" + key;
    return key;
  }

  config::Config JobConfig(const std::string& policy) {
    std::string cast = std::string("$1::text[]::") + type().column_type + "[]";
    return config::LoadString(
        "target: {table: app.items, key_column: k, owner_column: holder}\n"
        "batch: {job: items, chunk_size: 10, workers: 2}\n"
        "policy:\n" +
            policy +
            "operation:\n"
            "  chunk_sql: |\n"
            "    WITH u AS (UPDATE app.items t SET qty = t.qty + i.qty\n"
            "                 FROM unnest(" +
            cast +
            ", $2::integer[]) AS i(k, qty)\n"
            "                WHERE t.k = i.k)\n"
            "    INSERT INTO app.applied SELECT * FROM unnest($1::text[], $3::text[])\n"
            "  params: [qty, uid]\n",
        "items.yaml");
  }
};

TEST_P(KeyTypesTest, RepeatedKeysInAnySpellingAreEachAppliedOnce) {
  auto keys = Keys();
  std::vector<EnqueueItem> items;
  for (int uid = 1; uid <= 60; ++uid) {
    const auto& key = keys[static_cast<size_t>((uid * 7) % 20)];  // 20 keys, 3 items each
    items.push_back({uid % 2 == 0 ? Respelled(key) : key,
                     "{\"qty\": " + std::to_string(uid % 4 + 1) + ", \"uid\": \"u" +
                         std::to_string(uid) + "\"}",
                     std::nullopt});
  }
  EnqueueItems(conninfo(), "items", items, type().column_type);
  // One spelling per key in the queue: the table's own.
  EXPECT_EQ(Count("SELECT count(DISTINCT record_key) FROM coexist.items"), 20);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items q WHERE NOT EXISTS "
                  "(SELECT 1 FROM app.items t WHERE t.k::text = q.record_key)"),
            0);

  auto summary = batch::Run(conninfo(), JobConfig(std::get<1>(GetParam())));
  EXPECT_EQ(summary.counts.done, 60);
  EXPECT_EQ(Count("SELECT count(DISTINCT uid) FROM app.applied"), 60);
  EXPECT_EQ(Count("SELECT count(*) FROM app.items t LEFT JOIN (SELECT record_key, "
                  "sum((payload->>'qty')::int) AS qty FROM coexist.items GROUP BY 1) q "
                  "ON q.record_key = t.k::text WHERE t.qty <> coalesce(q.qty, 0)"),
            0)
      << "a row's qty is not the sum of its items' (a lost or doubled update)";
  EXPECT_EQ(Count("SELECT count(*) FROM app.items WHERE holder <> 'online'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.takeovers"), 0);
}

INSTANTIATE_TEST_SUITE_P(Keys, KeyTypesTest,
                         ::testing::Combine(::testing::ValuesIn(kKeyTypes),
                                            ::testing::ValuesIn(kPolicies)),
                         [](const auto& param_info) {
                           std::string policy = std::get<1>(param_info.param);
                           policy = policy.substr(policy.find(':') + 2);
                           policy = policy.substr(0, policy.find('\n'));
                           return std::string(std::get<0>(param_info.param).name) + "_" + policy;
                         });

// An edit lock taken under another spelling of the key is the same lock:
// the guard refuses another session's write, and the batch defers the item.
class KeySpellingTest : public testing::DatabaseTest {};

TEST_F(KeySpellingTest, AnEditLockUnderAnotherSpellingGuardsTheSameRecord) {
  QueryValue(
      "CREATE SCHEMA app;"
      "CREATE TABLE app.orders (id uuid PRIMARY KEY, status text NOT NULL DEFAULT 'open', owner "
      "text,"
      "  version bigint NOT NULL DEFAULT 0);"
      "INSERT INTO app.orders (id) SELECT md5(g::text)::uuid FROM generate_series(1, 5) g");
  auto config = config::LoadString(
      "target: {table: app.orders}\n"
      "batch: {job: orders, chunk_size: 5}\n"
      "policy: {name: skip_locked}\n"
      "operation:\n"
      "  chunk_sql: UPDATE app.orders SET status = 'settled' WHERE id = ANY ($1::uuid[])\n",
      "orders.yaml");
  auto install = batch::Run(conninfo(), config);  // installs the triggers; nothing queued
  EXPECT_EQ(install.counts.done, 0);

  std::string key = QueryValue("SELECT md5('3')::uuid::text");
  QueryValue("SELECT coexist.acquire_edit_lock('app.orders', '" + Upper(key) +
             "', 'alice', '1 hour')");
  EXPECT_EQ(QueryValue("SELECT record_key FROM coexist.edit_locks"), key);
  auto bob = Connect("bob");
  EXPECT_EQ(
      testing::SqlStateOf(*bob, "UPDATE app.orders SET status = 'x' WHERE id = '" + key + "'"),
      "CX005");
  // The uuid form of the API finds it too.
  EXPECT_EQ(QueryValue("SELECT coexist.admin_release_edit_lock('app.orders', '" + Upper(key) +
                       "', 'admin:test')"),
            "t");
  QueryValue("SELECT coexist.acquire_edit_lock('app.orders', '" + key +
             "'::uuid, 'alice', "
             "'1 hour')");

  std::vector<EnqueueItem> items;
  for (int g = 1; g <= 5; ++g) {
    items.push_back({Upper(QueryValue("SELECT md5('" + std::to_string(g) + "')::uuid::text")), "{}",
                     std::nullopt});
  }
  EnqueueItems(conninfo(), "orders", items, "uuid");
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.done, 4);
  EXPECT_EQ(summary.counts.deferred, 1);
  EXPECT_EQ(QueryValue("SELECT record_key || ':' || defer_reason FROM coexist.items WHERE state = "
                       "'deferred'"),
            key + ":edit_locked");
  EXPECT_EQ(QueryValue("SELECT status FROM app.orders WHERE id = '" + key + "'"), "open");
}

// The demo's bigint key through the text form of the API: '0042' is 42.
TEST_F(KeySpellingTest, AnIntegerKeyGivenAsTextIsCanonicalised) {
  auto install =
      batch::Run(conninfo(), config::LoadString("batch: {job: j}\npolicy: {name: skip_locked}\n"
                                                "operation: {chunk_sql: 'SELECT $1::bigint[]'}\n",
                                                "j.yaml"));
  EXPECT_EQ(install.counts.done, 0);
  QueryValue("SELECT coexist.acquire_edit_lock('products', '0042'::text, 'alice', '1 hour')");
  EXPECT_EQ(QueryValue("SELECT record_key FROM coexist.edit_locks"), "42");
  auto bob = Connect("bob");
  EXPECT_EQ(testing::SqlStateOf(*bob, "UPDATE products SET stock = 0 WHERE id = 42"), "CX005");
  EXPECT_EQ(testing::SqlStateOf(*bob,
                                "SELECT coexist.acquire_edit_lock('products', 'x42'::text, "
                                "'bob', '1 hour')"),
            "22P02");
}

// A key that is not a value of the key column's type is refused with the
// key named, and nothing is enqueued.
TEST_F(KeySpellingTest, AKeyOfTheWrongTypeIsRefusedAndNothingIsEnqueued) {
  std::vector<EnqueueItem> items = {{QueryValue("SELECT gen_random_uuid()::text"), "{}", {}},
                                    {"not-a-uuid", "{}", {}}};
  try {
    EnqueueItems(conninfo(), "orders", items, "uuid");
    FAIL() << "a bad uuid was enqueued";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kDataError);
    EXPECT_STREQ(e.what(), "1 key (text) is not a value of the key column (uuid): 'not-a-uuid'");
  }
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 0);
}

}  // namespace
}  // namespace coexist::batch
