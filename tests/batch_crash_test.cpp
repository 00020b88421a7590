// The coexist executable under kill -9, under a PostgreSQL restart, and
// started twice for one job, under every policy: every item must be applied
// exactly once (checked in the operation's ledger), nothing may stay owned by
// the batch or taken over, the next run must go ahead, and a second run of a
// job that is running refuses at once (exit status 4).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>
#include <thread>

#include "common/subprocess.h"
#include "db/cluster.h"
#include "tests/support/batch_process.h"
#include "tests/support/database_test.h"
#include "tests/support/ledger_operation.h"

namespace coexist {
namespace {

using namespace std::chrono_literals;

using testing::WaitForExitWithin;

class BatchCrashTest : public testing::DatabaseTest {
 protected:
  static constexpr long long kItems = 3000;

  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE ledger (key bigint NOT NULL)");
    QueryValue("INSERT INTO products (id, stock) SELECT g, 0 FROM generate_series(101, " +
               std::to_string(kItems) + ") g");
    dir_ = std::filesystem::temp_directory_path() / ("cx-crash-" + database_name());
    std::filesystem::create_directories(dir_);
    config_ = (dir_ / "job.yaml").string();
    WriteConfig("{name: skip_locked}", 2);
    auto status = RunCommand({COEXIST_BINARY, "--database-url", conninfo(), "--config", config_,
                              "enqueue", "--select", "SELECT id FROM products"});
    ASSERT_EQ(status.status, 0) << status.output;
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
    DatabaseTest::TearDown();
  }

  // Fixed chunks of 20 at >= 30 ms each: the run lasts a few seconds.
  void WriteConfig(const std::string& policy, int workers,
                   const std::string& pacing = "{adaptive: false}",
                   const std::string& operation = testing::LedgerOperation("0.03")) {
    // status_partition needs the owner column; the others ignore it.
    std::ofstream(config_) << "target: {owner_column: owner}\n"
                           << "batch: {job: crash, chunk_size: 20, workers: " << workers
                           << "}\n"
                              "pacing: "
                           << pacing << "\npolicy: " << policy << "\n"
                           << operation;
  }

  pid_t StartRun(const std::string& log) {
    return testing::StartBatchRun(conninfo(), config_, (dir_ / log).string());
  }
  void ExpectEveryItemAppliedOnce() {
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), kItems);
    EXPECT_EQ(Count("SELECT count(*) FROM ledger"), kItems);
    EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), kItems);
    EXPECT_EQ(Count("SELECT sum(stock) FROM products WHERE id > 100"), kItems - 100);
    EXPECT_EQ(Count("SELECT count(*) FROM products WHERE owner <> 'online'"), 0);
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.takeovers"), 0);
  }
  // Until `count_sql` reaches `rows` (at most 60 s): a run under way.
  void WaitForCount(const std::string& count_sql, long long rows) {
    testing::WaitUntil([&] { return Count(count_sql) >= rows; });
  }
  void WaitForLedger(long long rows) { WaitForCount("SELECT count(*) FROM ledger", rows); }
  void KillNine(pid_t pid) { testing::KillNine(pid); }
  // A status_partition run (4 workers) killed mid-run, between taking rows
  // over and handing them back: coexist.takeovers is not empty.
  void KillAStatusPartitionRunWithTakeovers() {
    WriteConfig("{name: status_partition}", 4);
    pid_t pid = StartRun("first.log");
    WaitForLedger(300);
    // Kill while a chunk holds takeovers (between its two transactions), not
    // in the gap between chunks. Seen, then killed, the takeovers could be
    // handed back in between on a busy machine: the run is stopped first
    // (SIGSTOP), what it had sent is let finish on the server, and it is
    // killed only if takeovers are still there; otherwise it goes on.
    auto deadline = std::chrono::steady_clock::now() + 60s;
    bool held = false;
    while (!held && std::chrono::steady_clock::now() < deadline) {
      ASSERT_EQ(kill(pid, SIGSTOP), 0);
      WaitForCount(
          "SELECT (count(*) = 0)::int FROM pg_stat_activity WHERE application_name = "
          "'coexist-batch' AND state = 'active' AND wait_event_type IS DISTINCT FROM 'Lock'",
          1);
      held = Count("SELECT count(*) FROM coexist.takeovers") > 0;
      if (!held) {
        ASSERT_EQ(kill(pid, SIGCONT), 0);
        std::this_thread::sleep_for(5ms);
      }
    }
    ASSERT_NO_FATAL_FAILURE(KillNine(pid));
    ASSERT_NE(Count("SELECT count(*) FROM coexist.takeovers"), 0)
        << "the kill left no takeover; make the run slower";
  }
  // pg_ctl restart -m immediate while `pid` runs: every connection breaks
  // at once. Its exit status, or nullopt (and the process killed) when it
  // did not end within 60 s.
  std::optional<int> RestartServerUnder(pid_t pid) {
    auto& cluster = testing::ClusterEnvironment::Get().cluster();
    cluster.StopServer(db::TempCluster::StopMode::kImmediate);
    std::this_thread::sleep_for(300ms);
    cluster.StartServer();
    auto status = WaitForExitWithin(pid, 60s);
    if (!status) {
      kill(pid, SIGKILL);
      WaitForExit(pid);
    }
    return status;
  }
  std::string Log(const std::string& name) {
    std::ifstream in(dir_ / name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // A run killed with kill -9 once 300 items are in the ledger, then the
  // next run to its end, which must apply every item once.
  void KillNineMidRunThenFinish() {
    pid_t pid = StartRun("first.log");
    WaitForLedger(300);
    ASSERT_NO_FATAL_FAILURE(KillNine(pid));
    EXPECT_LT(Count("SELECT count(*) FROM ledger"), kItems) << "the run finished before the kill";
    FinishWithASecondRun();
  }
  // The server restarted -m immediate under a run once 300 items are in the
  // ledger: the run must end with 75, and the next one apply every item once.
  void RestartServerMidRunThenFinish() {
    pid_t pid = StartRun("first.log");
    WaitForLedger(300);
    auto status = RestartServerUnder(pid);
    ASSERT_TRUE(status) << "the run did not end after the restart\n" << Log("first.log");
    EXPECT_EQ(*status, 75) << Log("first.log");
    EXPECT_LT(Count("SELECT count(*) FROM ledger"), kItems)
        << "the run finished before the restart";
    FinishWithASecondRun();
  }
  void FinishWithASecondRun() {
    pid_t pid = StartRun("second.log");
    EXPECT_EQ(WaitForExit(pid), 0) << Log("second.log");
    ExpectEveryItemAppliedOnce();
  }

  std::filesystem::path dir_;
  std::string config_;
};

TEST_F(BatchCrashTest, KillNineMidRunThenRerunAppliesEveryItemOnce) {
  pid_t pid = StartRun("first.log");
  WaitForLedger(300);
  ASSERT_NO_FATAL_FAILURE(KillNine(pid));
  long long before = Count("SELECT count(*) FROM ledger");
  EXPECT_LT(before, kItems) << "the run finished before the kill; make it slower";
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), before);
  EXPECT_EQ(QueryValue("SELECT outcome FROM coexist.runs"), "running");

  pid = StartRun("second.log");
  EXPECT_EQ(WaitForExit(pid), 0);
  ExpectEveryItemAppliedOnce();
  EXPECT_EQ(QueryValue("SELECT string_agg(outcome, ',' ORDER BY run_id) FROM coexist.runs"),
            "abandoned,succeeded");
  // The killed run's row counts every item it did, also those after its
  // last heartbeat (0026): what `runs list` shows.
  EXPECT_EQ(Count("SELECT done FROM coexist.runs WHERE run_id = 1"), before);
  EXPECT_EQ(QueryValue("SELECT details->>'done' FROM coexist.events WHERE kind = 'run_abandoned'"),
            std::to_string(before));
}

// Repeated keys enqueued in one statement (the enqueue marks an item
// behind an earlier one of its key itself, 0027), a third of them with an
// idempotency key (completed as queue rows, the others into done_chunks,
// 0029), on a table that is not ours (its own schema, text keys), with the
// documented unnest style, online writers on the same rows, and a kill -9
// mid-run: every item is applied once, the items of one key in the order
// they were enqueued, and no online update is lost.
TEST_F(BatchCrashTest, RepeatedKeysEnqueuedTogetherKeepTheirOrderAcrossAKillNine) {
  QueryValue(
      "TRUNCATE coexist.queue;"
      "CREATE SCHEMA wh;"
      "CREATE TABLE wh.bins (bin_code text PRIMARY KEY, qty bigint NOT NULL DEFAULT 0,"
      "  version bigint NOT NULL DEFAULT 0);"
      "INSERT INTO wh.bins (bin_code) SELECT 'b' || g FROM generate_series(1, 100) g;"
      "CREATE TABLE wh.moves (seq bigserial, bin_code text NOT NULL, uid text NOT NULL);"
      "SELECT 1");
  std::ofstream(config_) << "target: {table: wh.bins, key_column: bin_code}\n"
                            "batch: {job: bins, chunk_size: 20, workers: 2}\n"
                            "pacing: {adaptive: false}\n"
                            "policy: {name: skip_locked, defer_delay: 0s}\n"
                            "operation:\n"
                            "  chunk_sql: |\n"
                            "    WITH s AS (SELECT pg_sleep(0.03)),\n"
                            "    u AS (UPDATE wh.bins b SET qty = b.qty + u.qty\n"
                            "            FROM unnest($1::text[], $2::bigint[]) AS u(code, qty)\n"
                            "           WHERE b.bin_code = u.code AND (SELECT true FROM s))\n"
                            "    INSERT INTO wh.moves (bin_code, uid)\n"
                            "    SELECT * FROM unnest($1::text[], $3::text[])\n"
                            "  params: [qty, uid]\n";
  // 20 items for each of the 100 bins, in one statement.
  auto enqueue = RunCommand(
      {COEXIST_BINARY, "--database-url", conninfo(), "--config", config_, "enqueue", "--select",
       "SELECT 'b' || (1 + g % 100), jsonb_build_object('qty', g % 5 + 1, 'uid', "
       "'u' || lpad(g::text, 5, '0')), CASE WHEN g % 3 = 0 THEN 'move-' || g END"
       " FROM generate_series(1, 2000) g"});
  ASSERT_EQ(enqueue.status, 0) << enqueue.output;

  // Online users add 1000 to random bins while the batch works.
  std::atomic<bool> stop_online{false};
  std::atomic<long long> online_commits{0};
  std::thread online([&] {
    auto conn = Connect("online-user");
    for (long long i = 0; !stop_online; ++i) {
      try {
        // Read, think while holding the row, write: the batch meets the
        // lock and defers the item, and the later items of its bin wait.
        std::string bin = "b" + std::to_string(1 + (i * 37) % 100);
        pqxx::work tx(*conn);
        tx.exec_params("SELECT qty FROM wh.bins WHERE bin_code = $1 FOR UPDATE", bin);
        std::this_thread::sleep_for(20ms);
        tx.exec_params("UPDATE wh.bins SET qty = qty + 1000 WHERE bin_code = $1", bin);
        tx.commit();
        ++online_commits;
      } catch (const pqxx::sql_error&) {
      }
    }
  });
  pid_t pid = StartRun("first.log");
  WaitForCount("SELECT count(*) FROM wh.moves", 300);
  ASSERT_NO_FATAL_FAILURE(KillNine(pid));
  EXPECT_LT(Count("SELECT count(*) FROM wh.moves"), 2000) << "finished before the kill";
  // Runs until the queue is drained (deferred items wait for the next run).
  for (int run = 0;
       run < 20 && Count("SELECT count(*) FROM coexist.items WHERE state <> 'done'") > 0; ++run) {
    pid = StartRun("second.log");
    EXPECT_LE(WaitForExit(pid), 2) << "see " << (dir_ / "second.log");
    if (run == 0) {
      stop_online = true;
      online.join();
    }
  }
  if (!stop_online) {
    stop_online = true;
    online.join();
  }
  EXPECT_GT(Count("SELECT count(*) FROM coexist.events WHERE kind = 'item_deferred'"), 0)
      << "no item met an online user's lock: the order was not tested";

  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), 2000);
  // A third carry an idempotency key: done rows of the queue (0029), mixed
  // in their chunks with items that went to done_chunks; none in both.
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.queue WHERE state = 'done'"), 666);
  EXPECT_EQ(Count("SELECT count(DISTINCT item_id) FROM coexist.items"), 2000);
  EXPECT_EQ(Count("SELECT count(*) FROM wh.moves"), 2000);
  EXPECT_EQ(Count("SELECT count(DISTINCT uid) FROM wh.moves"), 2000);
  // Per bin, the moves in enqueue order (uid) are the moves in applied order (seq).
  EXPECT_EQ(Count("SELECT count(*) FROM (SELECT uid, row_number() OVER (PARTITION BY bin_code"
                  " ORDER BY seq) AS applied, row_number() OVER (PARTITION BY bin_code ORDER BY"
                  " uid) AS enqueued FROM wh.moves) m WHERE applied <> enqueued"),
            0);
  // No lost update: the items' quantities plus every online commit's 1000.
  EXPECT_EQ(Count("SELECT sum(qty) FROM wh.bins"),
            Count("SELECT sum((payload->>'qty')::bigint) FROM coexist.items") +
                1000 * online_commits.load());
  EXPECT_GT(online_commits.load(), 0);
}

TEST_F(BatchCrashTest, ASecondRunOfTheSameJobRefusesWithStatusFourWhileTheFirstWorks) {
  pid_t first = StartRun("first.log");
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (Count("SELECT count(*) FROM ledger") == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  auto second = RunCommand(
      {COEXIST_BINARY, "--database-url", conninfo(), "--config", config_, "batch", "run"});
  EXPECT_EQ(second.status, 4) << second.output;
  EXPECT_NE(second.output.find("job crash is already running: held by run "), std::string::npos)
      << second.output;
  EXPECT_LT(Count("SELECT count(*) FROM ledger"), kItems) << "the first run ended too soon";

  EXPECT_EQ(WaitForExit(first), 0);
  ExpectEveryItemAppliedOnce();
  EXPECT_EQ(QueryValue("SELECT string_agg(outcome, ',') FROM coexist.runs"), "succeeded")
      << "the refused run must leave no runs row";
  // The lock died with the first run's session: the next run goes ahead.
  EXPECT_EQ(WaitForExit(StartRun("third.log")), 0);
}

// The control connection (it holds the job's and the run's locks) is
// terminated mid-run and a second run starts at once. The first run's
// workers must stop promptly instead of working on unlocked, the second must
// not mark it abandoned while a chunk of it is in flight, and the first must
// complete nothing after it was marked abandoned.
TEST_F(BatchCrashTest, LosingTheControlConnectionStopsTheWorkersAndFencesTheRun) {
  std::ofstream(config_) << "batch: {job: crash, chunk_size: 20, workers: 4}\n"
                            "pacing: {adaptive: false}\n"
                            "policy: {name: skip_locked}\n"
                         << testing::LedgerOperation("0.2");
  pid_t first = StartRun("first.log");
  WaitForLedger(100);
  auto run_id = QueryValue("SELECT max(run_id) FROM coexist.runs");
  auto terminated = QueryValue(
      "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND "
      "granted AND classid = coexist.run_lock_class()::oid AND objid = " +
      run_id);
  ASSERT_EQ(terminated, "1");
  pid_t second = StartRun("second.log");
  auto first_status = WaitForExitWithin(first, 10s);
  if (!first_status) {
    kill(first, SIGKILL);
    WaitForExit(first);
    ADD_FAILURE() << "the first run kept working without its control connection\n"
                  << Log("first.log");
  } else {
    EXPECT_EQ(*first_status, 75) << Log("first.log");
  }
  EXPECT_EQ(WaitForExit(second), 0) << Log("second.log");
  ExpectEveryItemAppliedOnce();
  EXPECT_EQ(QueryValue("SELECT string_agg(outcome, ',' ORDER BY run_id) FROM coexist.runs"),
            "abandoned,succeeded");
  // Nothing completed by the first run after it was marked abandoned, and
  // the two runs never completed items at the same time.
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items q JOIN coexist.runs r USING (run_id)"
                  " WHERE r.run_id = " +
                  run_id + " AND q.done_at > r.ended_at"),
            0);
  EXPECT_EQ(
      QueryValue("SELECT (SELECT max(done_at) FROM coexist.items WHERE run_id = " + run_id +
                 ") < (SELECT min(done_at) FROM coexist.items WHERE run_id > " + run_id + ")"),
      "t");
}

// A session that is not a coexist run takes the job's lock (a stray psql, a
// script of another role). Runs name it and exit 4 at first; once it has
// been connected for longer than batch.busy_timeout they exit 5, which the
// systemd unit does not count as success, with the pid to end.
TEST_F(BatchCrashTest, ASquattedJobLockIsNamedAndBecomesAFailureAfterBusyTimeout) {
  auto squatter = Connect("squatter");
  auto pid = pqxx::nontransaction(*squatter)
                 .exec("SELECT pg_backend_pid(), coexist.try_lock_job('crash')")[0][0]
                 .as<std::string>();
  auto busy = RunCommand(
      {COEXIST_BINARY, "--database-url", conninfo(), "--config", config_, "batch", "run"});
  EXPECT_EQ(busy.status, 4) << busy.output;
  EXPECT_NE(busy.output.find("job crash is already running: held by a session that is not a "
                             "coexist run (pid " +
                             pid + ", role "),
            std::string::npos)
      << busy.output;
  EXPECT_NE(busy.output.find("application_name 'squatter', client local, idle, connected "),
            std::string::npos)
      << busy.output;

  std::string text =
      "batch: {job: crash, chunk_size: 20, workers: 1, busy_timeout: 1s}\n"
      "policy: {name: skip_locked}\n" +
      testing::LedgerOperation("0");
  std::ofstream(config_) << text;
  std::this_thread::sleep_for(2100ms);
  auto stuck = RunCommand(
      {COEXIST_BINARY, "--database-url", conninfo(), "--config", config_, "batch", "run"});
  EXPECT_EQ(stuck.status, 5) << stuck.output;
  EXPECT_NE(stuck.output.find("job crash's lock is held by a session that is not a coexist run"),
            std::string::npos)
      << stuck.output;
  EXPECT_NE(stuck.output.find("SELECT pg_terminate_backend(" + pid + ");"), std::string::npos)
      << stuck.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs"), 0) << "a refused run writes nothing";
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 0);

  squatter.reset();  // the lock goes with the session
  EXPECT_EQ(WaitForExit(StartRun("after.log")), 0) << Log("after.log");
  ExpectEveryItemAppliedOnce();
}

// A status_partition run killed between taking rows over and handing them
// back: online users must not be refused until the next scheduled run. The
// guard lets a write to a record whose takeover no live run holds through,
// and the record is online's again; the next run applies every item once.
TEST_F(BatchCrashTest, AKilledStatusPartitionRunsRowsAreWritableAtOnce) {
  ASSERT_NO_FATAL_FAILURE(KillAStatusPartitionRunWithTakeovers());
  auto key = QueryValue("SELECT min(record_key) FROM coexist.takeovers");
  ASSERT_EQ(QueryValue("SELECT owner FROM products WHERE id = " + key), "batch");

  auto online = Connect("coexist-online");
  EXPECT_EQ(
      testing::SqlStateOf(*online, "UPDATE products SET stock = stock + 1000000 WHERE id = " + key),
      "");
  EXPECT_EQ(QueryValue("SELECT owner FROM products WHERE id = " + key), "online");

  pid_t pid = StartRun("second.log");
  EXPECT_EQ(WaitForExit(pid), 0) << Log("second.log");
  QueryValue("UPDATE products SET stock = stock - 1000000 WHERE id = " + key);
  ExpectEveryItemAppliedOnce();
}

// `coexist runs sweep` clears a dead run's leftovers without waiting for the
// next run: the runs row abandoned, the records handed back, the items
// still queued for the next run. While a run works, it refuses with 4.
TEST_F(BatchCrashTest, RunsSweepHandsBackADeadStatusPartitionRunsRecords) {
  ASSERT_NO_FATAL_FAILURE(KillAStatusPartitionRunWithTakeovers());
  long long queued = Count("SELECT count(*) FROM coexist.items WHERE state = 'queued'");

  auto sweep = RunCommand(
      {COEXIST_BINARY, "--database-url", conninfo(), "--config", config_, "runs", "sweep"});
  EXPECT_EQ(sweep.status, 0) << sweep.output;
  EXPECT_NE(sweep.output.find("1 dead run marked abandoned (1)"), std::string::npos)
      << sweep.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.takeovers"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE owner = 'batch'"), 0);
  EXPECT_EQ(QueryValue("SELECT outcome FROM coexist.runs WHERE run_id = 1"), "abandoned");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'queued'"), queued);

  {
    // Whoever holds the job's lock (a run at work) does the sweeping itself.
    auto holder = Connect("holder");
    pqxx::nontransaction(*holder).exec("SELECT coexist.try_lock_job('crash')");
    sweep = RunCommand(
        {COEXIST_BINARY, "--database-url", conninfo(), "--config", config_, "runs", "sweep"});
    EXPECT_EQ(sweep.status, 4) << sweep.output;
  }
  pid_t pid = StartRun("second.log");
  EXPECT_EQ(WaitForExit(pid), 0) << Log("second.log");
  ExpectEveryItemAppliedOnce();
}

// pacing.synchronous_commit: off. A chunk's apply and its completion commit
// together, so a commit the crash loses (the server's immediate stop drops
// WAL not yet flushed) loses both: the next run applies those items again,
// once. The ledger's tag is the setting each chunk's transaction ran with.
class AsynchronousCommitCrashTest : public BatchCrashTest {
 protected:
  void SetUp() override {
    BatchCrashTest::SetUp();
    QueryValue("ALTER TABLE ledger ADD COLUMN tag text");
    // Only the batch's own SET makes its commits asynchronous.
    MakeCommitsDurable();
    WriteConfig(
        "{name: skip_locked}", 4, "{adaptive: false, synchronous_commit: off}",
        testing::LedgerOperation("0.03", "' || current_setting('synchronous_commit') || '"));
  }
  void ExpectEveryChunkCommittedAsynchronously() {
    EXPECT_EQ(QueryValue("SELECT string_agg(DISTINCT tag, ',') FROM ledger"), "off");
  }
};

TEST_F(AsynchronousCommitCrashTest, KillNineMidRunThenTheNextRunAppliesEveryItemOnce) {
  ASSERT_NO_FATAL_FAILURE(KillNineMidRunThenFinish());
  ExpectEveryChunkCommittedAsynchronously();
}

TEST_F(AsynchronousCommitCrashTest, AnImmediateServerStopMidRunThenTheNextRunAppliesEveryItemOnce) {
  ASSERT_NO_FATAL_FAILURE(RestartServerMidRunThenFinish());
  ExpectEveryChunkCommittedAsynchronously();
}

// Every policy, four workers: killed, restarted under, then run again.
const char* const kPolicies[] = {
    "{name: skip_locked}",
    "{name: online_priority, max_wait: 1s}",
    "{name: batch_priority}",
    "{name: status_partition}",
    // start == end: a 24-hour window, active whenever the test runs.
    "{name: time_window, mode: allow, drain_margin: 0s, windows: "
    "[{time_zone: UTC, start: \"00:00\", end: \"00:00\"}]}",
};

std::string PolicyName(const ::testing::TestParamInfo<const char*>& info) {
  std::string policy = info.param;
  policy = policy.substr(policy.find(": ") + 2);
  return policy.substr(0, policy.find_first_of(",}"));
}

class BatchCrashPolicyTest : public BatchCrashTest,
                             public ::testing::WithParamInterface<const char*> {};

TEST_P(BatchCrashPolicyTest, KillNineMidRunThenTheNextRunHandsBackAndAppliesEveryItemOnce) {
  WriteConfig(GetParam(), 4);
  ASSERT_NO_FATAL_FAILURE(KillNineMidRunThenFinish());
  EXPECT_EQ(QueryValue("SELECT string_agg(outcome, ',' ORDER BY run_id) FROM coexist.runs"),
            "abandoned,succeeded");
}

// pg_ctl restart -m immediate under a run: every connection breaks at once.
// The run must end (exit 75, the database went away) instead of waiting for
// ever, and the next run must go ahead.
TEST_P(BatchCrashPolicyTest, AnImmediateServerRestartEndsTheRunAndTheNextOneFinishes) {
  WriteConfig(GetParam(), 4);
  ASSERT_NO_FATAL_FAILURE(RestartServerMidRunThenFinish());
  EXPECT_EQ(QueryValue("SELECT string_agg(outcome, ',' ORDER BY run_id) FROM coexist.runs"),
            "abandoned,succeeded");
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, BatchCrashPolicyTest, ::testing::ValuesIn(kPolicies),
                         PolicyName);

// Items of several records as a user writes them: the order-settlement
// example's schema (uuid keys, a schema of its own, orders of 2 to 5 lines,
// the orders table under targets:), enqueued by the file's enqueue.select on
// a configured server, with an operation that is NOT idempotent (it settles
// an order whatever its status and logs each settlement), killed -9 or
// restarted under: every order is settled exactly once with all its lines.
class SeveralKeysCrashTest : public BatchCrashTest,
                             public ::testing::WithParamInterface<const char*> {
 protected:
  static constexpr long long kOrders = 600;

  void SetUp() override {
    BatchCrashTest::SetUp();
    std::ifstream schema(std::string(COEXIST_SOURCE_DIR) + "/config/examples/order-settlement.sql");
    QueryValue(std::string(std::istreambuf_iterator<char>(schema), {}));
    QueryValue(
        "CREATE TABLE public.settle_log (order_id uuid NOT NULL);"
        "INSERT INTO shop.products (id, name, stock)"
        "  SELECT md5('p' || g)::uuid, 'product ' || g, 1000000 FROM generate_series(1, 30) g;"
        "INSERT INTO shop.orders (id) SELECT md5('o' || g)::uuid FROM generate_series(1, " +
        std::to_string(kOrders) +
        ") g;"
        "INSERT INTO shop.order_lines (order_id, product_id, qty)"
        "  SELECT md5('o' || g)::uuid, md5('p' || (1 + (g * 7 + l * 11) % 30))::uuid, 1 + (g + l) "
        "% 4"
        "    FROM generate_series(1, " +
        std::to_string(kOrders) + ") g, generate_series(1, 2 + g % 4) l");
    config_ = (dir_ / "orders.yaml").string();
    std::ofstream(config_)
        << "target: {table: shop.products}\n"
           "targets: [{table: shop.orders}]\n"
           "batch: {job: settle-orders, chunk_size: 10, workers: 4}\n"
           "pacing: {adaptive: false}\n"
           "policy: "
        << GetParam()
        << "\n"
           "enqueue:\n"
           "  select: |\n"
           "    SELECT array_agg(l.product_id), jsonb_build_object('order_id', o.id)\n"
           "      FROM shop.orders o JOIN shop.order_lines l ON l.order_id = o.id GROUP BY o.id\n"
           "operation:\n"
           "  keys: many\n"
           "  item_sql: |\n"
           "    WITH s AS (SELECT pg_sleep(0.01)),\n"
           "    o AS (UPDATE shop.orders SET status = 'settled', settled_at = now()\n"
           "           WHERE id = $2::uuid AND (SELECT true FROM s) RETURNING id),\n"
           "    logged AS (INSERT INTO public.settle_log SELECT id FROM o)\n"
           "    UPDATE shop.products p SET stock = p.stock - l.qty\n"
           "      FROM shop.order_lines l JOIN o ON o.id = l.order_id\n"
           "     WHERE p.id = l.product_id\n"
           "  params: [order_id]\n";
    auto enqueued =
        RunCommand({COEXIST_BINARY, "--database-url", conninfo(), "--config", config_, "enqueue"});
    ASSERT_EQ(enqueued.status, 0) << enqueued.output;
  }
  void WaitForSettled(long long orders) {
    WaitForCount("SELECT count(*) FROM public.settle_log", orders);
  }
  void ExpectEveryOrderSettledOnceWithAllItsLines() {
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE job = 'settle-orders' AND state "
                    "<> 'done'"),
              0);
    EXPECT_EQ(Count("SELECT count(*) FROM public.settle_log"), kOrders);
    EXPECT_EQ(Count("SELECT count(DISTINCT order_id) FROM public.settle_log"), kOrders);
    EXPECT_EQ(Count("SELECT count(*) FROM shop.products p WHERE p.stock <> 1000000"
                    " - (SELECT coalesce(sum(l.qty), 0) FROM shop.order_lines l"
                    "     WHERE l.product_id = p.id)"),
              0)
        << "a product's stock is not its start less its lines: a lost, doubled or partial order";
  }
};

TEST_P(SeveralKeysCrashTest, KillNineMidRunThenTheNextRunSettlesEveryOrderOnce) {
  pid_t pid = StartRun("first.log");
  WaitForSettled(60);
  ASSERT_NO_FATAL_FAILURE(KillNine(pid));
  EXPECT_LT(Count("SELECT count(*) FROM public.settle_log"), kOrders)
      << "the run finished before the kill";
  pid = StartRun("second.log");
  EXPECT_EQ(WaitForExit(pid), 0) << Log("second.log");
  ExpectEveryOrderSettledOnceWithAllItsLines();
}

TEST_P(SeveralKeysCrashTest, AnImmediateServerRestartThenTheNextRunSettlesEveryOrderOnce) {
  pid_t pid = StartRun("first.log");
  WaitForSettled(60);
  auto status = RestartServerUnder(pid);
  ASSERT_TRUE(status) << "the run did not end after the restart\n" << Log("first.log");
  EXPECT_EQ(*status, 75) << Log("first.log");
  pid = StartRun("second.log");
  EXPECT_EQ(WaitForExit(pid), 0) << Log("second.log");
  ExpectEveryOrderSettledOnceWithAllItsLines();
}

// The waiting policy, whose chunks hold rows longest (skip_locked passed
// too, adding 20 s to ctest).
INSTANTIATE_TEST_SUITE_P(Waiting, SeveralKeysCrashTest,
                         ::testing::Values("{name: online_priority, max_wait: 1s}"), PolicyName);

}  // namespace
}  // namespace coexist
