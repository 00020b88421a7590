// Range jobs (batch.range) against a real PostgreSQL: the rows matching the
// predicate are walked in key order, each applied exactly once (counted in
// a ledger the operation writes), the walk resumes from its checkpoint after
// a kill -9, and rows held by online writers become queue exceptions that
// each of the five policies decides as it decides queued items, with no
// online update lost.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <pqxx/pqxx>
#include <thread>
#include <tuple>

#include "batch/guard.h"
#include "batch/runner.h"
#include "config/config.h"
#include "config_core/config_error.h"
#include "db/connection.h"
#include "tests/support/batch_process.h"
#include "tests/support/database_test.h"
#include "tests/support/shell_command.h"

namespace coexist::batch {
namespace {

using namespace std::chrono_literals;

class RangeJobTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE ledger (key text NOT NULL, query text)");
    QueryValue("ALTER TABLE products ADD COLUMN status text NOT NULL DEFAULT 'new'");
  }

  // Products 1..`rows`, every third one to settle.
  void Seed(long long rows) {
    QueryValue("INSERT INTO products (id, stock) SELECT g, 0 FROM generate_series(1, " +
               std::to_string(rows) + ") g ON CONFLICT (id) DO UPDATE SET stock = 0");
    QueryValue("UPDATE products SET status = CASE WHEN id % 3 = 0 THEN 'to_settle' ELSE 'new' END");
  }

  // Settles the chunk's products (the predicate then no longer selects
  // them) and writes one ledger row per product.
  static std::string SettleJob(int workers, int chunk) {
    return "batch: {job: settle, workers: " + std::to_string(workers) +
           ", chunk_size: " + std::to_string(chunk) +
           ", range: {where: \"status = 'to_settle'\"}}\n"
           "pacing: {adaptive: false}\n"
           "operation:\n"
           "  chunk_sql: |\n"
           "    WITH u AS (UPDATE products SET stock = stock + 1, status = 'settled'\n"
           "               WHERE id = ANY ($1::bigint[]))\n"
           "    INSERT INTO ledger (key) SELECT unnest($1::text[])\n";
  }

  // The same job with operation.set: coexist writes the UPDATE of the
  // chunk's keys, with the predicate repeated. The ledger is then written
  // by a trigger of the user's table (LedgerByTrigger).
  static std::string SettleJobWithSet(int workers, int chunk) {
    return "batch: {job: settle, workers: " + std::to_string(workers) +
           ", chunk_size: " + std::to_string(chunk) +
           ", range: {where: \"status = 'to_settle'\"}}\n"
           "pacing: {adaptive: false}\n"
           "operation: {set: \"stock = stock + 1, status = 'settled'\"}\n";
  }
  // A ledger row per product settled, written by the application's own
  // trigger with the statement that settled it (current_query()): which of
  // the walk's ways applied each row.
  void LedgerByTrigger(const std::string& when =
                           "OLD.status = 'to_settle' AND NEW.status = "
                           "'settled'") {
    QueryValue(
        "CREATE FUNCTION ledger_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "INSERT INTO ledger (key, query) VALUES (NEW.id::text, current_query()); "
        "RETURN NEW; END $$");
    QueryValue("CREATE TRIGGER ledger_row AFTER UPDATE ON products FOR EACH ROW WHEN (" + when +
               ") EXECUTE FUNCTION ledger_row()");
  }
  // The settle job in either form, the ledger's trigger installed for set.
  std::string PrepareSettleJob(int workers, int chunk, bool with_set) {
    if (!with_set) return SettleJob(workers, chunk);
    LedgerByTrigger();
    return SettleJobWithSet(workers, chunk);
  }
  // Ledger rows written by the UPDATE coexist writes for operation.set: its
  // own statement (the careful way), or the walk's one call that runs it
  // (batch/range_chunk_call.h), whose text is then the client's query.
  long long AppliedBySetStatement() {
    return Count(
        "SELECT count(*) FROM ledger WHERE query LIKE 'UPDATE \"public\".\"products\" SET%' "
        "OR query LIKE '%pg_temp.coexist_range_chunk(%'");
  }

  void ExpectEachAppliedOnce(const std::string& matching_sql, long long rows) {
    EXPECT_EQ(Count("SELECT count(*) FROM ledger"), rows);
    EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), rows);
    EXPECT_EQ(Count("SELECT count(*) FROM (" + matching_sql +
                    ") m(k) WHERE NOT EXISTS "
                    "(SELECT 1 FROM ledger l WHERE l.key = m.k::text)"),
              0);
  }
  // Defined below (it writes the stock job).
  std::filesystem::path CutMidPassThenResume(
      const std::string& name, const std::function<void(pid_t, const std::filesystem::path&)>& cut,
      bool with_set = false);
};

TEST_F(RangeJobTest, AppliesEveryMatchingRowOnceAndSaysThePassFinished) {
  Seed(1000);
  auto config = config::LoadString(SettleJob(2, 7), "settle.yaml");
  auto summary = batch::Run(conninfo(), config);
  ASSERT_TRUE(summary.range.has_value());
  EXPECT_TRUE(summary.range->finished);
  EXPECT_FALSE(summary.range->resumed);
  EXPECT_EQ(summary.range->applied, 333);
  EXPECT_EQ(summary.range->exceptions, 0);
  EXPECT_EQ(summary.counts.done, 333);
  EXPECT_EQ(summary.outcome, "succeeded");
  ExpectEachAppliedOnce("SELECT id FROM products WHERE id % 3 = 0", 333);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE status = 'to_settle'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE stock <> (id % 3 = 0)::int"), 0);
  // Two workers, four segments each, all walked; no queue row was written.
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.range_checkpoints WHERE job = 'settle' AND "
                  "finished"),
            8);
  // Each segment expected its share of the 333 rows; together, all of them.
  EXPECT_EQ(Count("SELECT sum(expected) FROM coexist.range_checkpoints WHERE job = 'settle'"), 333);
  EXPECT_EQ(Count("SELECT max(expected) - min(expected) FROM coexist.range_checkpoints"), 5)
      << "333 = 7 x 41 + 46";
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE job = 'settle'"), 0);
  // The next run starts a new pass, which finds nothing left to settle.
  auto next = batch::Run(conninfo(), config);
  ASSERT_TRUE(next.range.has_value());
  EXPECT_EQ(next.range->pass, summary.range->pass + 1);
  EXPECT_EQ(next.range->applied, 0);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 333);
}

// operation.set: coexist writes the UPDATE of each chunk's locked rows
// (with the predicate repeated), each row settled exactly once, the
// application's own trigger firing once per row.
TEST_F(RangeJobTest, WithOperationSetCoexistWritesTheUpdateAndEachRowIsSettledOnce) {
  Seed(1000);
  LedgerByTrigger();
  auto summary = batch::Run(conninfo(), config::LoadString(SettleJobWithSet(2, 7), "set.yaml"));
  ASSERT_TRUE(summary.range.has_value());
  EXPECT_TRUE(summary.range->finished);
  EXPECT_EQ(summary.range->applied, 333);
  EXPECT_EQ(summary.outcome, "succeeded");
  ExpectEachAppliedOnce("SELECT id FROM products WHERE id % 3 = 0", 333);
  EXPECT_EQ(AppliedBySetStatement(), 333);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE stock <> (id % 3 = 0)::int"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE status = 'to_settle'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE job = 'settle'"), 0);
}

TEST_F(RangeJobTest, WalksTextKeysOfATableInAnotherSchemaWithItemSql) {
  QueryValue("CREATE SCHEMA shop");
  QueryValue(
      "CREATE TABLE shop.orders (code text PRIMARY KEY, status text NOT NULL, "
      "version bigint NOT NULL DEFAULT 0)");
  // Text order is not numeric order: 'o-10' sorts before 'o-9'.
  QueryValue(
      "INSERT INTO shop.orders (code, status) SELECT 'o-' || g, CASE WHEN g % 2 = 0 THEN "
      "'to_settle' ELSE 'open' END FROM generate_series(1, 301) g");
  std::string yaml =
      "target: {table: shop.orders, key_column: code}\n"
      "batch: {job: orders, workers: 2, chunk_size: 9, range: {where: \"status = "
      "'to_settle'\"}}\n"
      "pacing: {adaptive: false}\n"
      "operation:\n"
      "  item_sql: |\n"
      "    WITH u AS (UPDATE shop.orders SET status = 'settled' WHERE code = $1)\n"
      "    INSERT INTO ledger (key) VALUES ($1)\n";
  auto summary = batch::Run(conninfo(), config::LoadString(yaml, "orders.yaml"));
  ASSERT_TRUE(summary.range.has_value());
  EXPECT_TRUE(summary.range->finished);
  EXPECT_EQ(summary.range->applied, 150);
  ExpectEachAppliedOnce("SELECT code FROM shop.orders WHERE substr(code, 3)::int % 2 = 0", 150);
  EXPECT_EQ(Count("SELECT count(*) FROM shop.orders WHERE status = 'to_settle'"), 0);
}

// A batch role that may not create temporary objects (a database that
// revoked TEMP from PUBLIC) gets no one-call chunk: the walk takes every
// chunk by statements, each applied by the UPDATE coexist writes (its text
// the trigger's current_query()), and every row once.
TEST_F(RangeJobTest, ABatchRoleWithoutTempWalksByStatements) {
  Seed(1000);
  LedgerByTrigger();
  std::string role = "cx_notemp_" + database_name();
  QueryValue("CREATE ROLE " + role + " LOGIN; REVOKE TEMP ON DATABASE " + database_name() +
             " FROM PUBLIC; GRANT USAGE ON SCHEMA coexist TO " + role +
             "; GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA coexist TO " + role +
             "; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA coexist TO " + role +
             "; GRANT SELECT, UPDATE ON products TO " + role + "; GRANT INSERT ON ledger TO " +
             role +
             // The fixture's tables are where its own role's search_path put
             // them ("$user" first: its role is named coexist).
             "; ALTER ROLE " + role + " SET search_path = coexist, public; SELECT 1");
  auto config = config::LoadString(SettleJobWithSet(2, 7), "s.yaml");
  {
    // Installed by its owner, as `db install` would (docs/operations.md).
    auto conn = Connect();
    InstallGuard(*conn, CheckConfig(*conn, config, kInstallCheck));
  }
  auto summary = batch::Run(conninfo() + " user=" + role, config);
  // item_sql needs TEMP itself (its function is session-local): refused at
  // its place before anything runs (docs/operations.md, "Database roles").
  std::string item_error, item_hint;
  try {
    batch::Run(conninfo() + " user=" + role,
               config::LoadString("batch: {job: items, range: {where: \"true\"}}\n"
                                  "operation: {item_sql: 'UPDATE products SET stock = 0 WHERE "
                                  "id = $1'}\n",
                                  "i.yaml"));
  } catch (const config::ConfigError& e) {
    item_error = e.what();
    item_hint = e.hint();
  }
  QueryValue("DROP OWNED BY " + role + "; DROP ROLE " + role + "; SELECT 1");
  EXPECT_EQ(item_error.rfind("i.yaml:2:23: operation.item_sql: the database rejects it: ERROR:  "
                             "permission denied to create temporary tables",
                             0),
            0u)
      << item_error;
  EXPECT_EQ(item_hint,
            "item_sql runs as a session-local function: GRANT TEMP ON DATABASE to the batch role "
            "(docs/operations.md, \"Database roles\"), or write it as chunk_sql.");
  ASSERT_TRUE(summary.range.has_value());
  EXPECT_TRUE(summary.range->finished);
  EXPECT_EQ(summary.range->applied, 333);
  ExpectEachAppliedOnce("SELECT id FROM products WHERE id % 3 = 0", 333);
  EXPECT_EQ(
      Count("SELECT count(*) FROM ledger WHERE query LIKE 'UPDATE \"public\".\"products\" SET%'"),
      333);
}

// A row a run owns (target.owner_column says batch, as a queued item's
// takeover leaves it) is the queue path's: the one call sends its chunk the
// careful way, which queues the row, and the queue path decides it. Each
// row once; the owned one never by the one call.
TEST_F(RangeJobTest, WithOperationSetARowARunOwnsIsLeftToTheQueuePath) {
  Seed(300);
  LedgerByTrigger();
  QueryValue("UPDATE products SET owner = 'batch' WHERE id = 150");
  auto config =
      config::LoadString("target: {owner_column: owner}\n" + SettleJobWithSet(1, 25), "s.yaml");
  auto summary = batch::Run(conninfo(), config);
  ASSERT_TRUE(summary.range.has_value());
  EXPECT_TRUE(summary.range->finished);
  EXPECT_EQ(summary.range->exceptions, 1);
  EXPECT_EQ(summary.outcome, "succeeded");
  ExpectEachAppliedOnce("SELECT id FROM products WHERE id % 3 = 0", 100);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger WHERE key = '150' AND query NOT LIKE "
                  "'%coexist_range_chunk%'"),
            1);
}

// The one call's operation.set way on keys that have no max() (uuid), of a
// partitioned table in another schema, with the application's own trigger
// on it: every matching row once, none of the others.
TEST_F(RangeJobTest, WalksUuidKeysOfAPartitionedTableWithOperationSet) {
  QueryValue("CREATE SCHEMA shop");
  QueryValue(
      "CREATE TABLE shop.invoices (id uuid PRIMARY KEY, status text NOT NULL, "
      "version bigint NOT NULL DEFAULT 0) PARTITION BY HASH (id)");
  for (int i = 0; i < 3; ++i) {
    QueryValue("CREATE TABLE shop.invoices_" + std::to_string(i) +
               " PARTITION OF shop.invoices FOR VALUES WITH (MODULUS 3, REMAINDER " +
               std::to_string(i) + ")");
  }
  QueryValue(
      "INSERT INTO shop.invoices (id, status) SELECT md5(g::text)::uuid, CASE WHEN g % 2 = 0 "
      "THEN 'to_settle' ELSE 'open' END FROM generate_series(1, 801) g");
  QueryValue(
      "CREATE FUNCTION invoice_ledger() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "INSERT INTO ledger (key) VALUES (NEW.id::text); RETURN NEW; END $$");
  QueryValue(
      "CREATE TRIGGER invoice_ledger AFTER UPDATE ON shop.invoices FOR EACH ROW WHEN "
      "(NEW.status = 'settled') EXECUTE FUNCTION invoice_ledger()");
  std::string yaml =
      "target: {table: shop.invoices, known_triggers: [invoice_ledger]}\n"
      "batch: {job: invoices, workers: 2, chunk_size: 23, range: {where: \"status = "
      "'to_settle'\"}}\n"
      "pacing: {adaptive: false}\n"
      "operation: {set: \"status = 'settled'\"}\n";
  auto summary = batch::Run(conninfo(), config::LoadString(yaml, "invoices.yaml"));
  ASSERT_TRUE(summary.range.has_value());
  EXPECT_TRUE(summary.range->finished);
  EXPECT_EQ(summary.range->applied, 400);
  EXPECT_EQ(summary.range->exceptions, 0);
  ExpectEachAppliedOnce("SELECT md5(g::text)::uuid FROM generate_series(1, 801) g WHERE g % 2 = 0",
                        400);
  EXPECT_EQ(Count("SELECT count(*) FROM shop.invoices WHERE status = 'to_settle'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM shop.invoices WHERE status = 'open'"), 401);
}

// An operation that leaves the predicate true (stock + 1 of every product)
// is not idempotent by itself: only the checkpoint, committed with each
// chunk's apply, keeps a resumed pass from applying a row twice.
// The job of the two tests below, in `dir`: stock + 1 and a ledger row for
// every product above 100, 20 ms a chunk.
// With `with_set`, the same as operation.set (the sleep an InitPlan, once a
// statement), the ledger then written by a trigger (LedgerByTrigger).
std::string WriteStockJob(const std::filesystem::path& dir, bool with_set = false) {
  std::filesystem::create_directories(dir);
  std::string config = (dir / "job.yaml").string();
  std::ofstream(config) << "batch: {job: stock, workers: 2, chunk_size: 20, range: {where: "
                           "\"id > 100\"}}\n"
                           "pacing: {adaptive: false}\n"
                           "operation:\n"
                        << (with_set
                                ? "  set: stock = stock + 1 + (SELECT 0 FROM pg_sleep(0.02))\n"
                                : "  chunk_sql: |\n"
                                  "    WITH s AS (SELECT pg_sleep(0.02)),\n"
                                  "    u AS (UPDATE products SET stock = stock + 1\n"
                                  "          WHERE id = ANY ($1::bigint[]) AND (SELECT true FROM "
                                  "s))\n"
                                  "    INSERT INTO ledger (key) SELECT unnest($1::text[])\n");
  return config;
}

// A stock job's first run, cut mid-pass by `cut` once 400 rows are applied
// (it asserts how the run ended, its log in the folder given); the checkpoints then hold exactly
// what committed, and a second run resumes the pass and applies every row once. Returns the folder
// of the runs' logs.
std::filesystem::path RangeJobTest::CutMidPassThenResume(
    const std::string& name, const std::function<void(pid_t, const std::filesystem::path&)>& cut,
    bool with_set) {
  Seed(3000);
  if (with_set) LedgerByTrigger("NEW.stock = OLD.stock + 1");
  auto dir = std::filesystem::temp_directory_path() / (name + "-" + database_name());
  std::string config = WriteStockJob(dir, with_set);
  pid_t pid = testing::StartBatchRun(conninfo(), config, (dir / "first.log").string());
  if (!testing::WaitUntil([&] { return Count("SELECT count(*) FROM ledger") >= 400; })) {
    ADD_FAILURE() << "the first run applied fewer than 400 rows\n"
                  << testing::Slurp(dir / "first.log");
    return dir;
  }
  cut(pid, dir);
  if (HasFatalFailure()) return dir;
  // A chunk is one server call: the one in flight when the process died
  // commits or rolls back on the server, after the kill. Counted once the
  // run's backends are gone.
  EXPECT_TRUE(testing::WaitUntil([&] {
    return Count(
               "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE "
               "'coexist-batch%' AND datname = current_database()") == 0;
  }));
  long long before = Count("SELECT count(*) FROM ledger");
  EXPECT_LT(before, 2900) << "the first run finished before it was cut";
  EXPECT_EQ(Count("SELECT sum(applied) FROM coexist.range_checkpoints WHERE job = 'stock'"),
            before);
  pid = testing::StartBatchRun(conninfo(), config, (dir / "second.log").string());
  EXPECT_EQ(testing::WaitForExitWithin(pid, 120s), 0) << testing::Slurp(dir / "second.log");
  ExpectEachAppliedOnce("SELECT id FROM products WHERE id > 100", 2900);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE id > 100 AND stock <> 1"), 0);
  return dir;
}

TEST_F(RangeJobTest, KillNineMidPassThenTheNextRunResumesFromTheCheckpoint) {
  auto dir = CutMidPassThenResume("cx-range", [&](pid_t pid, const std::filesystem::path&) {
    ASSERT_NO_FATAL_FAILURE(testing::KillNine(pid));
  });
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE id <= 100 AND stock <> 0"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.range_checkpoints WHERE job = 'stock' AND NOT "
                  "finished"),
            0);
  std::string text = testing::Slurp(dir / "second.log");
  EXPECT_NE(text.find("range pass resumed from its checkpoint"), std::string::npos) << text;
  EXPECT_NE(text.find("range pass finished"), std::string::npos) << text;
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

// The same with operation.set: a chunk's UPDATE and checkpoint commit
// together, so a kill -9 leaves exactly the committed chunks applied.
TEST_F(RangeJobTest, WithOperationSetKillNineMidPassThenTheNextRunResumesEachRowOnce) {
  auto dir = CutMidPassThenResume(
      "cx-range-set",
      [&](pid_t pid, const std::filesystem::path&) {
        ASSERT_NO_FATAL_FAILURE(testing::KillNine(pid));
      },
      true);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE id <= 100 AND stock <> 0"), 0);
  EXPECT_EQ(AppliedBySetStatement(), 2900);
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

// A worker's session ended under a chunk (pg_terminate_backend, as an
// operator or a connection pooler might) while the server stays up: the run
// stops (75) with that chunk rolled back. It never goes on in a session
// libpqxx would open anew without coexist's settings. The next run resumes
// from the checkpoints and every row is applied once.
TEST_F(RangeJobTest, AWorkersSessionEndedMidChunkStopsTheRunAndTheNextResumes) {
  auto dir = CutMidPassThenResume("cx-range-ended", [&](pid_t pid, const std::filesystem::path&) {
    ASSERT_TRUE(testing::WaitUntil([&] {
      return Count(
                 "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE (query "
                 "LIKE '%pg_sleep(0.02)%' OR query LIKE '%pg_temp.coexist_range_chunk(%') AND "
                 "state = 'active' AND pid <> pg_backend_pid()") > 0;
    }));
    EXPECT_EQ(testing::WaitForExitWithin(pid, 60s), 75);
  });
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

// The server stopped at once mid-pass (`pg_ctl stop -m immediate`, a crash
// for the database): the run exits 75, the checkpoints hold exactly the
// chunks that committed, and the next run resumes from them once the
// server is back.
TEST_F(RangeJobTest, AnImmediateServerStopMidPassThenTheNextRunResumesFromTheCheckpoint) {
  auto dir =
      CutMidPassThenResume("cx-range-crash", [&](pid_t pid, const std::filesystem::path& logs) {
        auto& cluster = testing::ClusterEnvironment::Get().cluster();
        cluster.StopServer(db::TempCluster::StopMode::kImmediate);
        auto status = testing::WaitForExitWithin(pid, 60s);
        cluster.StartServer();
        EXPECT_EQ(status, 75) << testing::Slurp(logs / "first.log");
      });
  EXPECT_EQ(Count("SELECT count(DISTINCT pass) FROM coexist.range_checkpoints"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.range_checkpoints WHERE NOT finished"), 0);
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

// The tests below run in both operation forms: chunk_sql, and operation.set
// (the UPDATE coexist writes, with the predicate repeated).
class RangeFormTest : public RangeJobTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RangeFormTest, RowsOnlineWritersHoldBecomeExceptionsDoneLaterWithNoLostUpdate) {
  Seed(600);
  auto config = config::LoadString(PrepareSettleJob(1, 25, GetParam()), "settle.yaml");
  // Installed first: the guard's DDL would wait for the writer below.
  auto conn = Connect();
  InstallGuard(*conn, CheckConfig(*conn, config, kInstallCheck));
  RunOptions options;
  options.install = false;
  // An online writer holds five rows to settle, and adds 100 to their stock.
  auto online = Connect("online-app");
  pqxx::work held(*online);
  held.exec("UPDATE products SET stock = stock + 100 WHERE id IN (30, 90, 150, 300, 597)");
  auto first = batch::Run(conninfo(), config, options);
  ASSERT_TRUE(first.range.has_value());
  EXPECT_TRUE(first.range->finished);
  EXPECT_EQ(first.range->applied, 195);
  EXPECT_EQ(first.range->exceptions, 5);
  // The queue holds only the exceptions; skip_locked deferred them again at
  // the end of the pass (the writer still holds them).
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE job = 'settle'"), 5);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE job = 'settle' AND state = "
                  "'deferred'"),
            5);
  EXPECT_EQ(first.outcome, "incomplete");
  held.commit();
  // The next run's pass leaves the queued keys to the queue, which now
  // applies them.
  QueryValue("UPDATE coexist.queue SET not_before = '-infinity' WHERE job = 'settle'");
  auto second = batch::Run(conninfo(), config, options);
  ASSERT_TRUE(second.range.has_value());
  EXPECT_EQ(second.range->applied, 0);
  EXPECT_EQ(second.counts.done, 5);
  ExpectEachAppliedOnce("SELECT id FROM products WHERE id % 3 = 0", 200);
  // No update lost: the online +100 and the batch's +1 both stand.
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE id IN (30, 90, 150, 300, 597) AND stock "
                  "<> 101"),
            0);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE status = 'to_settle'"), 0);
}

// A configured server whose default isolation is repeatable read (an
// application's choice, made for its own sessions): coexist's sessions work
// in read committed all the same, so a row an online writer changes while a
// chunk runs is rechecked or passed by, never a 40001 that fails the run.
TEST_F(RangeJobTest, OnAServerWhoseDefaultIsRepeatableReadOnlineWritesBesideTheWalkFailNothing) {
  Seed(3000);
  QueryValue("ALTER DATABASE " + database_name() +
             " SET default_transaction_isolation = 'repeatable read'");
  EXPECT_EQ(pqxx::work(*Connect()).exec1("SHOW transaction_isolation")[0].as<std::string>(),
            "read committed");
  std::atomic<bool> done{false};
  std::atomic<long long> writes{0};
  std::thread online([&] {
    auto conn = Connect("online-app");
    for (long long i = 0; !done; ++i) {
      pqxx::work tx(*conn);
      tx.exec("UPDATE products SET stock = stock + 100 WHERE id = " +
              std::to_string(3 * (i % 1000)));
      tx.commit();
      ++writes;
    }
  });
  auto config = config::LoadString(SettleJob(2, 10), "settle.yaml");
  std::optional<RunSummary> run;
  try {
    run = batch::Run(conninfo(), config);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "the run failed: " << e.what();
  }
  done = true;
  online.join();
  ASSERT_TRUE(run.has_value());
  const RunSummary& summary = *run;
  EXPECT_GT(writes.load(), 0);
  ASSERT_TRUE(summary.range.has_value());
  EXPECT_TRUE(summary.range->finished);
  EXPECT_EQ(summary.outcome, "succeeded");
  ExpectEachAppliedOnce("SELECT id FROM products WHERE id % 3 = 0", 1000);
  // Each row's online +100s and the batch's +1 all stand.
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE id % 3 = 0 AND stock % 100 <> 1"), 0);
}

// A chunk whose operation fails (a CHECK the user's table has, for one row)
// is rolled back whole and its rows go to the queue, whose path tries them
// again by halves: every other row is applied once, the failing one is not
// applied at all and stays queued with its error, and the walk goes on.
TEST_P(RangeFormTest, AChunkWhoseOperationFailsIsRolledBackAndOnlyItsFailingRowStaysQueued) {
  Seed(600);
  QueryValue("UPDATE products SET stock = 49 WHERE id = 300");
  QueryValue("ALTER TABLE products ADD CONSTRAINT stock_below_50 CHECK (stock < 50)");
  auto config = config::LoadString(PrepareSettleJob(1, 25, GetParam()), "settle.yaml");
  auto summary = batch::Run(conninfo(), config);
  ASSERT_TRUE(summary.range.has_value());
  EXPECT_TRUE(summary.range->finished);
  EXPECT_EQ(summary.range->applied, 175) << "the failing chunk's 25 rows went to the queue";
  EXPECT_EQ(summary.range->exceptions, 25);
  EXPECT_EQ(summary.counts.done, 199);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 199);
  EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), 199);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger WHERE key = '300'"), 0);
  EXPECT_EQ(Count("SELECT stock FROM products WHERE id = 300"), 49);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE status = 'to_settle'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.queue WHERE job = 'settle' AND record_key = '300' "
                  "AND last_error LIKE '%stock_below_50%'"),
            1);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.queue WHERE job = 'settle'"), 1);
}

// A row with a live edit lock and no row lock (an editor between reading
// and saving): no chunk applies it while the lock lives. The row goes to
// the queue, skip_locked defers it, and once the editor is gone a later run
// applies it.
TEST_P(RangeFormTest, AnEditLockedRowIsNotAppliedWhileTheLockLives) {
  Seed(600);
  auto config = config::LoadString(
      PrepareSettleJob(1, 25, GetParam()) + "policy: {name: skip_locked}\n", "settle.yaml");
  const std::string token =
      QueryValue("SELECT coexist.acquire_edit_lock('products', 300, 'alice', '1 hour')");
  auto first = batch::Run(conninfo(), config);
  ASSERT_TRUE(first.range.has_value());
  EXPECT_TRUE(first.range->finished);
  EXPECT_EQ(first.range->applied, 199);
  EXPECT_EQ(first.range->exceptions, 1);
  EXPECT_EQ(QueryValue("SELECT status || ' ' || stock FROM products WHERE id = 300"),
            "to_settle 0");
  EXPECT_EQ(Count("SELECT count(*) FROM ledger WHERE key = '300'"), 0);
  QueryValue("SELECT coexist.release_edit_lock('products', 300, '" + token + "')");
  QueryValue("UPDATE coexist.queue SET not_before = '-infinity' WHERE job = 'settle'");
  auto second = batch::Run(conninfo(), config);
  EXPECT_EQ(second.counts.done, 1);
  ExpectEachAppliedOnce("SELECT id FROM products WHERE id % 3 = 0", 200);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE stock <> (id % 3 = 0)::int"), 0);
}

// operation.set repeats the predicate: an exception retried from the queue
// after its row stopped matching (the editor cancelled the order) is left
// as the editor saved it.
TEST_F(RangeJobTest, WithOperationSetAQueuedRowThatNoLongerMatchesIsLeftAlone) {
  Seed(600);
  LedgerByTrigger();
  auto config =
      config::LoadString(SettleJobWithSet(1, 25) + "policy: {name: skip_locked}\n", "settle.yaml");
  const std::string token =
      QueryValue("SELECT coexist.acquire_edit_lock('products', 300, 'alice', '1 hour')");
  auto first = batch::Run(conninfo(), config);
  ASSERT_TRUE(first.range.has_value());
  EXPECT_EQ(first.range->exceptions, 1);
  QueryValue("SELECT coexist.release_edit_lock('products', 300, '" + token + "')");
  QueryValue("UPDATE products SET status = 'cancelled' WHERE id = 300");
  QueryValue("UPDATE coexist.queue SET not_before = '-infinity' WHERE job = 'settle'");
  batch::Run(conninfo(), config);
  EXPECT_EQ(QueryValue("SELECT status || ' ' || stock FROM products WHERE id = 300"),
            "cancelled 0");
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 199);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger WHERE key = '300'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.queue WHERE job = 'settle' AND state IN "
                  "('queued', 'deferred')"),
            0);
}

INSTANTIATE_TEST_SUITE_P(BothForms, RangeFormTest, ::testing::Bool(), [](const auto& test_case) {
  return std::string(test_case.param ? "Set" : "ChunkSql");
});

// Every policy walks a range (docs/batch.md, "Range jobs"): the walk takes
// what is free now, and a row an online writer holds or one with a live edit
// lock goes to the queue, where the policy decides it as it decides a queued
// item: online_priority waits for the writer and the editor, batch_priority
// ends the writer and revokes the lock, time_window waits for the row and
// defers the edit-locked one, status_partition and skip_locked defer both.
// Whatever each does, every row ends applied once, no committed online
// update is lost, and nothing is left owned, taken over or locked.
struct RangePolicy {
  const char* name;
  const char* yaml;
  // The first run applies every row: it waits for the writer and the editor
  // or forces them (the others may defer, depending on timing).
  bool first_run_takes_all;
  bool ends_the_writer;  // the online writer's transaction does not commit
  // What another online write sees while the run works: "" (it passes) or
  // the SQLSTATE of its refusal.
  const char* online_sees;
};

// In both operation forms.
class RangePolicyTest : public RangeJobTest,
                        public ::testing::WithParamInterface<std::tuple<RangePolicy, bool>> {};

TEST_P(RangePolicyTest, HeldAndEditLockedRowsGoToThePolicyAndEachRowIsAppliedOnce) {
  const auto& [policy, with_set] = GetParam();
  Seed(600);
  auto config =
      config::LoadString("target: {owner_column: owner}\n" + PrepareSettleJob(2, 25, with_set) +
                             "policy:\n" + policy.yaml,
                         "settle.yaml");
  // Installed first: the guard's DDL would wait for the writer below.
  auto conn = Connect();
  InstallGuard(*conn, CheckConfig(*conn, config, kInstallCheck));
  RunOptions options;
  options.install = false;
  auto online = ConnectOnline("coexist-online-web");
  auto writer = std::make_unique<pqxx::work>(*online);
  writer->exec("UPDATE products SET stock = stock + 100 WHERE id IN (30, 90)");
  const std::string token =
      QueryValue("SELECT coexist.acquire_edit_lock('products', 150, 'alice', '1 hour')");

  RunSummary first;
  std::thread run([&] { first = batch::Run(conninfo(), config, options); });
  // The pass has sent the three rows to the queue; the policy acts on them
  // (batch_priority within its cancel_after), then the writer commits and
  // the editor releases.
  EXPECT_TRUE(testing::WaitUntil(
      [&] { return Count("SELECT count(*) FROM coexist.items WHERE job = 'settle'") >= 3; }, 30s));
  // Another user's write of a row outside the range, while the run works.
  auto other = ConnectOnline("coexist-online-web");
  EXPECT_EQ(testing::SqlStateOf(*other, "UPDATE products SET stock = stock + 1000 WHERE id = 1"),
            policy.online_sees);
  if (policy.ends_the_writer) {
    EXPECT_TRUE(testing::WaitUntil(
        [&] {
          return Count(
                     "SELECT count(*) FROM coexist.events WHERE kind IN"
                     " ('backend_cancelled', 'backend_terminated')") > 0;
        },
        30s));
  } else {
    std::this_thread::sleep_for(700ms);
  }
  bool committed = true;
  try {
    writer->commit();
  } catch (const pqxx::failure&) {
    committed = false;
  }
  writer.reset();
  // A revoked lock is gone already: its release finds nothing to release.
  QueryValue("SELECT coexist.release_edit_lock('products', 150, '" + token + "')");
  run.join();

  ASSERT_TRUE(first.range.has_value());
  EXPECT_TRUE(first.range->finished);
  EXPECT_EQ(first.range->exceptions, 3);
  if (policy.first_run_takes_all) {
    EXPECT_EQ(first.counts.done, 200);
    EXPECT_EQ(first.outcome, "succeeded");
  }
  EXPECT_EQ(committed, !policy.ends_the_writer);
  // What a deferring policy left, later runs apply.
  for (int i = 0; i < 3 && Count("SELECT count(*) FROM coexist.queue WHERE job = 'settle' AND "
                                 "state IN ('queued', 'deferred')") > 0;
       ++i) {
    QueryValue("UPDATE coexist.queue SET not_before = '-infinity' WHERE job = 'settle'");
    batch::Run(conninfo(), config, options);
  }
  ExpectEachAppliedOnce("SELECT id FROM products WHERE id % 3 = 0", 200);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE status = 'to_settle'"), 0);
  // No lost update: the writer's +100, when it committed, and the batch's +1.
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE id IN (30, 90) AND stock <> " +
                  std::to_string(committed ? 101 : 1)),
            0);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE stock <> (id % 3 = 0)::int"
                  " AND id NOT IN (1, 30, 90)"),
            0);
  EXPECT_EQ(QueryValue("SELECT stock FROM products WHERE id = 1"),
            std::string(policy.online_sees).empty() ? "1000" : "0");
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE owner = 'batch'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.takeovers"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.edit_locks"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                  " WHERE c.relname = 'products' AND l.pid <> pg_backend_pid()"),
            0);
}

INSTANTIATE_TEST_SUITE_P(
    EveryPolicy, RangePolicyTest,
    ::testing::Combine(
        ::testing::Values(
            RangePolicy{"skip_locked", "  name: skip_locked\n", false, false, ""},
            RangePolicy{"status_partition", "  name: status_partition\n", false, false, ""},
            RangePolicy{"online_priority", "  name: online_priority\n  max_wait: 20s\n", true,
                        false, ""},
            RangePolicy{"batch_priority",
                        "  name: batch_priority\n  cancel_after: 300ms\n  terminate_after: 1s\n",
                        true, true, ""},
            RangePolicy{"time_window",
                        "  name: time_window\n  mode: read_only\n  drain_margin: 0s\n"
                        "  max_wait: 20s\n  windows:\n"
                        "    - {time_zone: UTC, start: \"00:00\", end: \"00:00\"}\n",
                        false, false, "CX003"}),
        ::testing::Bool()),
    [](const auto& test_case) {
      return std::string(std::get<0>(test_case.param).name) +
             (std::get<1>(test_case.param) ? "_Set" : "_ChunkSql");
    });

TEST_F(RangeJobTest, APredicateTheDatabaseRejectsIsAConfigErrorAtItsPlace) {
  Seed(10);
  const std::string yaml =
      "batch:\n  job: bad\n  range: {where: \"stauts = 'x'\"}\n"
      "operation: {chunk_sql: 'SELECT $1::bigint[]'}\n";
  auto config = config::LoadString(yaml, "bad.yaml");
  try {
    batch::Run(conninfo(), config);
    FAIL() << "ran";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "bad.yaml:3:18: batch.range.where: the database rejects it: ERROR:  column "
              "\"stauts\" does not exist");
    EXPECT_EQ(e.code(), ExitCode::kConfig);
  }
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs"), 0) << "refused before the run began";
  // The same check, before a run: `config check --database` finds it too.
  auto dir = std::filesystem::temp_directory_path() / ("cx-range-bad-" + database_name());
  std::filesystem::create_directories(dir);
  std::string path = (dir / "bad.yaml").string();
  std::ofstream(path) << yaml;
  auto check = RunCommand(
      {COEXIST_BINARY, "--database-url", conninfo(), "config", "check", "--database", path});
  EXPECT_EQ(check.status, 78) << check.output;
  EXPECT_NE(check.output.find(path + ":3:18: batch.range.where: the database rejects it"),
            std::string::npos)
      << check.output;
  // A condition that selects nothing now is said, not refused.
  std::ofstream(path) << "batch:\n  job: bad\n  range: {where: \"stock < 0\"}\n"
                         "operation: {chunk_sql: 'SELECT $1::bigint[]'}\n";
  auto none = RunCommand(
      {COEXIST_BINARY, "--database-url", conninfo(), "config", "check", "--database", path});
  EXPECT_EQ(none.status, 0) << none.output;
  EXPECT_NE(none.output.find("batch.range.where selects no row of public.products now: a run "
                             "walks nothing and succeeds (exit 0)"),
            std::string::npos)
      << none.output;
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

// operation.set is checked before the run as chunk_sql is: a SET list the
// database rejects is a configuration error at its place, and nothing ran.
TEST_F(RangeJobTest, ASetListTheDatabaseRejectsIsAConfigErrorAtItsPlace) {
  Seed(10);
  auto config = config::LoadString(
      "batch:\n  job: bad\n  range: {where: \"true\"}\noperation: {set: \"stauts = 'x'\"}\n",
      "bad.yaml");
  try {
    batch::Run(conninfo(), config);
    FAIL() << "ran";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(
                  "bad.yaml:4:18: operation.set: the database rejects it: ERROR:  column "
                  "\"stauts\" of relation \"products\" does not exist",
                  0),
              0u)
        << e.what();
    EXPECT_NE(e.hint().find("write the SET list of an UPDATE of public.products"),
              std::string::npos)
        << e.hint();
    EXPECT_EQ(e.code(), ExitCode::kConfig);
  }
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs"), 0) << "refused before the run began";
}

}  // namespace
}  // namespace coexist::batch
