// Several queued items of one target key, in every documented operation
// style and under every policy: each item is one application. A set-based
// statement (`UPDATE ... FROM unnest(...)`, `WHERE id = ANY($1)`) touches a
// row once however often its key repeats in the arrays, so a chunk that
// carried two items of one key into one statement would apply one and mark
// both done. The LEDGER the operation writes in the same statement, one row
// per item with the item's own uid, is what "applied once" is checked on.

#include <gtest/gtest.h>

#include <map>

#include "batch/enqueue.h"
#include "batch/runner.h"
#include "config/config.h"
#include "schema/queue_store_ops.h"
#include "tests/support/database_test.h"

namespace coexist::batch {
namespace {

struct Style {
  const char* name;
  const char* operation;  // the `operation:` section
  bool adds_qty;          // true: stock grows by qty; false: by 1 per item
};

// The styles of docs/batch.md, each also writing one ledger row per item.
const Style kStyles[] = {
    {"unnest",
     "operation:\n"
     "  chunk_sql: |\n"
     "    WITH u AS (UPDATE products p SET stock = p.stock + u.qty\n"
     "                 FROM unnest($1::bigint[], $2::integer[]) AS u(id, qty)\n"
     "                WHERE p.id = u.id)\n"
     "    INSERT INTO ledger (key, uid) SELECT * FROM unnest($1::bigint[], $3::text[])\n"
     "  params: [qty, uid]\n",
     true},
    {"any",
     "operation:\n"
     "  chunk_sql: |\n"
     "    WITH u AS (UPDATE products SET stock = stock + 1 WHERE id = ANY ($1::bigint[]))\n"
     "    INSERT INTO ledger (key, uid) SELECT * FROM unnest($1::bigint[], $2::text[])\n"
     "  params: [uid]\n",
     false},
    {"item_sql",
     "operation:\n"
     "  item_sql: |\n"
     "    WITH u AS (UPDATE products SET stock = stock + $2::integer WHERE id = $1)\n"
     "    INSERT INTO ledger (key, uid) VALUES ($1, $3)\n"
     "  params: [qty, uid]\n",
     true},
};

const char* const kPolicies[] = {
    "  name: skip_locked\n",
    "  name: online_priority\n  max_wait: 1s\n",
    "  name: batch_priority\n",
    "  name: status_partition\n",
    // start == end: a 24-hour window, active whenever the test runs.
    "  name: time_window\n  mode: allow\n  drain_margin: 0s\n  windows:\n"
    "    - {time_zone: UTC, start: \"00:00\", end: \"00:00\"}\n",
};

struct Case {
  int style;
  int policy;
  int workers;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string policy = kPolicies[info.param.policy];
  policy = policy.substr(policy.find(": ") + 2);
  policy = policy.substr(0, policy.find('\n'));
  return std::string(kStyles[info.param.style].name) + "_" + policy + "_" +
         std::to_string(info.param.workers) + "workers";
}

class SameKeyTest : public testing::DatabaseTest, public ::testing::WithParamInterface<Case> {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE ledger (key bigint NOT NULL, uid text NOT NULL)");
  }
};

TEST_P(SameKeyTest, EveryItemOfARepeatedKeyIsAppliedOnceInItsOwnStatement) {
  const Style& style = kStyles[GetParam().style];
  // Keys 1..5 three times each, 6..20 once; all in one claim (chunk 100).
  std::vector<EnqueueItem> items;
  std::map<long long, long long> expected_growth;
  int uid = 0;
  for (int round = 0; round < 3; ++round) {
    for (long long key = 1; key <= 20; ++key) {
      if (round > 0 && key > 5) continue;
      int qty = 3 + round + static_cast<int>(key);
      ++uid;
      items.push_back(
          {std::to_string(key),
           "{\"qty\": " + std::to_string(qty) + ", \"uid\": \"u" + std::to_string(uid) + "\"}",
           std::nullopt});
      expected_growth[key] += style.adds_qty ? qty : 1;
    }
  }
  EnqueueItems(conninfo(), "j", items);
  auto config = config::LoadString(
      "target: {owner_column: owner}\n"
      "batch: {job: j, chunk_size: 100, workers: " +
          std::to_string(GetParam().workers) +
          ", max_attempts: 2}\n"
          "policy:\n" +
          std::string(kPolicies[GetParam().policy]) + style.operation,
      "test.yaml");
  auto summary = batch::Run(conninfo(), config);

  EXPECT_EQ(summary.counts.done, static_cast<long long>(items.size()));
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state <> 'done'"), 0);
  // One ledger row per item: none applied twice, none done but not applied.
  EXPECT_EQ(Count("SELECT count(DISTINCT uid) FROM ledger"), static_cast<long long>(items.size()));
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), static_cast<long long>(items.size()));
  for (const auto& [key, growth] : expected_growth) {
    EXPECT_EQ(Count("SELECT stock - 1000 FROM products WHERE id = " + std::to_string(key)), growth)
        << "key " << key;
  }
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.takeovers"), 0);
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (int s = 0; s < static_cast<int>(std::size(kStyles)); ++s) {
    for (int p = 0; p < static_cast<int>(std::size(kPolicies)); ++p) {
      cases.push_back({s, p, 1});
    }
    cases.push_back({s, 0, 4});  // siblings share keys too
  }
  cases.push_back({0, 3, 4});  // status_partition's two transactions, four workers
  return cases;
}

INSTANTIATE_TEST_SUITE_P(StylesAndPolicies, SameKeyTest, ::testing::ValuesIn(AllCases()), CaseName);

// The claim's key order: an item waits while an earlier item of its key is
// still pending, deferred included (an online user holds the row). Checked
// for items enqueued together, and for an item enqueued while the earlier
// one was dead and then put back by `queue retry --dead`.
class KeyOrderTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE ledger (key bigint NOT NULL, uid text NOT NULL)");
  }
  // Runs the job once while an online transaction holds record 7's row.
  RunSummary RunWhileRowSevenIsHeld() {
    auto online = Connect("coexist-online");
    pqxx::work held(*online);
    held.exec("SELECT 1 FROM products WHERE id = 7 FOR UPDATE");
    auto summary = batch::Run(conninfo(), Config());
    held.abort();
    return summary;
  }
  config::Config Config() {
    return config::LoadString(std::string("batch: {job: j, chunk_size: 50}\npolicy:\n") +
                                  kPolicies[0] + kStyles[0].operation,
                              "test.yaml");
  }
  std::string States() {
    return QueryValue(
        "SELECT string_agg(payload->>'uid' || ':' || state, ',' ORDER BY item_id) FROM "
        "coexist.items WHERE record_key = '7'");
  }
  static EnqueueItem Item(const char* uid) {
    return {"7", std::string("{\"qty\": 1, \"uid\": \"") + uid + "\"}", std::nullopt};
  }
};

TEST_F(KeyOrderTest, ALaterItemWaitsWhileAnEarlierOneOfItsKeyIsDeferred) {
  EnqueueItems(conninfo(), "j", {Item("a"), Item("b")});
  auto summary = RunWhileRowSevenIsHeld();
  EXPECT_EQ(summary.counts.deferred, 1);
  EXPECT_EQ(States(), "a:deferred,b:queued") << "b went before a";
  QueryValue("UPDATE coexist.queue SET not_before = now()");
  batch::Run(conninfo(), Config());
  EXPECT_EQ(States(), "a:done,b:done");
  EXPECT_EQ(QueryValue("SELECT string_agg(uid, ',' ORDER BY ctid) FROM ledger"), "a,b");
}

TEST_F(KeyOrderTest, AnItemPutBackByRetryGoesBeforeLaterItemsOfItsKey) {
  EnqueueItems(conninfo(), "j", {Item("a")});
  QueryValue("UPDATE coexist.queue SET state = 'dead', attempts = 5");
  EnqueueItems(conninfo(), "j", {Item("b")});  // a is not pending now
  EXPECT_EQ(db::RetryDeadItems(*Connect("coexist-admin"), "j", "admin:test"), 1);
  RunWhileRowSevenIsHeld();
  EXPECT_EQ(States(), "a:deferred,b:queued") << "b went before the retried a";
}

// The same promise on a table that is not ours, as a user's would be: another
// schema, a hash-partitioned table, its own key, version and owner column
// names, repeated keys, the documented unnest style, four workers. The
// version trigger counts the UPDATEs: a row's version must equal the number
// of its items applied, and its qty their sum.
class ForeignTableTest : public testing::DatabaseTest,
                         public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue(
        "CREATE SCHEMA sales;"
        "CREATE TABLE sales.order_lines (line_id bigint PRIMARY KEY, lock_version bigint NOT NULL "
        "  DEFAULT 0, holder text NOT NULL DEFAULT 'online', shipped integer NOT NULL DEFAULT 0)"
        "  PARTITION BY HASH (line_id);"
        "CREATE TABLE sales.order_lines_0 PARTITION OF sales.order_lines"
        "  FOR VALUES WITH (MODULUS 2, REMAINDER 0);"
        "CREATE TABLE sales.order_lines_1 PARTITION OF sales.order_lines"
        "  FOR VALUES WITH (MODULUS 2, REMAINDER 1);"
        "INSERT INTO sales.order_lines (line_id) SELECT g FROM generate_series(1, 40) g;"
        "CREATE TABLE sales.shipments (line_id bigint NOT NULL, uid text NOT NULL)");
  }
};

TEST_P(ForeignTableTest, RepeatedKeysAreEachAppliedOnce) {
  std::vector<EnqueueItem> items;
  for (int uid = 1; uid <= 120; ++uid) {
    long long key = 1 + (uid * 7) % 25;  // 25 keys, most of them several times
    items.push_back({std::to_string(key),
                     "{\"qty\": " + std::to_string(uid % 5 + 1) + ", \"uid\": \"u" +
                         std::to_string(uid) + "\"}",
                     std::nullopt});
  }
  EnqueueItems(conninfo(), "lines", items);
  auto config = config::LoadString(
      "target: {table: sales.order_lines, key_column: line_id, version_column: lock_version,\n"
      "         owner_column: holder}\n"
      "batch: {job: lines, chunk_size: 30, workers: 4}\n"
      "policy:\n" +
          std::string(GetParam()) +
          "operation:\n"
          "  chunk_sql: |\n"
          "    WITH u AS (UPDATE sales.order_lines l SET shipped = l.shipped + i.qty\n"
          "                 FROM unnest($1::bigint[], $2::integer[]) AS i(id, qty)\n"
          "                WHERE l.line_id = i.id)\n"
          "    INSERT INTO sales.shipments SELECT * FROM unnest($1::bigint[], $3::text[])\n"
          "  params: [qty, uid]\n",
      "lines.yaml");
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.done, 120);
  EXPECT_EQ(Count("SELECT count(DISTINCT uid) FROM sales.shipments"), 120);
  EXPECT_EQ(Count("SELECT count(*) FROM sales.shipments"), 120);
  const std::string per_row =
      "WITH q AS (SELECT record_key, count(*) AS n, sum((payload->>'qty')::int) AS qty "
      "FROM coexist.items GROUP BY record_key) "
      "SELECT count(*) FROM sales.order_lines l LEFT JOIN q ON q.record_key = l.line_id::text "
      "WHERE ";
  EXPECT_EQ(QueryValue(per_row + "l.shipped <> coalesce(q.qty, 0)"), "0")
      << "a row's qty is not the sum of its items' (a lost or doubled update)";
  // A takeover and its hand-back are two more UPDATEs of the row, so under
  // status_partition a row's version counts its items plus pairs.
  const bool takes_over = std::string(GetParam()).find("status_partition") != std::string::npos;
  EXPECT_EQ(QueryValue(per_row + (takes_over ? "(l.lock_version - coalesce(q.n, 0)) % 2 <> 0 "
                                               "OR l.lock_version < coalesce(q.n, 0)"
                                             : "l.lock_version <> coalesce(q.n, 0)")),
            "0")
      << "a row was updated other than by its items" << (takes_over ? " and takeovers" : "");
  EXPECT_EQ(Count("SELECT count(*) FROM sales.order_lines WHERE holder <> 'online'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.takeovers"), 0);
}

INSTANTIATE_TEST_SUITE_P(Policies, ForeignTableTest,
                         ::testing::Values("  name: skip_locked\n", "  name: status_partition\n",
                                           "  name: online_priority\n  max_wait: 1s\n"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           return std::string(param.index == 0   ? "skip_locked"
                                              : param.index == 1 ? "status_partition"
                                                                 : "online_priority");
                         });

}  // namespace
}  // namespace coexist::batch
