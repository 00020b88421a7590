// The batch runner against a real PostgreSQL: enqueue, skip_locked with real
// concurrent online sessions, chunk scanning, several workers, the guard
// trigger's refusals. Every check of "applied once" reads a LEDGER that the
// operation itself writes, never the batch's own counters.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "batch/enqueue.h"
#include "batch/guard.h"
#include "batch/runner.h"
#include "common/error.h"
#include "config/config.h"
#include "config_core/config_error.h"
#include "db/sqlstate.h"
#include "schema/queue_store.h"
#include "schema/queue_store_ops.h"
#include "tests/support/database_test.h"
#include "tests/support/ledger_operation.h"

namespace coexist::batch {
namespace {

using namespace std::chrono_literals;

class BatchRunnerTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE ledger (key bigint NOT NULL, at timestamptz DEFAULT now())");
  }

  // A configuration whose operation adds `delta` to stock and writes the ledger.
  config::Config Config(const std::string& policy_yaml, int workers = 1, int chunk = 10) {
    std::string yaml = "batch: {job: j, chunk_size: " + std::to_string(chunk) +
                       ", workers: " + std::to_string(workers) +
                       ", max_attempts: 2}\n"
                       "policy:\n" +
                       policy_yaml +
                       "operation:\n"
                       "  chunk_sql: |\n"
                       "    WITH u AS (UPDATE products SET stock = stock + 1\n"
                       "               WHERE id = ANY ($1::bigint[]) RETURNING id)\n"
                       "    INSERT INTO ledger (key) SELECT unnest($1::bigint[])\n";
    return config::LoadString(yaml, "test.yaml");
  }

  void EnqueueRange(long long from, long long to) {
    std::vector<EnqueueItem> items;
    for (long long k = from; k <= to; ++k) items.push_back({std::to_string(k), "{}", std::nullopt});
    EnqueueItems(conninfo(), "j", items);
  }

  // Every item ends in exactly one state, and each done item's key is in the
  // ledger exactly once, and no other key is.
  void ExpectAppliedOnce() {
    EXPECT_EQ(Count("SELECT count(*) FROM ledger l WHERE NOT EXISTS (SELECT 1 FROM coexist.items q"
                    " WHERE q.record_key = l.key::text AND q.state = 'done')"),
              0);
    EXPECT_EQ(Count("SELECT count(*) FROM (SELECT key FROM ledger GROUP BY key"
                    " HAVING count(*) > 1) d"),
              0);
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.items q WHERE q.state = 'done' AND NOT EXISTS"
                    " (SELECT 1 FROM ledger l WHERE l.key::text = q.record_key)"),
              0);
  }
};

TEST_F(BatchRunnerTest, EnqueueCountsDuplicatesByIdempotencyKey) {
  std::istringstream csv("key,payload,idempotency_key\n1,\"{\"\"qty\"\": 2}\",a\n2,,b\n3\n");
  auto items = ParseCsv(csv, "items.csv");
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].payload, R"({"qty":2})");
  auto first = EnqueueItems(conninfo(), "j", items);
  EXPECT_EQ(first.added, 3);
  EXPECT_EQ(first.duplicates, 0);
  std::istringstream jsonl(
      "{\"key\": 1, \"idempotency_key\": \"a\"}\n\n{\"key\": 7, \"payload\": {\"x\": 1}}\n");
  auto again = EnqueueItems(conninfo(), "j", ParseJsonLines(jsonl, "items.jsonl"));
  EXPECT_EQ(again.added, 1);
  EXPECT_EQ(again.duplicates, 1);
  auto select = EnqueueSelect(conninfo(), "j",
                              "SELECT id, NULL::jsonb, 'sel' || id FROM products WHERE id <= 4");
  EXPECT_EQ(select.added, 4);
  auto select_again = EnqueueSelect(
      conninfo(), "j", "SELECT id, NULL::jsonb, 'sel' || id FROM products WHERE id <= 5");
  EXPECT_EQ(select_again.added, 1);
  EXPECT_EQ(select_again.duplicates, 4);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items"), 9);
}

// Unnamed columns are all "?column?": they are taken by position (key,
// payload, idempotency key), never by name.
// A large enqueue leaves the queue analyzed: a run started right after it
// (cron: enqueue, then run) is planned on statistics that know the new
// items (batch/enqueue.cpp: 7-10x slower claims otherwise). A small one
// leaves it to autovacuum.
TEST_F(BatchRunnerTest, ALargeEnqueueAnalyzesTheQueue) {
  auto analyzed = [&] {
    return QueryValue(
        "SELECT reltuples::bigint FROM pg_class WHERE oid = 'coexist.queue'::regclass");
  };
  EnqueueRange(1, 999);  // left to autovacuum
  EnqueueRange(1000, 2000);
  EXPECT_EQ(analyzed(), "2000");
  batch::EnqueueSelect(conninfo(), "j", "SELECT g FROM generate_series(1, 1500) g");
  EXPECT_EQ(analyzed(), "3500");
}

TEST_F(BatchRunnerTest, EnqueueSelectTakesUnnamedColumnsByPosition) {
  auto result = EnqueueSelect(conninfo(), "j",
                              "SELECT 1 + g % 1000, jsonb_build_object('n', g), 't' || g FROM "
                              "generate_series(1,10) g");
  EXPECT_EQ(result.added, 10);
  EXPECT_EQ(result.duplicates, 0);
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key || ' ' || payload::text || ' ' || "
                       "idempotency_key, ', ' ORDER BY record_key::bigint) FROM coexist.items"),
            "2 {\"n\": 1} t1, 3 {\"n\": 2} t2, 4 {\"n\": 3} t3, 5 {\"n\": 4} t4, "
            "6 {\"n\": 5} t5, 7 {\"n\": 6} t6, 8 {\"n\": 7} t7, 9 {\"n\": 8} t8, "
            "10 {\"n\": 9} t9, 11 {\"n\": 10} t10");
  // Two columns of one name: the first is the key, the second the payload.
  auto same_names = EnqueueSelect(conninfo(), "k", "SELECT 5 AS x, '{\"a\": 1}'::jsonb AS x");
  EXPECT_EQ(same_names.added, 1);
  EXPECT_EQ(QueryValue("SELECT record_key || ' ' || payload::text FROM coexist.items "
                       "WHERE job = 'k'"),
            "5 {\"a\": 1}");
}

TEST_F(BatchRunnerTest, EnqueueRejectsMalformedLinesWithTheirPlace) {
  std::istringstream csv("1\nx2\n");
  try {
    ParseCsv(csv, "bad.csv");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kDataError);
    EXPECT_STREQ(e.what(), "bad.csv:2: 'x2' is not an integer key");
  }
  std::istringstream jsonl("{\"key\": \"1\"}\n");
  EXPECT_THROW(ParseJsonLines(jsonl, "bad.jsonl"), Error);
}

// JSON keys of 2^63 and above are unsigned numbers to the parser; they
// used to wrap to negative bigint keys without a word.
TEST(Enqueue, KeysBeyondBigintAreRefusedNotWrapped) {
  auto error = [](const std::string& text, bool json) {
    std::istringstream in(text);
    try {
      json ? ParseJsonLines(in, "keys.jsonl") : ParseCsv(in, "keys.csv");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kDataError);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("{\"key\": 1}\n{\"key\": 9223372036854775808}\n", true),
            "keys.jsonl:2: key 9223372036854775808 is out of range (keys are bigint, at most "
            "9223372036854775807)");
  EXPECT_EQ(error("{\"key\": 18446744073709551615}\n", true),
            "keys.jsonl:1: key 18446744073709551615 is out of range (keys are bigint, at most "
            "9223372036854775807)");
  EXPECT_EQ(error("9223372036854775808\n", false),
            "keys.csv:1: key 9223372036854775808 is out of range (keys are bigint, at most "
            "9223372036854775807)");
  std::istringstream largest("{\"key\": 9223372036854775807}\n{\"key\": -9223372036854775808}\n");
  auto items = ParseJsonLines(largest, "keys.jsonl");
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].key, std::to_string(std::numeric_limits<long long>::max()));
  EXPECT_EQ(items[1].key, std::to_string(std::numeric_limits<long long>::min()));
}

TEST_F(BatchRunnerTest, SkipLockedAppliesEveryFreeItemOnceAndDefersLockedOnes) {
  EnqueueRange(1, 100);
  // An online user holds row 7 (FOR UPDATE, idle in transaction) and an edit
  // lock on row 9 while the batch runs.
  auto online = Connect("coexist-online");
  pqxx::work hold(*online);
  hold.exec("SELECT 1 FROM products WHERE id = 7 FOR UPDATE");
  QueryValue("SELECT coexist.acquire_edit_lock('products', 9, 'alice', '1 hour')");

  auto summary = batch::Run(conninfo(), Config("  name: skip_locked\n"));
  EXPECT_EQ(summary.counts.done, 98);
  EXPECT_EQ(summary.counts.deferred, 2);
  EXPECT_EQ(summary.counts.dead, 0);
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kItemsDeferred);
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key || ':' || defer_reason, ',' ORDER BY "
                       "record_key::bigint) FROM coexist.items WHERE state = 'deferred'"),
            "7:row_locked,9:edit_locked");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'item_deferred'"), 2);
  ExpectAppliedOnce();
  // The online transaction was never disturbed: it still saves.
  hold.exec("UPDATE products SET stock = 0 WHERE id = 7");
  hold.commit();
  EXPECT_EQ(QueryValue("SELECT stock FROM products WHERE id = 7"), "0");

  // A deferred item waits for the next run, which applies it.
  QueryValue("SELECT coexist.release_owner_edit_locks('alice')");
  auto next = batch::Run(conninfo(), Config("  name: skip_locked\n"));
  EXPECT_EQ(next.counts.done, 2);
  EXPECT_EQ(ExitCodeOf(next), ExitCode::kOk);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), 100);
  EXPECT_EQ(QueryValue("SELECT stock FROM products WHERE id = 7"), "1");
  ExpectAppliedOnce();
}

// A completed item leaves the queue for its chunk's row in done_chunks
// (0029), except an item with an idempotency key: it stays a done row, so
// that enqueueing its key again adds nothing. coexist.items shows every
// item, its payload and attempts included, wherever it is kept.
TEST_F(BatchRunnerTest, DoneItemsLeaveTheQueueAndKeyedOnesStillRefuseTheirKey) {
  std::vector<EnqueueItem> items;
  for (long long k = 1; k <= 25; ++k) {
    std::optional<std::string> idempotency_key;
    if (k % 5 == 0) idempotency_key = "key-" + std::to_string(k);
    items.push_back({std::to_string(k), "{\"n\": " + std::to_string(k) + "}", idempotency_key});
  }
  EXPECT_EQ(EnqueueItems(conninfo(), "j", items).added, 25);
  auto summary = batch::Run(conninfo(), Config("  name: skip_locked\n"));  // chunks of 10
  EXPECT_EQ(summary.counts.done, 25);
  ExpectAppliedOnce();
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key || ':' || state, ',' ORDER BY item_id)"
                       " FROM coexist.queue"),
            "5:done,10:done,15:done,20:done,25:done");
  // One row per chunk, each unkeyed item in exactly one of them.
  EXPECT_EQ(
      QueryValue("SELECT count(i) || ' ' || count(DISTINCT i) || ' ' ||"
                 " (count(DISTINCT chunk_id) > 1) FROM coexist.done_chunks, unnest(item_ids) i"),
      "20 20 true");
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key || '=' || (payload->>'n') || '/' || attempts"
                       " || '/' || run_id, ',' ORDER BY item_id) FROM coexist.items"
                       " WHERE record_key IN ('4', '5')"),
            "4=4/1/1,5=5/1/1");
  auto conn = Connect();
  {
    pqxx::read_transaction tx(*conn);
    EXPECT_EQ(db::CountJobItems(tx, "j").done, 25);
  }
  EXPECT_EQ(db::ReadQueueStatus(*conn, "j").jobs.at(0).by_state.at("done"), 25);

  // Enqueued again: the keyed items are duplicates, the others new items.
  auto again = EnqueueItems(conninfo(), "j", items);
  EXPECT_EQ(again.added, 20);
  EXPECT_EQ(again.duplicates, 5);
}

// A run that starts while the previous run's session is on its way out
// (the job's lock released a moment later) takes the job instead of
// reporting it busy (kJobLockSettle); a lock held for longer is a run at
// work.
TEST_F(BatchRunnerTest, AJobLockReleasedWithinTheSettleTimeIsTaken) {
  EnqueueRange(1, 5);
  auto holder = Connect("holder");
  pqxx::nontransaction(*holder).exec("SELECT coexist.try_lock_job('j')");
  std::jthread release([&] {
    std::this_thread::sleep_for(kJobLockSettle / 4);
    pqxx::nontransaction(*holder).exec("SELECT pg_advisory_unlock_all()");
  });
  auto summary = batch::Run(conninfo(), Config("  name: skip_locked\n"));
  EXPECT_EQ(summary.counts.done, 5);
  release.join();

  EnqueueRange(6, 7);
  pqxx::nontransaction(*holder).exec("SELECT coexist.try_lock_job('j')");
  EXPECT_THROW(batch::Run(conninfo(), Config("  name: skip_locked\n")), JobBusyError);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.queue WHERE state = 'queued'"), 2);
}

// The completion checks that it completed every item it was given: the
// claim's row locks make a shortfall impossible but for a bug, and the
// chunk then must not commit.
TEST_F(BatchRunnerTest, ACompletionThatFindsFewerItemsThanItWasGivenThrows) {
  EnqueueRange(1, 3);
  auto conn = Connect();
  db::QueueStore queue(*conn, {.job = "j"});
  pqxx::work tx(*conn);
  auto claimed = queue.ClaimItems(tx, 0, 10, 0, {}, false);
  ASSERT_EQ(claimed.size(), 3u);
  EXPECT_THROW(queue.CompleteItems(tx, 0, {claimed[0].item_id, claimed[1].item_id, 999999}),
               std::logic_error);
}

// With nothing in the way skip_locked applies a chunk before probing its
// rows (docs/batch.md, "Nothing in the way"). A row an online user holds
// stops that try at once: it rolls back whole and the chunk goes the
// probing way, which defers the held item and applies the others once; the
// rolled-back try charges nothing and counts no timeout.
TEST_F(BatchRunnerTest, SkipLockedRollsBackTheUnprobedTryThatMeetsAHeldRow) {
  EnqueueRange(1, 30);
  auto online = Connect("coexist-online");
  pqxx::work hold(*online);
  hold.exec("SELECT 1 FROM products WHERE id = 7 FOR UPDATE");

  auto summary = batch::Run(conninfo(), Config("  name: skip_locked\n"));
  EXPECT_EQ(summary.counts.done, 29);
  EXPECT_EQ(summary.counts.deferred, 1);
  EXPECT_EQ(summary.counts.dead, 0);
  EXPECT_EQ(QueryValue("SELECT state || ' ' || defer_reason || ' ' || attempts || ' ' || timeouts "
                       "FROM coexist.items WHERE record_key = '7'"),
            "deferred row_locked 0 0");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done' AND attempts <> 1"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE id BETWEEN 1 AND 30 AND id <> 7 "
                  "AND stock <> 1001"),
            0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'item_deferred'"), 1);
  ExpectAppliedOnce();
  // The online transaction was never disturbed: it still saves.
  hold.exec("UPDATE products SET stock = 0 WHERE id = 7");
  hold.commit();
  EXPECT_EQ(QueryValue("SELECT stock FROM products WHERE id = 7"), "0");
}

// An unprobed try that fails for an error the statement raises before it
// locks any row (here key 13's, whose row an online user holds) stands for
// the first try only of the same items: once 13 is deferred, key 1 is tried
// afresh and done at its first attempt, never charged with 13's error.
TEST_F(BatchRunnerTest, AFailedUnprobedTryIsNotChargedToTheItemsLeftAfterTheProbe) {
  EnqueueRange(1, 1);
  EnqueueRange(13, 13);
  auto online = Connect("coexist-online");
  pqxx::work hold(*online);
  hold.exec("SELECT 1 FROM products WHERE id = 13 FOR UPDATE");
  auto config = Config("  name: skip_locked\n");
  config.operation.chunk_sql =
      "WITH u AS (UPDATE products SET stock = stock + 1 WHERE id = ANY ($1::bigint[])\n"
      "             AND (SELECT sum(1 / (k - 13)) FROM unnest($1::bigint[]) k) IS NOT NULL\n"
      "           RETURNING id)\n"
      "INSERT INTO ledger (key) SELECT id FROM u";
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.done, 1);
  EXPECT_EQ(summary.counts.deferred, 1);
  EXPECT_EQ(QueryValue("SELECT state || ' ' || attempts || ' ' || coalesce(last_error, '-') "
                       "FROM coexist.items WHERE record_key = '1'"),
            "done 1 -");
  EXPECT_EQ(QueryValue("SELECT state || ' ' || defer_reason || ' ' || attempts "
                       "FROM coexist.items WHERE record_key = '13'"),
            "deferred row_locked 0");
  ExpectAppliedOnce();
  hold.commit();
}

TEST_F(BatchRunnerTest, SkipLockedEscalatesAfterMaxDeferrals) {
  EnqueueRange(1, 3);
  auto online = Connect("coexist-online");
  pqxx::work hold(*online);
  hold.exec("SELECT 1 FROM products WHERE id = 2 FOR UPDATE");
  auto config = Config("  name: skip_locked\n  max_deferrals: 2\n  on_exhausted: report\n");
  for (int run = 0; run < 3; ++run) batch::Run(conninfo(), config);
  EXPECT_EQ(QueryValue("SELECT deferrals FROM coexist.items WHERE record_key = '2'"), "3");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'item_escalated'"), 1);
  ExpectAppliedOnce();
}

TEST_F(BatchRunnerTest, ChunkScanningIsolatesTheBadItemWhichDiesAfterMaxAttempts) {
  EnqueueRange(1, 40);
  // The operation fails for key 13 only (a CHECK-like failure from the data).
  auto config = Config("  name: skip_locked\n", 1, 16);
  config.operation.chunk_sql =
      "INSERT INTO ledger (key) SELECT unnest($1::bigint[])\n"
      " WHERE (SELECT sum(1 / (k - 13)) FROM unnest($1::bigint[]) k) IS NOT NULL";
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.done, 39);
  EXPECT_EQ(summary.counts.dead, 1);
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kItemsDead);
  EXPECT_EQ(
      QueryValue("SELECT state || ' ' || attempts FROM coexist.items WHERE record_key = '13'"),
      "dead 2");
  EXPECT_NE(QueryValue("SELECT last_error FROM coexist.items WHERE record_key = '13'")
                .find("division by zero"),
            std::string::npos);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'item_dead'"), 1);
  ExpectAppliedOnce();
}

TEST_F(BatchRunnerTest, PerItemSqlBindsPayloadFieldsInOneStatementPerChunk) {
  std::vector<EnqueueItem> items;
  for (long long k = 1; k <= 30; ++k) {
    items.push_back({std::to_string(k),
                     "{\"qty\": " + std::to_string(k) + ", \"note\": \"it's \\\"k\\\"\"}",
                     std::nullopt});
  }
  EnqueueItems(conninfo(), "j", items);
  auto config = Config("  name: skip_locked\n");
  config.operation.chunk_sql.clear();
  config.operation.item_sql =
      "WITH u AS (UPDATE products SET stock = stock - $2::integer, note = $3 WHERE id = $1)\n"
      "INSERT INTO ledger (key) VALUES ($1);";
  config.operation.params = {"qty", "note"};
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.done, 30);
  EXPECT_EQ(QueryValue("SELECT stock || ' ' || note FROM products WHERE id = 30"),
            "970 it's \"k\"");
  // Round trips: one apply statement per chunk, not one per item.
  ExpectAppliedOnce();
}

TEST_F(BatchRunnerTest, SeveralWorkersNeverApplyAnItemTwice) {
  QueryValue("INSERT INTO products (id, stock) SELECT g, 0 FROM generate_series(101, 3000) g");
  EnqueueRange(1, 3000);
  auto summary = batch::Run(conninfo(), Config("  name: skip_locked\n", 4, 25));
  EXPECT_EQ(summary.counts.done, 3000);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 3000);
  ExpectAppliedOnce();
  EXPECT_EQ(QueryValue("SELECT outcome || ' ' || done FROM coexist.runs"), "succeeded 3000");
}

TEST_F(BatchRunnerTest, WorkersWhoseChunksShareKeysLeaveThemForLaterInsteadOfDeferring) {
  // Keys 1..40 queued three times: two workers' chunks of 30 overlap in
  // keys while both are open (each chunk sleeps), and no online user holds
  // anything. A sibling's row lock is not an online user's: nothing may be
  // deferred or waited for.
  for (int round = 0; round < 3; ++round) EnqueueRange(1, 40);
  auto config = config::LoadString(
      "batch: {job: j, chunk_size: 30, workers: 2}\n"
      "pacing: {adaptive: false}\n"
      "policy: {name: skip_locked}\n" +
          testing::LedgerOperation("0.05"),
      "test.yaml");
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.done, 120);
  EXPECT_EQ(summary.counts.deferred, 0) << "a worker took its sibling's lock for an online user's";
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 120);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'item_deferred'"), 0);
}

TEST_F(BatchRunnerTest, InstallingAnUnchangedGuardLeavesTheFunctionInUseAlone) {
  // Replacing the function would make every online session recompile it
  // at the start of every run (0006).
  auto config = Config("  name: skip_locked\n");
  auto conn = Connect();
  InstallGuard(*conn, CheckConfig(*conn, config, kInstallCheck));
  std::string version =
      "SELECT xmin::text FROM pg_proc WHERE oid = "
      "to_regproc(coexist.trigger_function_name('guard', 'products'))";
  auto before = QueryValue(version);
  InstallGuard(*conn, CheckConfig(*conn, config, kInstallCheck));
  EXPECT_EQ(QueryValue(version), before);
}

TEST_F(BatchRunnerTest, GuardTriggerRefusesWritesToRowsAnotherOwnerEditLocks) {
  batch::Run(conninfo(), Config("  name: skip_locked\n"));  // installs the guard
  auto token = QueryValue("SELECT coexist.acquire_edit_lock('products', 5, 'alice', '1 hour')");
  auto bob = Connect("coexist-online");
  EXPECT_EQ(testing::SqlStateOf(*bob, "UPDATE products SET stock = 1 WHERE id = 5"),
            db::sqlstate::kEditLockedRefused);
  // The holder's save, after check_edit_lock, passes.
  EXPECT_EQ(testing::SqlStateOf(*bob, "SELECT coexist.check_edit_lock('products', 5, '" + token +
                                          "'); UPDATE products SET stock = 1 WHERE id = 5"),
            "");
  // The batch's session passes.
  EXPECT_EQ(testing::SqlStateOf(*bob,
                                "SET coexist.actor = 'batch'; "
                                "UPDATE products SET stock = 2 WHERE id = 5"),
            "");
  EXPECT_EQ(QueryValue("SELECT stock FROM products WHERE id = 5"), "2");
}

TEST_F(BatchRunnerTest, AMissingOperationIsAConfigurationError) {
  auto config = Config("  name: skip_locked\n");
  config.operation.chunk_sql = "UPDATE no_such_table SET x = 1 WHERE id = ANY ($1::bigint[])";
  try {
    batch::Run(conninfo(), config);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kConfig);
    EXPECT_NE(std::string(e.what()).find("no_such_table"), std::string::npos);
  }
}

// The start-up check of the operation runs none of the user's SQL: a second
// statement after a semicolon used to be run by the simple-protocol
// "PREPARE ... AS <sql>" of the check.
// A deadlock or serialization failure of the operation is nobody's fault:
// the statement is tried again in smaller pieces, and an item that keeps
// failing that way is deferred, never charged an attempt (before, a chunk of
// one item was charged, and with max_attempts 1 went dead).
TEST_F(BatchRunnerTest, ADeadlockIsTriedAgainThenDeferredNeverCharged) {
  QueryValue(
      "CREATE SEQUENCE public.boom; CREATE TABLE public.boom_limit (n bigint);"
      "INSERT INTO public.boom_limit VALUES (1);"
      "CREATE FUNCTION public.deadlock_first(ids bigint[]) RETURNS bigint[] LANGUAGE plpgsql AS "
      "$$BEGIN IF nextval('public.boom') <= (SELECT n FROM public.boom_limit) THEN "
      "RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01'; END IF; RETURN ids; END$$");
  auto config = config::LoadString(
      "batch: {job: j, chunk_size: 1, max_attempts: 1}\npolicy: {name: skip_locked}\n"
      "operation:\n  chunk_sql: UPDATE products SET stock = stock + 1 WHERE id = ANY "
      "(public.deadlock_first($1::bigint[]))\n",
      "job.yaml");
  // The first try deadlocks, the second passes: done, one attempt.
  EnqueueRange(1, 1);
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.done, 1);
  EXPECT_EQ(summary.counts.dead, 0);
  EXPECT_EQ(QueryValue("SELECT state || ':' || attempts FROM coexist.items WHERE record_key = '1'"),
            "done:1");
  // Both tries deadlock: deferred for the next run, no attempt charged.
  QueryValue("SELECT setval('public.boom', 1, false); UPDATE public.boom_limit SET n = 2");
  EnqueueRange(2, 2);
  summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.deferred, 1);
  EXPECT_EQ(summary.counts.dead, 0);
  EXPECT_EQ(QueryValue("SELECT state || ':' || attempts || ':' || defer_reason FROM coexist.items "
                       "WHERE record_key = '2'"),
            "deferred:0:deadlock");
  EXPECT_EQ(Count("SELECT stock FROM products WHERE id = 2"), 1000);
  QueryValue("UPDATE public.boom_limit SET n = 0; UPDATE coexist.queue SET not_before = now()");
  summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.done, 1);
  EXPECT_EQ(Count("SELECT stock FROM products WHERE id = 2"), 1001);
}

// A timeout defers an item without charging an attempt; an item that times
// out on every run dies at batch.max_timeouts instead of being deferred
// forever.
TEST_F(BatchRunnerTest, AnItemThatTimesOutEveryTimeDiesAtMaxTimeouts) {
  EnqueueRange(1, 1);
  auto config = config::LoadString(
      "database: {statement_timeout: 200ms}\n"
      "batch: {job: j, chunk_size: 10, max_timeouts: 3}\n"
      "pacing: {adaptive: false}\n"
      "operation:\n"
      "  chunk_sql: SELECT pg_sleep(5) FROM unnest($1::bigint[])\n",
      "test.yaml");
  for (int run = 1; run <= 2; ++run) {
    auto summary = batch::Run(conninfo(), config);
    EXPECT_EQ(summary.counts.deferred, 1) << run;
    EXPECT_EQ(summary.counts.dead, 0) << run;
    EXPECT_EQ(ExitCodeOf(summary), ExitCode::kItemsDeferred) << run;
    EXPECT_EQ(QueryValue("SELECT state || ' ' || timeouts || ' ' || attempts FROM coexist.items"),
              "deferred " + std::to_string(run) + " 0");
  }
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.deferred, 0);
  EXPECT_EQ(summary.counts.dead, 1);
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kItemsDead);
  EXPECT_EQ(QueryValue("SELECT state || ' ' || timeouts || ' ' || attempts || ' ' || last_error "
                       "FROM coexist.items"),
            "dead 3 0 timed out 3 times (batch.max_timeouts 3): the operation hit "
            "database.statement_timeout or a lock timeout every time");
  EXPECT_EQ(QueryValue("SELECT details->>'timeouts' FROM coexist.events WHERE kind = 'item_dead'"),
            "3");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'item_deferred'"), 2);
  // queue retry --dead starts its count again.
  auto conn = Connect("coexist-admin");
  EXPECT_EQ(db::RetryDeadItems(*conn, "j", "admin:test"), 1);
  EXPECT_EQ(QueryValue("SELECT state || ' ' || timeouts FROM coexist.items"), "queued 0");
}

TEST_F(BatchRunnerTest, AnOperationOfTwoStatementsIsRefusedAndNoneOfItRuns) {
  EnqueueRange(1, 3);
  struct Case {
    std::string operation;
    std::string message;
  };
  for (const auto& c : std::vector<Case>{
           {"  chunk_sql: UPDATE products SET stock = stock + 1 WHERE id = ANY ($1::bigint[]); "
            "CREATE TABLE pwned ()\n",
            "job.yaml:5:14: operation.chunk_sql: holds 2 SQL statements; the operation must be "
            "exactly one"},
           {"  item_sql: |\n    UPDATE products SET stock = stock + 1 WHERE id = $1;\n"
            "    CREATE TABLE pwned ();\n",
            "job.yaml:5:13: operation.item_sql: holds 2 SQL statements; the operation must be "
            "exactly one"},
       }) {
    auto config = config::LoadString(
        "batch: {job: j}\npolicy:\n  name: skip_locked\noperation:\n" + c.operation, "job.yaml");
    try {
      batch::Run(conninfo(), config);
      ADD_FAILURE() << "accepted: " << c.operation;
    } catch (const config::ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), c.message);
      EXPECT_NE(e.hint().find("none of it was run"), std::string::npos) << e.hint();
      EXPECT_EQ(e.code(), ExitCode::kConfig);
    }
    EXPECT_EQ(QueryValue("SELECT to_regclass('pwned') IS NULL"), "t") << c.operation;
    EXPECT_EQ(Count("SELECT sum(stock) FROM products WHERE id <= 3"), 3 * 1000);
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state <> 'queued'"), 0);
  }
  // One statement with a semicolon inside a literal, and a trailing one, is one.
  auto one = config::LoadString(
      "batch: {job: j}\npolicy:\n  name: skip_locked\noperation:\n"
      "  chunk_sql: \"UPDATE products SET stock = stock + length('a;b') - 3 "
      "WHERE id = ANY ($1::bigint[]);\"\n",
      "job.yaml");
  EXPECT_EQ(batch::Run(conninfo(), one).counts.done, 3);
}

// Claiming stopped with items still queued (here: a stop file present at
// start) is not a full success: exit status 2, as docs/batch.md says.
TEST_F(BatchRunnerTest, ARunThatStopsWithItemsStillQueuedExitsTwo) {
  EnqueueRange(1, 20);
  auto stop_file = std::filesystem::temp_directory_path() /
                   ("coexist-stop-" + std::to_string(getpid()) + "-" + database_name());
  std::ofstream(stop_file) << "";
  auto config = Config("  name: skip_locked\n");
  config.pacing.stop_file = stop_file.string();
  auto summary = batch::Run(conninfo(), config);
  std::filesystem::remove(stop_file);
  EXPECT_EQ(ToString(summary.stop_reason), "stop_file");
  EXPECT_EQ(summary.queued_left, 20);
  EXPECT_EQ(summary.outcome, "incomplete");
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kItemsDeferred);
  // Drained: 0.
  config.pacing.stop_file.clear();
  auto drained = batch::Run(conninfo(), config);
  EXPECT_EQ(ToString(drained.stop_reason), "drained");
  EXPECT_EQ(drained.counts.done, 20);
  EXPECT_EQ(ExitCodeOf(drained), ExitCode::kOk);
}

// An operation every item fails on (here: a NOT NULL the SQL always breaks,
// as a typo in `params` does) stops the run after
// batch.max_consecutive_failures first attempts, instead of spending every
// item's attempts: most of the queue is left untouched for the fixed job.
TEST_F(BatchRunnerTest, ARunStopsWhenItemsFailTheirFirstAttemptInARow) {
  EnqueueRange(1, 300);
  auto config = Config("  name: skip_locked\n", 1, 10);
  config.batch.max_consecutive_failures = 20;
  config.operation.chunk_sql = "INSERT INTO ledger (key) SELECT NULL FROM unnest($1::bigint[])";
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(ToString(summary.stop_reason), "failures_in_a_row");
  EXPECT_EQ(summary.counts.done, 0);
  EXPECT_EQ(summary.counts.dead, 0);  // max_attempts 2: a first failure kills none
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kItemsDeferred);
  // Stopped with the chunk that reached 20 failures (chunks are sized by
  // pacing, at most 10 items here): the rest of the queue is untouched.
  auto charged = Count("SELECT count(*) FROM coexist.items WHERE attempts > 0");
  EXPECT_GE(charged, 20);
  EXPECT_LT(charged, 30);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE attempts = 0 AND state = 'queued'"),
            300 - charged);
  EXPECT_EQ(QueryValue("SELECT details->>'max_consecutive_failures' FROM coexist.events"
                       " WHERE kind = 'run_stopped_failing'"),
            "20");
  // 0 turns the stop off: the same queue then fails through to the end.
  config.batch.max_consecutive_failures = 0;
  auto unbounded = batch::Run(conninfo(), config);
  EXPECT_EQ(ToString(unbounded.stop_reason), "drained");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE attempts = 0"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 0);
}

// The stop is for an operation that fails for everything, not for a queue
// with bad items in it: every chunk that applies one item starts the count
// again, and retries of items that failed before do not count, so a third
// of the items failing (and failing again on retry) never trips it.
TEST_F(BatchRunnerTest, BadItemsAmongGoodOnesNeverStopTheRun) {
  EnqueueRange(1, 300);
  auto config = Config("  name: skip_locked\n", 1, 10);
  config.batch.max_consecutive_failures = 5;
  config.operation.chunk_sql =
      "INSERT INTO ledger (key) SELECT k FROM unnest($1::bigint[]) k\n"
      " WHERE (SELECT sum(1 / (x % 3)) FROM unnest($1::bigint[]) x) IS NOT NULL";
  for (int run = 0; run < 3; ++run) {
    auto summary = batch::Run(conninfo(), config);
    EXPECT_NE(ToString(summary.stop_reason), "failures_in_a_row") << "run " << run;
  }
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), 200);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'dead'"), 100);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'run_stopped_failing'"), 0);
  ExpectAppliedOnce();
}

TEST(BatchConfig, ExampleConfigurationsLoad) {
  for (const char* name :
       {"skip_locked", "time_window", "status_partition", "online_priority", "batch_priority"}) {
    auto config = config::LoadFile(std::string(COEXIST_SOURCE_DIR) + "/config/examples/batch_" +
                                   name + ".yaml");
    EXPECT_EQ(config.policy.name, name);
    EXPECT_FALSE(config.operation.chunk_sql.empty());
  }
}

TEST(BatchConfig, PolicyErrorsNameTheKeyAndPlace) {
  auto message = [](const std::string& yaml) {
    try {
      config::LoadString(yaml, "job.yaml");
    } catch (const config::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("policy:\n  name: time_window\n  windows:\n"
                    "    - {time_zone: Mars/Olympus, start: \"01:00\", end: \"02:00\"}\n"),
            "job.yaml:4:19: policy.windows[0].time_zone: unknown time zone 'Mars/Olympus'");
  EXPECT_EQ(message("policy:\n  name: skip_locked\n  max_wait: 1s\n  cancel_after: 1s\n"
                    "  terminate_after: 0s\n"),
            "job.yaml:5:20: policy.terminate_after: terminate_after (0s) is shorter than "
            "cancel_after (1s)");
  // A key of another policy is unknown here.
  EXPECT_NE(
      message("policy:\n  name: online_priority\n  cancel_after: 1s\n").find("policy.cancel_after"),
      std::string::npos);
}

}  // namespace
}  // namespace coexist::batch
