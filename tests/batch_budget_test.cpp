// A run's budgets against a real PostgreSQL (docs/batch.md, "Run budgets"):
// batch.max_items applies exactly that many items across the run's workers
// (queued and range jobs), batch.max_duration stops claiming once it has
// passed (a paused run too), batch.max_rate holds the run's pace down. Each
// leaves nothing owned: the items it did not take stay queued, untouched.
// What was applied is read from a ledger the operation writes.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "batch/enqueue.h"
#include "batch/runner.h"
#include "config/config.h"
#include "tests/support/batch_process.h"
#include "tests/support/database_test.h"

namespace coexist::batch {
namespace {

using namespace std::chrono_literals;

class BatchBudgetTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE ledger (key text NOT NULL, at timestamptz NOT NULL DEFAULT now())");
    scratch_ = std::filesystem::temp_directory_path() / ("coexist-budget-" + database_name());
    std::filesystem::create_directories(scratch_);
  }
  void TearDown() override {
    std::filesystem::remove_all(scratch_);
    DatabaseTest::TearDown();
  }

  // Job j over products: `batch_keys` go into batch: {...}, `pacing_keys`
  // into pacing: {...}; the operation adds 1 to stock and writes one ledger
  // row per key, after `sleep` seconds per chunk.
  static std::string Yaml(const std::string& batch_keys, const std::string& more = "",
                          double sleep = 0, const std::string& pacing_keys = "") {
    return "batch: {job: j, " + batch_keys +
           "}\n"
           "pacing: {adaptive: false" +
           pacing_keys + "}\n" + more +
           "operation:\n"
           "  chunk_sql: |\n"
           "    WITH s AS (SELECT pg_sleep(" +
           std::to_string(sleep) +
           ")),\n"
           "         u AS (UPDATE products SET stock = stock + 1\n"
           "                WHERE id = ANY ($1::bigint[]) AND (SELECT true FROM s))\n"
           "    INSERT INTO ledger (key) SELECT unnest($1::text[])\n";
  }

  // Items 1..`items`, each naming a product that exists.
  void Enqueue(long long items) {
    QueryValue("INSERT INTO products (id, stock) SELECT g, 1000 FROM generate_series(1, " +
               std::to_string(items) + ") g ON CONFLICT (id) DO NOTHING");
    std::vector<EnqueueItem> list;
    for (long long k = 1; k <= items; ++k) list.push_back({std::to_string(k), "{}", std::nullopt});
    EnqueueItems(conninfo(), "j", list);
  }

  // Each applied key once in the ledger and done in the queue; every other
  // item queued as it was enqueued (no attempt, no deferral, no run); no
  // record left to the batch; the runs row says why the run stopped.
  void ExpectExactlyAppliedAndNothingOwned(long long applied, long long enqueued,
                                           const RunSummary& summary) {
    EXPECT_EQ(Count("SELECT count(*) FROM ledger"), applied);
    EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), applied);
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), applied);
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.items i WHERE state = 'done' AND NOT EXISTS "
                    "(SELECT 1 FROM ledger l WHERE l.key = i.record_key)"),
              0);
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'queued' AND attempts = 0 "
                    "AND deferrals = 0 AND run_id IS NULL"),
              enqueued - applied);
    EXPECT_EQ(Count("SELECT count(*) FROM products WHERE owner <> 'online'"), 0);
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.takeovers"), 0);
    EXPECT_EQ(QueryValue("SELECT outcome || ' ' || (details->>'stop_reason') FROM coexist.runs "
                         "WHERE run_id = " +
                         std::to_string(summary.run_id)),
              summary.outcome + " " + std::string(ToString(summary.stop_reason)));
  }

  std::filesystem::path scratch_;
};

TEST_F(BatchBudgetTest, MaxItemsAppliesExactlyThatManyAcrossTwoWorkers) {
  Enqueue(100);
  auto config =
      config::LoadString(Yaml("workers: 2, chunk_size: 10, max_items: 25"), "budget.yaml");
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.stop_reason, StopReason::kMaxItems);
  EXPECT_EQ(summary.counts.done, 25);
  EXPECT_EQ(summary.counts.claimed, 25);
  EXPECT_EQ(summary.queued_left, 75);
  EXPECT_EQ(summary.outcome, "incomplete");
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kItemsDeferred);
  ExpectExactlyAppliedAndNothingOwned(25, 100, summary);
  EXPECT_EQ(QueryValue("SELECT details->>'max_items' FROM coexist.runs"), "25");

  // The next run goes on with the queue: 25 more.
  auto next = batch::Run(conninfo(), config);
  EXPECT_EQ(next.counts.done, 25);
  ExpectExactlyAppliedAndNothingOwned(50, 100, next);
}

// status_partition takes records over in one transaction and applies them
// in a second: the budget counts what the chunk settled, and every record
// is handed back.
TEST_F(BatchBudgetTest, MaxItemsUnderStatusPartitionHandsEveryRecordBack) {
  Enqueue(60);
  auto config = config::LoadString(Yaml("workers: 2, chunk_size: 8, max_items: 13",
                                        "target: {owner_column: owner}\n"
                                        "policy: {name: status_partition}\n"),
                                   "budget.yaml");
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.stop_reason, StopReason::kMaxItems);
  EXPECT_EQ(summary.counts.done, 13);
  ExpectExactlyAppliedAndNothingOwned(13, 60, summary);
}

// A budget larger than the queue: the run drains it and says so.
TEST_F(BatchBudgetTest, MaxItemsBeyondTheQueueDrainsIt) {
  Enqueue(30);
  auto summary =
      batch::Run(conninfo(),
                 config::LoadString(Yaml("workers: 2, chunk_size: 10, max_items: 1000"), "b.yaml"));
  EXPECT_EQ(summary.stop_reason, StopReason::kDrained);
  EXPECT_EQ(summary.counts.done, 30);
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kOk);
}

// A range job counts the rows its walk applies the same way; the pass
// stops where the budget ran out and the next run resumes it.
TEST_F(BatchBudgetTest, MaxItemsCountsARangeJobsRowsAndTheNextRunResumes) {
  QueryValue("ALTER TABLE products ADD COLUMN status text NOT NULL DEFAULT 'new'");
  QueryValue(
      "INSERT INTO products (id, stock) SELECT g, 0 FROM generate_series(1, 1000) g "
      "ON CONFLICT (id) DO NOTHING");
  QueryValue("UPDATE products SET status = 'to_settle' WHERE id % 3 = 0");
  auto job = [](const std::string& budget) {
    return "batch: {job: settle, workers: 2, chunk_size: 7, " + budget +
           "range: {where: \"status = 'to_settle'\"}}\n"
           "pacing: {adaptive: false}\n"
           "operation:\n"
           "  chunk_sql: |\n"
           "    WITH u AS (UPDATE products SET status = 'settled'\n"
           "               WHERE id = ANY ($1::bigint[]))\n"
           "    INSERT INTO ledger (key) SELECT unnest($1::text[])\n";
  };
  auto summary = batch::Run(conninfo(), config::LoadString(job("max_items: 50, "), "settle.yaml"));
  EXPECT_EQ(summary.stop_reason, StopReason::kMaxItems);
  ASSERT_TRUE(summary.range.has_value());
  EXPECT_FALSE(summary.range->finished);
  EXPECT_EQ(summary.range->applied, 50);
  EXPECT_EQ(summary.counts.done, 50);
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kItemsDeferred);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 50);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE status = 'settled'"), 50);

  auto rest = batch::Run(conninfo(), config::LoadString(job(""), "settle.yaml"));
  EXPECT_TRUE(rest.range->resumed);
  EXPECT_TRUE(rest.range->finished);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 333);
  EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), 333);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE status = 'to_settle'"), 0);
}

// 1000 chunks of one item at 50 ms each over two workers would take 25 s:
// the run stops claiming after 1 s, finishes the chunks in hand and ends.
// The bounds after the deadline are generous (a chunk is 50 ms), and a run
// that ignored the deadline would take 25 s at least.
TEST_F(BatchBudgetTest, MaxDurationStopsClaimingAndLeavesNothingOwned) {
  Enqueue(1000);
  auto config = config::LoadString(Yaml("workers: 2, chunk_size: 1, max_duration: 1s", "", 0.05),
                                   "budget.yaml");
  auto started = std::chrono::steady_clock::now();
  auto summary = batch::Run(conninfo(), config);
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(summary.stop_reason, StopReason::kMaxDuration);
  EXPECT_GE(took, 1s);
  EXPECT_LT(took, 15s) << "claiming stops at the deadline; only the chunks in hand finish";
  EXPECT_GT(summary.queued_left, 0);
  EXPECT_EQ(summary.outcome, "incomplete");
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kItemsDeferred);
  ExpectExactlyAppliedAndNothingOwned(summary.counts.done, 1000, summary);
  // No chunk started long after the deadline (the runs row is written after
  // the run's clock starts, so its start is later than the deadline's
  // origin; 5 s spare for a busy machine between the check and BEGIN).
  EXPECT_EQ(Count("SELECT count(*) FROM ledger, coexist.runs r "
                  "WHERE ledger.at > r.started_at + interval '6 s'"),
            0);
}

// A run held by a pause claims nothing, and still ends at its deadline:
// the pause does not keep it past max_duration. The stop flag only guards
// the test against a run that would wait for the pause for ever.
TEST_F(BatchBudgetTest, MaxDurationEndsARunHeldByAPause) {
  Enqueue(10);
  auto pause = scratch_ / "pause";
  std::ofstream(pause) << "held\n";
  auto config = config::LoadString(
      Yaml("workers: 2, max_duration: 1s", "", 0, ", pause_file: " + pause.string()),
      "budget.yaml");
  std::atomic<bool> stop{false};
  std::jthread guard([&](std::stop_token token) {
    auto until = std::chrono::steady_clock::now() + 60s;
    while (!token.stop_requested() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(20ms);
    }
    stop = true;
  });
  auto summary = batch::Run(conninfo(), config, {.stop = &stop});
  guard.request_stop();
  EXPECT_EQ(summary.stop_reason, StopReason::kMaxDuration);
  EXPECT_EQ(summary.counts.claimed, 0);
  ExpectExactlyAppliedAndNothingOwned(0, 10, summary);
}

// 200 items at 100 per second over two workers: the bucket's burst is 10
// items, so the last chunk cannot start before (200 - 10) / 100 = 1.9 s
// after the first. Checked as a lower bound only (a busy machine is slower).
TEST_F(BatchBudgetTest, MaxRateCapsTheRunsPaceAcrossItsWorkers) {
  Enqueue(200);
  auto config =
      config::LoadString(Yaml("workers: 2, chunk_size: 50, max_rate: 100"), "budget.yaml");
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.stop_reason, StopReason::kDrained) << "a rate caps, it never stops";
  EXPECT_EQ(summary.counts.done, 200);
  EXPECT_EQ(ExitCodeOf(summary), ExitCode::kOk);
  ExpectExactlyAppliedAndNothingOwned(200, 200, summary);
  double span =
      std::stod(QueryValue("SELECT extract(epoch FROM max(at) - min(at))::float8 FROM ledger"));
  EXPECT_GE(span, 1.5);
  EXPECT_LE(Count("SELECT max(n) FROM (SELECT count(*) AS n FROM ledger GROUP BY at) c"), 10)
      << "no chunk holds more than the bucket's burst";
}

// Keys that repeat (three items per product) and a run killed -9 in the
// middle of its budget: the chunk in hand rolls back with its completion,
// the next runs take the dead run's items back, each run applies at most
// its budget, and every item is applied once (three ledger rows a key).
TEST_F(BatchBudgetTest, KeysThatRepeatAndAKillNineMidBudgetApplyEveryItemOnce) {
  QueryValue(
      "INSERT INTO products (id, stock) SELECT g, 1000 FROM generate_series(1, 20) g"
      " ON CONFLICT (id) DO NOTHING");
  std::vector<EnqueueItem> items;
  for (int round = 0; round < 3; ++round) {
    for (int k = 1; k <= 20; ++k) items.push_back({std::to_string(k), "{}", std::nullopt});
  }
  EnqueueItems(conninfo(), "j", items);
  auto yaml = Yaml("workers: 2, chunk_size: 4, max_items: 30", "", 0.2);
  auto file = scratch_ / "budget.yaml";
  std::ofstream(file) << yaml;
  pid_t pid = testing::StartBatchRun(conninfo(), file.string(), (scratch_ / "run.log").string());
  ASSERT_TRUE(testing::WaitUntil([&] { return Count("SELECT count(*) FROM ledger") >= 4; }));
  testing::KillNine(pid);
  long long after_kill = Count("SELECT count(*) FROM ledger");
  EXPECT_LT(after_kill, 30) << "killed before its budget was spent";

  auto config = config::LoadString(yaml, "budget.yaml");
  for (int run = 0;
       run < 10 && Count("SELECT count(*) FROM coexist.items WHERE state <> 'done'") > 0; ++run) {
    long long before = Count("SELECT count(*) FROM ledger");
    auto summary = batch::Run(conninfo(), config);
    EXPECT_LE(summary.counts.done, 30) << "run " << run;
    EXPECT_EQ(Count("SELECT count(*) FROM ledger") - before, summary.counts.done) << "run " << run;
  }
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state <> 'done'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 60);
  EXPECT_EQ(Count("SELECT count(*) FROM (SELECT key FROM ledger GROUP BY key"
                  " HAVING count(*) <> 3) k"),
            0);
  EXPECT_EQ(Count("SELECT sum(stock) FROM products WHERE id <= 20"), 20 * 1000 + 60);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE owner <> 'online'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.takeovers"), 0);
}

// `batch run` as an operator sees it: exit status 2 (claiming stopped
// early with items still queued) and the reason in its summary.
TEST_F(BatchBudgetTest, BatchRunExitsTwoAndNamesTheBudget) {
  Enqueue(20);
  auto file = scratch_ / "budget.yaml";
  std::ofstream(file) << Yaml("workers: 2, chunk_size: 5, max_items: 7");
  auto log = scratch_ / "run.log";
  pid_t pid = testing::StartBatchRun(conninfo(), file.string(), log.string());
  EXPECT_EQ(WaitForExit(pid), 2);
  std::ifstream in(log);
  std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(output.find("claiming stopped: max_items\n"), std::string::npos) << output;
  EXPECT_NE(output.find("the run's budget (batch.max_items) is spent"), std::string::npos)
      << output;
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 7);
}

}  // namespace
}  // namespace coexist::batch
