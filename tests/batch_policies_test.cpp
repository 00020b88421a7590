// The four policies besides skip_locked, each with real concurrent online
// sessions from test threads: what online sees must be exactly what the
// policy promises, no online write may be lost, and every done item is in
// the operation's ledger exactly once.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "batch/enqueue.h"
#include "batch/runner.h"
#include "config/config.h"
#include "db/connection.h"
#include "db/sqlstate.h"
#include "tests/support/database_test.h"

namespace coexist::batch {
namespace {

using namespace std::chrono_literals;

class BatchPoliciesTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE ledger (key bigint NOT NULL)");
  }

  config::Config Config(const std::string& policy_yaml, int chunk = 10) {
    return config::LoadString(
        "target: {owner_column: owner}\n"
        "batch: {job: j, chunk_size: " +
            std::to_string(chunk) +
            ", workers: 2, max_attempts: 2}\n"
            "policy:\n" +
            policy_yaml +
            "operation:\n"
            "  chunk_sql: |\n"
            "    WITH u AS (UPDATE products SET stock = stock + 1\n"
            "               WHERE id = ANY ($1::bigint[]) RETURNING id)\n"
            "    INSERT INTO ledger (key) SELECT unnest($1::bigint[])\n",
        "test.yaml");
  }

  void EnqueueAll() {
    std::vector<EnqueueItem> items;
    for (long long k = 1; k <= 100; ++k) items.push_back({std::to_string(k), "{}", std::nullopt});
    EnqueueItems(conninfo(), "j", items);
  }
  // The same 100 items again, on an empty ledger, after a run that set the
  // guard up (done items leave the queue, so they are enqueued anew).
  void RequeueAll() {
    QueryValue("TRUNCATE ledger, coexist.queue, coexist.done_chunks");
    EnqueueAll();
  }

  void ExpectAppliedOnce() {
    EXPECT_EQ(Count("SELECT count(*) FROM (SELECT key FROM ledger GROUP BY key"
                    " HAVING count(*) > 1) d"),
              0);
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.items q WHERE (q.state = 'done') <> EXISTS"
                    " (SELECT 1 FROM ledger l WHERE l.key::text = q.record_key)"),
              0);
  }

  // Online users adding 1000 to random rows while `running`; returns the
  // SQLSTATE counts. No update may be lost: checked by the caller from the
  // success count.
  struct OnlineLoad {
    std::atomic<long long> ok{0};
    std::atomic<long long> refused{0};
    std::atomic<long long> other{0};
    std::string refused_state;
  };
  void RunOnline(OnlineLoad& load, const std::atomic<bool>& running) {
    auto conn = Connect("coexist-online");
    pqxx::nontransaction(*conn).exec("SET lock_timeout = '2s'");
    unsigned seed = 42;
    while (running) {
      long long key = 10 + (rand_r(&seed) % 91);  // 7 and 9 are held for the batch
      std::string state = testing::SqlStateOf(
          *conn, "UPDATE products SET stock = stock + 1000 WHERE id = " + std::to_string(key));
      if (state.empty()) {
        ++load.ok;
      } else if (state == load.refused_state) {
        ++load.refused;
      } else {
        ++load.other;
      }
    }
  }
  // stock started at 1000 on each row; the batch adds 1 per done item.
  void ExpectNoLostUpdate(const OnlineLoad& load) {
    EXPECT_EQ(Count("SELECT sum(stock) FROM products"),
              100 * 1000 + Count("SELECT count(*) FROM ledger") + 1000 * load.ok.load());
  }
};

// `between_runs`: read_only_between_runs, the whole window refuses online
// writes, also when no run works (by default only while one does).
std::string WindowAroundNow(const std::string& mode, bool release_when_done = false,
                            bool between_runs = false) {
  // start == end: 24 hours, every day, so it is active whenever the test runs.
  return "  name: time_window\n  mode: " + mode +
         "\n  drain_margin: 0s\n  release_when_done: " + (release_when_done ? "true" : "false") +
         "\n  read_only_between_runs: " + (between_runs ? "true" : "false") +
         "\n  windows:\n"
         "    - {time_zone: Asia/Tokyo, start: \"00:00\", end: \"00:00\"}\n";
}

TEST_F(BatchPoliciesTest, TimeWindowRefusesOnlineWritesWhileActiveAndBatchWritesPass) {
  EnqueueAll();
  auto summary = batch::Run(conninfo(), Config(WindowAroundNow("read_only", false, true)));
  EXPECT_EQ(summary.counts.done, 100);
  ExpectAppliedOnce();
  auto online = Connect("coexist-online");
  EXPECT_EQ(testing::SqlStateOf(*online, "UPDATE products SET stock = 0 WHERE id = 1"),
            db::sqlstate::kWindowRefused);
  EXPECT_EQ(testing::SqlStateOf(*online, "DELETE FROM products WHERE id = 1"),
            db::sqlstate::kWindowRefused);
  EXPECT_EQ(testing::SqlStateOf(*online, "SELECT stock FROM products WHERE id = 1"), "");
  // mode allow: the same window lets online writes through.
  batch::Run(conninfo(), Config(WindowAroundNow("allow")));
  EXPECT_EQ(testing::SqlStateOf(*online, "UPDATE products SET stock = 0 WHERE id = 1"), "");
}

// release_when_done (the default): online writes are refused while the run
// works, and pass as soon as it has drained the queue, though the window's
// clock runs on; the next run's start closes it again.
TEST_F(BatchPoliciesTest, TimeWindowReleasesItsReadOnlyWindowWhenTheBatchIsDone) {
  EnqueueAll();
  auto config = Config(WindowAroundNow("read_only", true), 10);
  config.operation.chunk_sql =
      "WITH s AS (SELECT pg_sleep(0.05)), u AS (UPDATE products SET stock = stock + 1 WHERE id = "
      "ANY ($1::bigint[]) AND (SELECT true FROM s) RETURNING id) "
      "INSERT INTO ledger (key) SELECT unnest($1::bigint[])";
  auto online = Connect("coexist-online");
  std::atomic<int> refused_while_running{0};
  std::atomic<bool> running{true};
  std::jthread probe([&] {
    auto conn = Connect("coexist-online probe");
    while (running) {
      if (testing::SqlStateOf(*conn, "UPDATE products SET stock = stock WHERE id = 1") ==
          db::sqlstate::kWindowRefused) {
        ++refused_while_running;
      }
      std::this_thread::sleep_for(10ms);
    }
  });
  auto summary = batch::Run(conninfo(), config);
  running = false;
  probe.join();
  EXPECT_EQ(summary.counts.done, 100);
  EXPECT_GT(refused_while_running.load(), 0) << "the window did not hold while the run worked";
  EXPECT_EQ(testing::SqlStateOf(*online, "UPDATE products SET stock = stock WHERE id = 1"), "");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'windows_released'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.windows"), 0);
  // The next run's start writes the window again (and releases it when done);
  // read-only between runs, it then holds after the run.
  auto again = Config(WindowAroundNow("read_only", false, true));
  batch::Run(conninfo(), again, {.install = false});
  EXPECT_EQ(testing::SqlStateOf(*online, "UPDATE products SET stock = 0 WHERE id = 1"),
            db::sqlstate::kWindowRefused);
}

TEST_F(BatchPoliciesTest, TimeWindowClaimsNothingOutsideItsWindow) {
  EnqueueAll();
  auto hour = std::stoi(QueryValue("SELECT extract(hour FROM now() AT TIME ZONE 'UTC')"));
  char window[128];
  std::snprintf(window, sizeof(window),
                "  name: time_window\n  windows:\n"
                "    - {time_zone: UTC, start: \"%02d:00\", end: \"%02d:00\"}\n",
                (hour + 2) % 24, (hour + 3) % 24);
  auto summary = batch::Run(conninfo(), Config(window));
  EXPECT_EQ(summary.counts.done, 0);
  EXPECT_EQ(ToString(summary.stop_reason), "outside_window");
  EXPECT_EQ(summary.queued_left, 100);
  // Nothing done, everything left for the window: not a success (docs/batch.md).
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kItemsDeferred);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'claim_refused'"), 1);
  auto online = Connect("coexist-online");
  EXPECT_EQ(testing::SqlStateOf(*online, "UPDATE products SET stock = 0 WHERE id = 1"), "");
}

TEST_F(BatchPoliciesTest, StatusPartitionRefusesOnlineWritesToBatchOwnedRowsAndHandsBack) {
  EnqueueAll();
  OnlineLoad load;
  load.refused_state = db::sqlstate::kOwnerRefused;
  std::atomic<bool> running{true};
  auto config = Config("  name: status_partition\n", 5);
  // Slow the apply down so online writers meet batch-owned rows.
  config.operation.chunk_sql =
      "WITH s AS (SELECT pg_sleep(0.02)), u AS (UPDATE products SET stock = stock + 1 WHERE id = "
      "ANY ($1::bigint[]) AND (SELECT true FROM s) RETURNING id) "
      "INSERT INTO ledger (key) SELECT unnest($1::bigint[])";
  batch::Run(conninfo(), Config("  name: skip_locked\n"), {});  // guard in place before load
  RequeueAll();
  QueryValue("UPDATE products SET stock = 1000");
  auto holder = Connect("coexist-online");
  pqxx::work hold(*holder);
  hold.exec("SELECT 1 FROM products WHERE id = 7 FOR UPDATE");
  QueryValue("SELECT coexist.acquire_edit_lock('products', 9, 'alice', '1 hour')");
  std::jthread online([&] { RunOnline(load, running); });
  std::this_thread::sleep_for(50ms);
  auto summary = batch::Run(conninfo(), config);
  running = false;
  online.join();
  hold.commit();
  // Rows an online writer happened to hold at the takeover are deferred too.
  EXPECT_EQ(summary.counts.done + summary.counts.deferred, 100);
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key || ':' || defer_reason, ',' ORDER BY "
                       "record_key::bigint) FROM coexist.items WHERE record_key IN ('7', '9')"),
            "7:row_locked,9:edit_locked");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'deferred' AND record_key "
                  "NOT IN ('7', '9') AND defer_reason <> 'row_locked'"),
            0);
  // Online writers only ever succeed or get CX004 (the refusal window is the
  // moment between the takeover and the processing transaction).
  EXPECT_EQ(load.other.load(), 0);
  EXPECT_GT(load.ok.load(), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE owner <> 'online'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.takeovers"), 0);
  ExpectAppliedOnce();
  ExpectNoLostUpdate(load);
}

TEST_F(BatchPoliciesTest, StatusPartitionGuardRefusesOnlineWritesToBatchOwnedRows) {
  batch::Run(conninfo(), Config("  name: status_partition\n"));  // installs the guard
  auto batch = Connect("coexist-batch");
  EXPECT_EQ(testing::SqlStateOf(*batch,
                                "SET coexist.actor = 'batch'; "
                                "UPDATE products SET owner = 'batch' WHERE id = 3"),
            "");
  auto online = Connect("coexist-online");
  try {
    pqxx::work tx(*online);
    tx.exec("UPDATE products SET stock = 0 WHERE id = 3");
    FAIL() << "a batch-owned row was written";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), db::sqlstate::kOwnerRefused);
    // The guard runs with search_path pinned: the table is named with its schema.
    EXPECT_NE(std::string(e.what()).find("record 3 of public.products is being processed by a "
                                         "batch"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(testing::SqlStateOf(*online, "UPDATE products SET stock = 0 WHERE id = 4"), "");
}

// The race between an online user taking an edit lock and the batch's
// decision. Bob holds record 7's row while the batch waits for it; in that
// transaction he takes the record's edit lock (to keep editing it on his
// screen) and commits. The batch gets the row a moment later: it must see
// Bob's edit lock now, not apply over it on the strength of its first read.
// And an acquire that starts while a chunk holds the row waits for the chunk
// (acquire_edit_lock share-locks the row), so it cannot slip in after it.
TEST_F(BatchPoliciesTest, AnEditLockTakenWhileTheBatchWaitsForTheRowIsHonoured) {
  EnqueueAll();
  batch::Run(conninfo(), Config("  name: skip_locked\n"));  // guard + clean state
  RequeueAll();
  QueryValue("UPDATE products SET stock = 1000");
  auto bob = Connect("coexist-online-bob");
  std::string online_error;
  std::jthread online([&] {
    try {
      pqxx::work tx(*bob);
      tx.exec("SELECT 1 FROM products WHERE id = 7 FOR UPDATE");
      std::this_thread::sleep_for(500ms);  // the batch is waiting for the row now
      tx.exec("SELECT coexist.acquire_edit_lock('products', 7, 'bob', '1 hour')");
      tx.commit();
    } catch (const std::exception& e) {
      online_error = e.what();
    }
  });
  std::this_thread::sleep_for(100ms);
  auto summary = batch::Run(conninfo(), Config("  name: online_priority\n  max_wait: 1500ms\n"));
  online.join();
  EXPECT_EQ(online_error, "");
  EXPECT_EQ(summary.counts.done, 99);
  EXPECT_EQ(QueryValue("SELECT state || ':' || defer_reason FROM coexist.items "
                       "WHERE record_key = '7'"),
            "deferred:max_wait");
  EXPECT_EQ(QueryValue("SELECT stock FROM products WHERE id = 7"), "1000")
      << "the batch wrote a record under a live edit lock";
  ExpectAppliedOnce();
}

TEST_F(BatchPoliciesTest, OnlinePriorityWaitsForRowAndEditLocksWithoutDisturbingOnline) {
  EnqueueAll();
  batch::Run(conninfo(), Config("  name: skip_locked\n"));  // guard + clean state
  RequeueAll();
  QueryValue("UPDATE products SET stock = 1000");
  auto holder = Connect("coexist-online");
  auto token = QueryValue("SELECT coexist.acquire_edit_lock('products', 9, 'alice', '1 hour')");
  QueryValue("SELECT coexist.acquire_edit_lock('products', 11, 'carol', '1 hour')");
  std::string online_error;
  std::jthread online([&] {
    try {
      pqxx::work tx(*holder);
      tx.exec("SELECT 1 FROM products WHERE id = 7 FOR UPDATE");
      std::this_thread::sleep_for(600ms);  // a user thinking with the row locked
      tx.exec("UPDATE products SET stock = stock + 1000 WHERE id = 7");
      tx.commit();
      // Alice saves with her token and releases: NOTIFY wakes the batch.
      pqxx::work save(*holder);
      save.exec("SELECT coexist.check_edit_lock('products', 9, '" + token + "')");
      save.exec("UPDATE products SET stock = stock + 1000 WHERE id = 9");
      save.exec("SELECT coexist.release_edit_lock('products', 9, '" + token + "')");
      save.commit();
    } catch (const std::exception& e) {
      online_error = e.what();
    }
  });
  std::this_thread::sleep_for(100ms);
  auto started = std::chrono::steady_clock::now();
  auto summary = batch::Run(conninfo(), Config("  name: online_priority\n  max_wait: 3s\n"));
  auto took = std::chrono::steady_clock::now() - started;
  online.join();
  EXPECT_EQ(online_error, "");
  EXPECT_EQ(summary.counts.done, 99);
  EXPECT_EQ(summary.counts.deferred, 1);
  EXPECT_EQ(QueryValue("SELECT defer_reason FROM coexist.items WHERE record_key = '11'"),
            "max_wait");
  EXPECT_EQ(QueryValue("SELECT stock FROM products WHERE id = 7"), "2001");
  EXPECT_EQ(QueryValue("SELECT stock FROM products WHERE id = 9"), "2001");
  EXPECT_LT(took, 6s);
  ExpectAppliedOnce();
}

TEST_F(BatchPoliciesTest, BatchPriorityRevokesEditLocksAndTerminatesOnlyOnlineBlockers) {
  EnqueueAll();
  batch::Run(conninfo(), Config("  name: skip_locked\n"));
  RequeueAll();
  auto token = QueryValue("SELECT coexist.acquire_edit_lock('products', 9, 'alice', '1 hour')");
  auto online = ConnectOnline("coexist-online-web");
  pqxx::work online_tx(*online);
  online_tx.exec("SELECT 1 FROM products WHERE id = 7 FOR UPDATE");  // idle in transaction
  auto admin = Connect("psql-admin");
  pqxx::work admin_tx(*admin);
  admin_tx.exec("SELECT 1 FROM products WHERE id = 8 FOR UPDATE");

  auto summary = batch::Run(
      conninfo(), Config("  name: batch_priority\n  cancel_after: 200ms\n"
                         "  terminate_after: 500ms\n  online_application_name: coexist-online%\n"));
  EXPECT_EQ(summary.counts.done, 99);
  EXPECT_EQ(summary.counts.revoked, 1);
  EXPECT_EQ(QueryValue("SELECT record_key || ':' || defer_reason FROM coexist.items WHERE state = "
                       "'deferred'"),
            "8:blocker_not_online");
  // Alice's save fails with a clear "revoked" error instead of overwriting.
  auto alice = Connect("coexist-online");
  try {
    pqxx::work tx(*alice);
    tx.exec("SELECT coexist.check_edit_lock('products', 9, '" + token + "')");
    FAIL() << "the revoked lock still checks";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), db::sqlstate::kEditLockLost);
    EXPECT_NE(std::string(e.what()).find("revoked by batch run"), std::string::npos) << e.what();
  }
  // The online backend was terminated; the admin's was left alone.
  EXPECT_THROW(online_tx.exec("SELECT 1"), pqxx::broken_connection);
  EXPECT_NO_THROW(admin_tx.exec("SELECT 1"));
  admin_tx.commit();
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'edit_lock_revoked'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'backend_terminated'"), 1);
  ExpectAppliedOnce();
}

// An owner longer than a NOTIFY payload allows (taken before acquire_edit_lock
// limited owners to 200 bytes): revoking its lock failed every chunk that held
// the record, so no batch_priority run could finish.
TEST_F(BatchPoliciesTest, BatchPriorityRevokesTheLockOfAnOversizedOwner) {
  EnqueueAll();
  QueryValue(
      "INSERT INTO coexist.edit_locks (target, record_key, owner, expires_at)"
      " VALUES ('products', 9, repeat('x', 9000), now() + interval '1 hour') RETURNING 1");
  auto summary = batch::Run(conninfo(), Config("  name: batch_priority\n"));
  EXPECT_EQ(summary.counts.done, 100);
  EXPECT_EQ(summary.counts.revoked, 1);
  EXPECT_EQ(Count("SELECT length(subject) FROM coexist.events WHERE kind = 'edit_lock_revoked'"),
            9000)
      << "the audit keeps the whole owner";
  ExpectAppliedOnce();
}

// A superuser's session is never signalled, even when its application_name
// matches the online pattern: the item is deferred and the session lives.
TEST_F(BatchPoliciesTest, BatchPriorityNeverSignalsASuperusersBlocker) {
  EnqueueAll();
  batch::Run(conninfo(), Config("  name: skip_locked\n"));
  RequeueAll();
  auto admin = Connect("coexist-online-admin");  // the cluster's superuser
  pqxx::work admin_tx(*admin);
  admin_tx.exec("SELECT 1 FROM products WHERE id = 7 FOR UPDATE");

  auto summary = batch::Run(conninfo(), Config("  name: batch_priority\n  cancel_after: 100ms\n"
                                               "  terminate_after: 300ms\n"));
  EXPECT_EQ(summary.counts.done, 99);
  EXPECT_EQ(summary.counts.signalled, 0);
  EXPECT_EQ(QueryValue("SELECT record_key || ':' || defer_reason FROM coexist.items WHERE state = "
                       "'deferred'"),
            "7:blocker_not_online");
  EXPECT_NO_THROW(admin_tx.exec("SELECT 1"));
  admin_tx.commit();
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind LIKE 'backend_%'"), 0);
  ExpectAppliedOnce();
}

// pg_cancel_backend does nothing to an idle-in-transaction session, so such
// a blocker is terminated at once (not counted as cancelled), and its audit
// row is written on the aux connection: it stays although the chunk that
// waited for the row rolls back (here: it fails at commit).
TEST_F(BatchPoliciesTest, BatchPriorityTerminatesAnIdleBlockerAndItsEventOutlivesTheChunk) {
  EnqueueAll();
  batch::Run(conninfo(), Config("  name: skip_locked\n"));
  RequeueAll();
  QueryValue(
      "CREATE FUNCTION fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS "
      "$$BEGIN RAISE EXCEPTION 'the chunk of record 7 fails at commit'; END$$;"
      "CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON ledger DEFERRABLE INITIALLY "
      "DEFERRED FOR EACH ROW WHEN (NEW.key = 7) EXECUTE FUNCTION fail_at_commit()");
  auto online = ConnectOnline("coexist-online-web");
  pqxx::work online_tx(*online);
  online_tx.exec("SELECT 1 FROM products WHERE id = 7 FOR UPDATE");  // then idle in transaction

  std::string error = "no error";
  try {
    // terminate_after is long: only the idle session's termination at
    // cancel time lets record 7 through in time.
    batch::Run(conninfo(), Config("  name: batch_priority\n  cancel_after: 100ms\n"
                                  "  terminate_after: 3s\n"));
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("the chunk of record 7 fails at commit"), std::string::npos) << error;
  EXPECT_THROW(online_tx.exec("SELECT 1"), pqxx::broken_connection);
  EXPECT_EQ(QueryValue("SELECT string_agg(kind || ':' || subject || ':' || (details->>'state'), "
                       "',') FROM coexist.events WHERE kind LIKE 'backend_%'"),
            "backend_terminated:coexist-online-web:idle in transaction");
  EXPECT_EQ(QueryValue("SELECT state FROM coexist.items WHERE record_key = '7'"), "queued");
  EXPECT_EQ(Count("SELECT count(*) FROM ledger WHERE key = 7"), 0);
}

}  // namespace
}  // namespace coexist::batch
