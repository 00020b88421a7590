// Items that span several rows (operation.keys: many): an order's products,
// each item naming four of twenty uuid-keyed rows, so that items overlap on
// keys. An item is one unit under every policy: all its rows change, or
// none; it waits, defers or forces as a whole; items sharing a key are
// applied one at a time in item_id order; and the batch, which takes row
// locks in key order, never deadlocks an online writer that does the same.

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <thread>

#include "batch/enqueue.h"
#include "batch/runner.h"
#include "common/error.h"
#include "config/config.h"
#include "db/connection.h"
#include "schema/events.h"
#include "tests/support/database_test.h"

namespace coexist::batch {
namespace {

constexpr int kProducts = 20;
constexpr int kItems = 60;

const char* const kPolicies[] = {
    "  name: skip_locked\n",
    "  name: online_priority\n  max_wait: 2s\n",
    "  name: batch_priority\n",
    "  name: status_partition\n",
};

// The invariant of every test here: each product's stock is its start
// (1000) less the quantities of the done items naming it and of the online
// decrements logged for it. A lost, doubled or partial update breaks it.
constexpr const char* kStockMismatches = R"sql(
  SELECT count(*) FROM app.products p
   WHERE p.stock <> 1000
         - coalesce((SELECT sum((q.payload->>'qty')::int) FROM coexist.items q
                      WHERE q.state = 'done'
                        AND p.id::text = ANY (coexist.item_keys(q.record_key, q.record_keys))), 0)
         + (SELECT coalesce(sum(o.delta), 0) FROM public.online_log o
             WHERE o.id = p.id::text))sql";

// Online users while a run works: `threads` of them, each transaction
// changing `rows` random rows of `table` by `delta` (one statement), having
// locked them in key order first, and logging each change in
// public.online_log (row key as text, delta). Errors are counted by kind,
// never swallowed.
class OnlineWriters {
 public:
  OnlineWriters(std::function<std::unique_ptr<pqxx::connection>()> connect, std::string table,
                std::string column, std::vector<std::string> keys, std::string key_type, int rows,
                long long delta, int threads = 3)
      : keys_(std::move(keys)) {
    for (int w = 0; w < threads; ++w) {
      threads_.emplace_back([=, this] {
        auto conn = connect();
        std::mt19937 random(static_cast<unsigned>(w + 11));
        while (!stop_) {
          std::string picked = "{";
          for (int k = 0; k < rows; ++k) picked += (k ? "," : "") + keys_[random() % keys_.size()];
          picked += "}";
          try {
            pqxx::work tx(*conn);
            tx.exec_params("SELECT 1 FROM " + table + " WHERE id = ANY ($1::" + key_type +
                               "[]) ORDER BY id FOR UPDATE",
                           picked);
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            tx.exec_params(
                "WITH u AS (UPDATE " + table + " SET " + column + " = " + column +
                    " + $2 WHERE id = ANY ($1::" + key_type +
                    "[]) RETURNING id) INSERT INTO public.online_log SELECT id::text, $2 "
                    "FROM u",
                picked, delta);
            tx.commit();
            ++committed_;
          } catch (const pqxx::deadlock_detected&) {
            ++deadlocks_;
          } catch (const std::exception&) {
            ++errors_;
          }
        }
      });
    }
  }
  ~OnlineWriters() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // No writer deadlocked or failed, and some committed.
  void ExpectUnharmed() const {
    EXPECT_EQ(deadlocks_, 0);
    EXPECT_EQ(errors_, 0);
    EXPECT_GT(committed_, 0);
  }

 private:
  std::vector<std::string> keys_;
  std::atomic<bool> stop_{false};
  std::atomic<long long> committed_{0}, deadlocks_{0}, errors_{0};
  std::vector<std::thread> threads_;
};

// A database with public.online_log, where OnlineWriters log.
class OnlineLogTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE public.online_log (id text NOT NULL, delta bigint NOT NULL)");
  }
  std::function<std::unique_ptr<pqxx::connection>()> Connector() {
    return [this] { return Connect("online user"); };
  }
  std::vector<std::string> Column(const std::string& sql) {
    std::vector<std::string> out;
    auto conn = Connect();
    pqxx::read_transaction tx(*conn);
    for (const auto& row : tx.exec(sql)) out.push_back(row[0].as<std::string>());
    return out;
  }
  // Runs `config` until nothing is queued or deferred (what a run deferred
  // goes in a later one), at most `runs` times; the runs' counts summed.
  RunCounts RunUntilDrained(const config::Config& config, int runs = 5) {
    RunCounts total;
    for (int run = 0; run < runs && Count("SELECT count(*) FROM coexist.items WHERE state IN "
                                          "('queued', 'deferred')") > 0;
         ++run) {
      QueryValue("UPDATE coexist.queue SET not_before = now() WHERE state = 'deferred'");
      auto summary = batch::Run(conninfo(), config);
      total.done += summary.counts.done;
      total.dead += summary.counts.dead;
      total.deferred += summary.counts.deferred;
    }
    return total;
  }
};

class SeveralKeysTest : public OnlineLogTest {
 protected:
  void SetUp() override {
    OnlineLogTest::SetUp();
    QueryValue(
        "CREATE SCHEMA app;"
        "CREATE TABLE app.products (id uuid PRIMARY KEY, stock integer NOT NULL DEFAULT 1000"
        "  CHECK (stock >= 0), version bigint NOT NULL DEFAULT 0,"
        "  holder text NOT NULL DEFAULT 'online');"
        "INSERT INTO app.products (id) SELECT md5(g::text)::uuid FROM generate_series(1, 20) g;"
        "CREATE TABLE app.applied (uid text NOT NULL, rows integer NOT NULL)");
  }

  // The product keys as the table spells them (lower-case uuids), by g.
  std::vector<std::string> Products() {
    std::vector<std::string> keys;
    auto conn = Connect();
    pqxx::read_transaction tx(*conn);
    for (const auto& row :
         tx.exec("SELECT md5(g::text)::uuid::text FROM generate_series(1, 20) g ORDER BY g")) {
      keys.push_back(row[0].as<std::string>());
    }
    return keys;
  }

  // kItems items of 4 distinct products each (upper case, unsorted: the
  // queue sorts and canonicalises them), quantity 1..3.
  std::vector<EnqueueItem> Orders(unsigned seed = 7) {
    auto products = Products();
    std::mt19937 random(seed);
    std::vector<EnqueueItem> items;
    for (int uid = 1; uid <= kItems; ++uid) {
      EnqueueItem item;
      std::vector<int> picked;
      while (picked.size() < 4) {
        int p = static_cast<int>(random() % kProducts);
        if (std::find(picked.begin(), picked.end(), p) == picked.end()) picked.push_back(p);
      }
      for (int p : picked) {
        std::string key = products[static_cast<size_t>(p)];
        if (uid % 2 == 0) std::transform(key.begin(), key.end(), key.begin(), ::toupper);
        item.keys.push_back(key);
      }
      item.payload = "{\"qty\": " + std::to_string(uid % 3 + 1) + ", \"uid\": \"u" +
                     std::to_string(uid) + "\"}";
      items.push_back(std::move(item));
    }
    return items;
  }

  static config::Config JobConfig(const std::string& policy, bool chunk_sql = false,
                                  int workers = 2) {
    std::string operation =
        chunk_sql
            // One array literal of keys per item: unnest the items, then
            // each item's keys.
            ? "  chunk_sql: |\n"
              "    WITH i AS (SELECT k::uuid[] AS keys, qty::int AS qty, uid\n"
              "                 FROM unnest($1::text[], $2::text[], $3::text[]) AS i(k, qty, "
              "uid)),\n"
              "    u AS (UPDATE app.products p SET stock = p.stock - x.qty\n"
              "            FROM (SELECT unnest(keys) AS id, qty FROM i) AS x\n"
              "           WHERE p.id = x.id RETURNING x.id)\n"
              "    INSERT INTO app.applied SELECT uid, cardinality(keys) FROM i\n"
            : "  item_sql: |\n"
              "    WITH u AS (UPDATE app.products SET stock = stock - $2::int\n"
              "                WHERE id = ANY ($1) RETURNING 1)\n"
              "    INSERT INTO app.applied SELECT $3, count(*) FROM u\n";
    return config::LoadString(
        "target: {table: app.products, key_column: id, owner_column: holder}\n"
        "batch: {job: orders, chunk_size: 10, workers: " +
            std::to_string(workers) +
            ", max_attempts: 1}\n"
            "policy:\n" +
            policy +
            "operation:\n"
            "  keys: many\n" +
            operation + "  params: [qty, uid]\n",
        "orders.yaml");
  }

  // Every applied item changed all its rows, each exactly once.
  void ExpectWholeItemsAppliedOnce() {
    EXPECT_EQ(Count(kStockMismatches), 0) << "a lost, doubled or partial update";
    EXPECT_EQ(Count("SELECT count(*) FROM app.applied"), Count("SELECT count(DISTINCT uid) FROM "
                                                               "app.applied"));
    EXPECT_EQ(Count("SELECT count(*) FROM app.applied WHERE rows <> 4"), 0);
    EXPECT_EQ(Count("SELECT count(*) FROM app.applied"),
              Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"));
  }
};

TEST_F(SeveralKeysTest, EnqueueStoresEveryKeyCanonicalDistinctAndInKeyOrder) {
  auto products = Products();
  EnqueueItem item;
  item.keys = {products[3], products[1], products[3], "{" + products[2] + "}"};
  std::transform(item.keys[0].begin(), item.keys[0].end(), item.keys[0].begin(), ::toupper);
  EnqueueItems(conninfo(), "orders", {item}, "uuid");
  EXPECT_EQ(QueryValue("SELECT record_keys = ARRAY(SELECT DISTINCT x::uuid FROM unnest(ARRAY['" +
                       products[1] + "', '" + products[2] + "', '" + products[3] +
                       "']) x ORDER BY 1)::text[] FROM coexist.items"),
            "t");
  EXPECT_EQ(QueryValue("SELECT record_key = record_keys[1] FROM coexist.items"), "t");

  // One distinct key: an item of one record, as if given with "key".
  EnqueueItem one;
  one.keys = {products[5], products[5]};
  EnqueueItems(conninfo(), "orders", {one}, "uuid");
  EXPECT_EQ(QueryValue("SELECT record_keys IS NULL FROM coexist.items WHERE record_key = '" +
                       products[5] + "'"),
            "t");

  // Not a uuid: nothing is enqueued.
  EnqueueItem bad;
  bad.keys = {products[6], "not-a-uuid"};
  EXPECT_THROW(EnqueueItems(conninfo(), "orders", {bad}, "uuid"), Error);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 2);
}

TEST_F(SeveralKeysTest, JsonLinesTakeKeysArrays) {
  std::istringstream in(
      "{\"keys\": [3, 1, 2], \"payload\": {\"qty\": 1}}\n"
      "{\"key\": 4}\n");
  auto items = ParseJsonLines(in, "orders.jsonl");
  ASSERT_EQ(items.size(), 2U);
  EXPECT_EQ(items[0].keys, (std::vector<std::string>{"3", "1", "2"}));
  EXPECT_EQ(items[1].key, "4");

  auto error_of = [](const std::string& line) {
    std::istringstream bad(line);
    try {
      ParseJsonLines(bad, "orders.jsonl");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("{\"keys\": []}"),
            "orders.jsonl:1: \"keys\" must be a non-empty array of keys");
  EXPECT_EQ(error_of("{\"key\": 1, \"keys\": [2]}"),
            "orders.jsonl:1: give \"key\" or \"keys\", not both");
  EXPECT_EQ(error_of("{\"keys\": [1, \"x\"]}"), "orders.jsonl:1: \"key\" must be an integer");
}

TEST_F(SeveralKeysTest, CsvTakesKeysAsArrayLiterals) {
  std::istringstream in(
      "\"{3,1,2}\",\"{\"\"qty\"\": 1}\"\n"
      "4\n");
  auto items = ParseCsv(in, "orders.csv");
  ASSERT_EQ(items.size(), 2U);
  EXPECT_EQ(items[0].keys, (std::vector<std::string>{"3", "1", "2"}));
  EXPECT_EQ(items[0].payload, "{\"qty\":1}");
  EXPECT_TRUE(items[1].keys.empty());
  EXPECT_EQ(items[1].key, "4");
  // Text keys: a uuid in braces is one key; an array of them several.
  std::istringstream text("{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11}\n\"{a,b}\"\n");
  auto texts = ParseCsv(text, "orders.csv", /*integer_keys=*/false);
  EXPECT_EQ(texts[0].keys, (std::vector<std::string>{"A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"}));
  EXPECT_EQ(texts[1].keys, (std::vector<std::string>{"a", "b"}));

  auto error_of = [](const std::string& line) {
    std::istringstream bad(line);
    try {
      ParseCsv(bad, "orders.csv");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("{}\n"), "orders.csv:1: the array of keys is empty");
  EXPECT_EQ(error_of("\"{1,x}\"\n"), "orders.csv:1: 'x' is not an integer key");
}

TEST_F(SeveralKeysTest, SelectWithAnArrayColumnEnqueuesItemsOfSeveralKeys) {
  auto result =
      EnqueueSelect(conninfo(), "orders",
                    "SELECT ARRAY(SELECT id FROM app.products ORDER BY id DESC LIMIT 2 OFFSET g), "
                    "jsonb_build_object('qty', 1) FROM generate_series(0, 4) g",
                    "uuid");
  EXPECT_EQ(result.added, 5);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE cardinality(record_keys) = 2 "
                  "AND record_keys[1]::uuid < record_keys[2]::uuid"),
            5);
  // An item following one that shares its second key waits for it.
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE follows_pending"), 4);
  EXPECT_THROW(EnqueueSelect(conninfo(), "orders", "SELECT '{}'::uuid[]", "uuid"), Error);
}

TEST_F(SeveralKeysTest, OneKeyItemAfterASeveralKeyItemSharingANonLeadKeyFollowsIt) {
  auto products = Products();
  EnqueueItem several;
  several.keys = {products[0], products[1]};
  EnqueueItems(conninfo(), "orders", {several}, "uuid");
  std::string later = QueryValue("SELECT record_keys[2] FROM coexist.items");
  EnqueueItems(conninfo(), "orders", {{later, "{}", std::nullopt}}, "uuid");
  EXPECT_EQ(QueryValue("SELECT follows_pending FROM coexist.items WHERE record_keys IS NULL"), "t");
}

// A statement of many items is planned on statistics that count them
// (0028): mark_followers' probes planned for a queue with nothing pending
// read every earlier pending item of the job per probe (batch_bench: 25,000
// items of 4 records at 181 items/s instead of 22,000). The statistics are
// read inside the enqueue's own transaction, before it commits, by the
// batch's role of docs/operations.md, which does not own the queue; a
// second enqueue waiting to analyze would wait for the first's commit, so
// it does not wait.
TEST_F(SeveralKeysTest, ALargeEnqueueIsPlannedOnStatisticsThatCountItsItems) {
  QueryValue(
      "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'coexist_producer') THEN "
      "CREATE ROLE coexist_producer LOGIN; END IF; END$$;"
      "GRANT USAGE ON SCHEMA coexist TO coexist_producer;"
      "GRANT SELECT, INSERT, UPDATE ON coexist.queue TO coexist_producer;"
      "GRANT USAGE ON ALL SEQUENCES IN SCHEMA coexist TO coexist_producer;"
      "ANALYZE coexist.queue");  // as after a run: nothing pending
  const std::string pending_in_statistics =
      "SELECT reltuples FROM pg_class WHERE oid = 'coexist.queue_claimable'::regclass";
  // Items of two keys; each shares its first key with the one before.
  auto enqueue = [](pqxx::transaction_base& tx, const std::string& job, int items) {
    tx.exec(
        "INSERT INTO coexist.queue (job, record_key, record_keys) "
        "SELECT " +
        tx.quote(job) +
        ", ks[1], ks FROM (SELECT ARRAY[lpad(g::text, 5, '0'), lpad((g + 1)::text, 5, '0')] AS ks"
        "                    FROM generate_series(1, " +
        std::to_string(items) + ") g) s");
  };
  auto producer = db::Connect(conninfo() + " user=coexist_producer", "producer");
  pqxx::work tx(*producer);
  enqueue(tx, "first", 2000);
  EXPECT_GE(std::stod(tx.exec1(pending_in_statistics)[0].c_str()), 2000);
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM coexist.queue WHERE follows_pending")[0].as<int>(),
            1999);

  // Another producer, adding more than the statistics count, while the
  // first holds ANALYZE's lock: it enqueues without waiting for it (its
  // analyze is skipped), and marks its followers.
  auto second = db::Connect(conninfo() + " user=coexist_producer", "producer 2");
  pqxx::work tx2(*second);
  tx2.exec("SET LOCAL lock_timeout = '2s'");
  enqueue(tx2, "second", 5000);
  EXPECT_EQ(tx2.exec1("SELECT count(*) FROM coexist.queue WHERE job = 'second' AND "
                      "follows_pending")[0]
                .as<int>(),
            4999);
  tx2.commit();
  tx.commit();
}

class SeveralKeysPolicyTest : public SeveralKeysTest,
                              public ::testing::WithParamInterface<std::tuple<const char*, bool>> {
};

TEST_P(SeveralKeysPolicyTest, OverlappingItemsAreEachAppliedWholeAndOnce) {
  EnqueueItems(conninfo(), "orders", Orders(), "uuid");
  auto [policy, chunk_sql] = GetParam();
  auto summary = batch::Run(conninfo(), JobConfig(policy, chunk_sql));
  EXPECT_EQ(summary.counts.done, kItems);
  EXPECT_EQ(summary.counts.dead, 0);
  ExpectWholeItemsAppliedOnce();
  EXPECT_EQ(Count("SELECT count(*) FROM app.products WHERE holder <> 'online'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.takeovers"), 0);
}

INSTANTIATE_TEST_SUITE_P(Policies, SeveralKeysPolicyTest,
                         ::testing::Combine(::testing::ValuesIn(kPolicies), ::testing::Bool()));

TEST_F(SeveralKeysTest, AFailingRowFailsTheWholeItemAndNoneOfItsRowsChange) {
  auto items = Orders();
  // Item u1 would take one of its products below zero (CHECK stock >= 0).
  items[0].payload = "{\"qty\": 5000, \"uid\": \"u1\"}";
  EnqueueItems(conninfo(), "orders", items, "uuid");
  auto summary = batch::Run(conninfo(), JobConfig(kPolicies[0]));
  EXPECT_EQ(summary.counts.dead, 1);
  EXPECT_EQ(QueryValue("SELECT state FROM coexist.items WHERE payload->>'uid' = 'u1'"), "dead");
  ExpectWholeItemsAppliedOnce();  // u1 changed none of its four rows
  EXPECT_EQ(Count("SELECT count(*) FROM app.applied WHERE uid = 'u1'"), 0);
  // Its item_dead event names all four records; `events --record` finds it
  // by a key that is not the lead one, spelled in upper case.
  EXPECT_EQ(QueryValue("SELECT e.details->'keys' = to_jsonb(q.record_keys) FROM coexist.events e"
                       " JOIN coexist.items q USING (item_id) WHERE e.kind = 'item_dead'"),
            "t");
  auto conn = Connect();
  db::EventFilter filter;
  filter.kind = EventKind::kItemDead;
  filter.record_key =
      QueryValue("SELECT upper(record_keys[3]) FROM coexist.items WHERE payload->>'uid' = 'u1'");
  auto found = db::ListEvents(*conn, filter);
  ASSERT_EQ(found.size(), 1U);
  EXPECT_EQ(std::to_string(*found[0].item_id),
            QueryValue("SELECT item_id FROM coexist.items WHERE payload->>'uid' = 'u1'"));
}

TEST_F(SeveralKeysTest, ARowLockedOnlineDefersTheWholeItemAndItsFollowersWait) {
  auto products = Products();
  EnqueueItems(conninfo(), "orders", Orders(), "uuid");
  auto online = Connect("coexist-online test");
  pqxx::work hold(*online);
  hold.exec("SELECT 1 FROM app.products WHERE id = '" + products[0] + "' FOR UPDATE");
  auto summary = batch::Run(conninfo(), JobConfig(kPolicies[0]));
  long long naming = Count("SELECT count(*) FROM coexist.items WHERE '" + products[0] +
                           "' = ANY (coexist.item_keys(record_key, record_keys))");
  ASSERT_GT(naming, 0);
  // The first item naming the held row is deferred; the later ones wait
  // behind it (they share its key), none of them applied in part.
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done' AND '" + products[0] +
                  "' = ANY (coexist.item_keys(record_key, record_keys))"),
            0);
  EXPECT_GE(summary.counts.deferred, 1);
  ExpectWholeItemsAppliedOnce();
  hold.abort();

  // Released: the next run applies the rest.
  QueryValue("UPDATE coexist.queue SET not_before = now() WHERE state = 'deferred'");
  batch::Run(conninfo(), JobConfig(kPolicies[0]));
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state <> 'done'"), 0);
  ExpectWholeItemsAppliedOnce();
}

TEST_F(SeveralKeysTest, AnEditLockOnOneRowHoldsTheWholeItemOrIsRevokedWithTheOthers) {
  auto products = Products();
  EnqueueItems(conninfo(), "orders", Orders(), "uuid");
  QueryValue("SELECT coexist.acquire_edit_lock('app.products', '" + products[0] +
             "', 'alice', '1 hour')");
  QueryValue("SELECT coexist.acquire_edit_lock('app.products', '" + products[1] +
             "', 'bob', '1 hour')");
  batch::Run(conninfo(), JobConfig(kPolicies[0]));  // skip_locked defers
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done' AND ('" + products[0] +
                  "' = ANY (coexist.item_keys(record_key, record_keys)) OR '" + products[1] +
                  "' = ANY (coexist.item_keys(record_key, record_keys)))"),
            0);
  ExpectWholeItemsAppliedOnce();

  QueryValue("UPDATE coexist.queue SET not_before = now() WHERE state = 'deferred'");
  auto summary = batch::Run(conninfo(), JobConfig(kPolicies[2]));  // batch_priority revokes
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state <> 'done'"), 0);
  EXPECT_EQ(summary.counts.revoked, 2);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.edit_locks"), 0);
  ExpectWholeItemsAppliedOnce();
}

TEST_F(SeveralKeysTest, AnItemOfSeveralKeysUnderKeysOneFailsWithTheFix) {
  EnqueueItems(conninfo(), "orders", Orders(), "uuid");
  auto config = JobConfig(kPolicies[0]);
  config.operation.keys = config::ItemKeys::kOne;
  config.operation.item_sql = "UPDATE app.products SET stock = stock - $2::int WHERE id = $1";
  config.operation.params = {"qty"};
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.done, 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'dead' AND last_error LIKE "
                  "'the item names 4 records but operation.keys is one: set operation.keys: "
                  "many%'"),
            Count("SELECT count(*) FROM coexist.items WHERE state = 'dead'"));
  EXPECT_EQ(Count("SELECT count(*) FROM app.products WHERE stock <> 1000"), 0);
}

// Online writers that lock their rows in key order (SELECT ... ORDER BY id
// FOR UPDATE) while a run that waits for rows works overlapping items: no
// deadlock on either side, no lost update.
TEST_F(SeveralKeysTest, OnlineWritersLockingInKeyOrderNeverDeadlockWithTheBatch) {
  EnqueueItems(conninfo(), "orders", Orders(11), "uuid");
  OnlineWriters online(Connector(), "app.products", "stock", Products(), "uuid", 3, -1, 4);
  RunUntilDrained(JobConfig(kPolicies[1], false, 3));  // online_priority
  online.Stop();
  online.ExpectUnharmed();
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state <> 'done'"), 0);
  ExpectWholeItemsAppliedOnce();
}

// The deadlock the test above can only catch by chance, made certain: an
// online transaction holds an item's second row and then wants its fourth.
// While the batch waits for the second, it must not hold the fourth (it
// took the free rows first, in one statement, and would otherwise sit on
// them while it waits): the online transaction gets it at once.
TEST_F(SeveralKeysTest, WhileTheBatchWaitsForARowItHoldsNoneThatSortsAfterIt) {
  auto rows = Products();
  std::sort(rows.begin(), rows.end());  // a uuid's order is its lower-case text's
  EnqueueItem item;
  item.keys = {rows[3], rows[0], rows[2], rows[1]};
  item.payload = R"({"qty": 2, "uid": "u1"})";
  EnqueueItems(conninfo(), "orders", {item}, "uuid");

  auto online = Connect("coexist-online test");
  pqxx::work tx(*online);
  tx.exec("SELECT 1 FROM app.products WHERE id = '" + rows[1] + "' FOR UPDATE");
  RunCounts counts;
  std::thread batch([&] {
    counts = batch::Run(conninfo(), JobConfig("  name: online_priority\n  max_wait: 30s\n"
                                              "  lock_wait_initial: 5s\n  lock_wait_max: 5s\n",
                                              false, 1))
                 .counts;
  });
  auto batch_waits = [&] {
    return Count(
               "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
               "datname = current_database()") > 0;
  };
  for (int i = 0; i < 500 && !batch_waits(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(batch_waits()) << "the batch should wait for the second row";
  // The batch may hold the first row (before the one it waits for), not
  // the fourth: were it holding it, this would fail after 200 ms.
  tx.exec("SET LOCAL lock_timeout = '200ms'");
  bool got_fourth = true;
  try {
    tx.exec("SELECT 1 FROM app.products WHERE id = '" + rows[3] + "' FOR UPDATE");
  } catch (const pqxx::sql_error& e) {
    got_fourth = false;
    ADD_FAILURE() << "the online transaction could not have the fourth row: " << e.what();
  }
  if (got_fourth) {
    tx.exec("WITH u AS (UPDATE app.products SET stock = stock - 1 WHERE id IN ('" + rows[1] +
            "', '" + rows[3] +
            "') RETURNING id) INSERT INTO public.online_log SELECT id::text, -1 FROM u");
    tx.commit();
  } else {
    tx.abort();
  }
  batch.join();
  EXPECT_EQ(counts.done, 1);
  ExpectWholeItemsAppliedOnce();
}

// --- the shipped examples, end to end under concurrent online edits -------

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(COEXIST_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class ExampleJobTest : public OnlineLogTest {};

TEST_F(ExampleJobTest, OrderSettlementSettlesEveryOrderOnceWithAllItsLines) {
  QueryValue(ReadSource("config/examples/order-settlement.sql"));
  QueryValue(
      "INSERT INTO shop.products (id, name, stock)"
      "  SELECT md5('p' || g)::uuid, 'product ' || g, 100000 FROM generate_series(1, 30) g;"
      "INSERT INTO shop.orders (id) SELECT md5('o' || g)::uuid FROM generate_series(1, 300) g;"
      // 2 to 5 lines per order, of distinct products.
      "INSERT INTO shop.order_lines (order_id, product_id, qty)"
      "  SELECT md5('o' || g)::uuid, md5('p' || (1 + (g * 7 + l * 11) % 30))::uuid, 1 + (g + l) % 4"
      "    FROM generate_series(1, 300) g, generate_series(1, 2 + g % 4) l");
  auto config =
      config::LoadFile(std::string(COEXIST_SOURCE_DIR) + "/config/examples/order-settlement.yaml");
  config.batch.chunk_size = 20;  // many chunks while the online users work
  auto enqueued = EnqueueSelect(conninfo(), config.batch.job, config.enqueue.select, "uuid");
  EXPECT_EQ(enqueued.added, 300);
  EXPECT_EQ(EnqueueSelect(conninfo(), config.batch.job, config.enqueue.select, "uuid").added, 0)
      << "the order is the idempotency key";

  OnlineWriters online(Connector(), "shop.products", "stock",
                       Column("SELECT id::text FROM shop.products"), "uuid", 3, 1);
  auto counts = RunUntilDrained(config);
  online.Stop();

  EXPECT_EQ(counts.done, 300);
  EXPECT_EQ(Count("SELECT count(*) FROM shop.orders WHERE status <> 'settled'"), 0);
  // Each product: its start, less the lines of the settled orders (each
  // once), plus what online users added. A lost, doubled or partial
  // settlement breaks it.
  EXPECT_EQ(Count("SELECT count(*) FROM shop.products p WHERE p.stock <> 100000"
                  " - (SELECT coalesce(sum(l.qty), 0) FROM shop.order_lines l"
                  "     WHERE l.product_id = p.id)"
                  " + (SELECT coalesce(sum(o.delta), 0) FROM public.online_log o"
                  "     WHERE o.id = p.id::text)"),
            0);
  online.ExpectUnharmed();
  // targets: the orders got the version trigger (every settlement bumped
  // it) and the guard.
  EXPECT_EQ(Count("SELECT count(*) FROM shop.orders WHERE version = 0"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'shop.orders'::regclass"
                  " AND tgname LIKE 'coexist%'"),
            2);
}

TEST_F(ExampleJobTest, LedgerPostsEveryTransferWholeAndKeepsTheMoney) {
  QueryValue(ReadSource("config/examples/ledger.sql"));
  QueryValue(
      "INSERT INTO ledger.accounts (id, balance)"
      "  SELECT 'acct-' || g, 100000 FROM generate_series(1, 40) g;"
      "INSERT INTO ledger.transfers (id, from_account, to_account, amount)"
      "  SELECT g, 'acct-' || (1 + g % 40), 'acct-' || (1 + (g * 7 + 3) % 40), 1 + g % 50"
      "    FROM generate_series(1, 600) g WHERE g % 40 <> (g * 7 + 3) % 40;"
      // One transfer that would overdraw its account: it must fail whole.
      "INSERT INTO ledger.transfers VALUES (100000, 'acct-1', 'acct-2', 10000000)");
  long long transfers = Count("SELECT count(*) FROM ledger.transfers");
  auto config = config::LoadFile(std::string(COEXIST_SOURCE_DIR) + "/config/examples/ledger.yaml");
  config.batch.chunk_size = 25;
  config.batch.max_attempts = 1;
  EXPECT_EQ(EnqueueSelect(conninfo(), config.batch.job, config.enqueue.select, "text").added,
            transfers);

  // Online deposits of one, two accounts at a time, locked in key order.
  OnlineWriters online(Connector(), "ledger.accounts", "balance",
                       Column("SELECT id FROM ledger.accounts"), "text", 2, 1);
  auto counts = RunUntilDrained(config);
  online.Stop();

  EXPECT_EQ(counts.done, transfers - 1);
  EXPECT_EQ(counts.dead, 1);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger.transfers WHERE posted_at IS NULL"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger.entries WHERE transfer_id = 100000"), 0);
  // Money is neither made nor lost: the batch's entries sum to zero, and
  // every balance is its start plus its entries plus online deposits.
  EXPECT_EQ(Count("SELECT coalesce(sum(amount), 0) FROM ledger.entries"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM (SELECT transfer_id FROM ledger.entries GROUP BY 1"
                  " HAVING count(*) <> 2) x"),
            0);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger.accounts a WHERE a.balance <> 100000"
                  " + (SELECT coalesce(sum(e.amount), 0) FROM ledger.entries e"
                  "     WHERE e.account = a.id)"
                  " + (SELECT coalesce(sum(o.delta), 0) FROM public.online_log o"
                  "     WHERE o.id = a.id)"),
            0);
  online.ExpectUnharmed();
}

}  // namespace
}  // namespace coexist::batch
