// The batch runner under pacing, against a real PostgreSQL: an operator's
// pause over the control socket holds the run within one chunk, `stop`
// leaves nothing claimed, real lock waiters throttle the run until they are
// gone, and a chunk that hits statement_timeout is retried in halves before
// its items are deferred. Progress is read from a ledger the operation
// writes, never from the batch's own counters.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "batch/enqueue.h"
#include "batch/runner.h"
#include "config/config.h"
#include "pacing/control_socket.h"
#include "tests/support/database_test.h"
#include "tests/support/ledger_operation.h"

namespace coexist::batch {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class BatchPacingTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE ledger (key bigint NOT NULL)");
    QueryValue("CREATE TABLE lockbox (id int PRIMARY KEY)");
    QueryValue("INSERT INTO lockbox VALUES (1)");
    // Short: sun_path holds 108 bytes.
    scratch_ = fs::path("/tmp") / ("cxbp-" + std::to_string(getpid()) + "-" + database_name());
    fs::create_directories(scratch_);
    socket_ = (scratch_ / "ctl.sock").string();
  }
  void TearDown() override {
    if (holder_) holder_->abort();
    holder_.reset();
    waiters_.clear();
    fs::remove_all(scratch_);
    DatabaseTest::TearDown();
  }

  // Fixed chunks of `chunk` items, each chunk sleeping `sleep` seconds in
  // the database; fast health re-checks so each phase takes well under a
  // second.
  config::Config Config(int chunk, const std::string& sleep, const std::string& extra = "") {
    std::string yaml = "batch: {job: j, chunk_size: " + std::to_string(chunk) +
                       "}\n"
                       "policy: {name: skip_locked}\n"
                       "pacing:\n"
                       "  adaptive: false\n"
                       "  check_interval: 20ms\n"
                       "  hold_time: 100ms\n"
                       "  max_load: {lock_waiters: 2}\n"
                       "  critical_load: {}\n"
                       "  control_socket: " +
                       socket_ + "\n" + extra + testing::LedgerOperation(sleep);
    return config::LoadString(yaml, "test.yaml");
  }

  void Enqueue(long long from, long long to) {
    std::vector<EnqueueItem> items;
    for (long long k = from; k <= to; ++k) items.push_back({std::to_string(k), "{}", std::nullopt});
    EnqueueItems(conninfo(), "j", items);
  }

  long long Applied() { return Count("SELECT count(*) FROM ledger"); }

  void WaitUntil(const std::function<bool()>& done, const char* what) {
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!done()) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "timed out waiting: " << what;
      std::this_thread::sleep_for(10ms);
    }
  }

  std::string Send(const std::string& command) {
    return pacing::SendControlCommand(socket_, command);
  }
  std::string StatusState() { return nlohmann::json::parse(Send("status"))["state"]; }

  // One session holds lockbox's row; `count` others queue behind it.
  void BlockSessions(int count) {
    holder_conn_ = Connect("lock-holder");
    holder_ = std::make_unique<pqxx::work>(*holder_conn_);
    holder_->exec("SELECT 1 FROM lockbox WHERE id = 1 FOR UPDATE");
    for (int i = 0; i < count; ++i) {
      waiters_.emplace_back([conn = Connect("lock-waiter")] {
        try {
          pqxx::work tx(*conn);
          tx.exec0("UPDATE lockbox SET id = id WHERE id = 1");
          tx.commit();
        } catch (const std::exception&) {
          // TearDown drops the database under it; nothing to check.
        }
      });
    }
    WaitUntil(
        [&] {
          return Count(
                     "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                     "AND wait_event_type = 'Lock'") >= count;
        },
        "lock waiters");
  }
  void ReleaseSessions() {
    holder_->commit();
    holder_.reset();
    waiters_.clear();  // joins
  }

  // "kind:reason" of pacing's events for the run, oldest first.
  std::string PacingEvents() {
    return QueryValue(
        "SELECT coalesce(string_agg(kind || ':' || (details->>'reason'), ',' ORDER BY event_id), "
        "'') FROM coexist.events WHERE actor = 'pacing' AND run_id IS NOT NULL");
  }

  // Nothing is claimed: every item is queued or done, no queue row is
  // locked, and the run is not left running.
  void ExpectNothingClaimed() {
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state NOT IN ('queued', 'done')"), 0);
    EXPECT_EQ(Count("SELECT count(*) FROM (SELECT 1 FROM coexist.queue FOR UPDATE SKIP LOCKED) q"),
              Count("SELECT count(*) FROM coexist.queue"));
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'running'"), 0);
  }

  fs::path scratch_;
  std::string socket_;
  std::unique_ptr<pqxx::connection> holder_conn_;
  std::unique_ptr<pqxx::work> holder_;
  std::vector<std::jthread> waiters_;
};

TEST_F(BatchPacingTest, PauseOverTheSocketHoldsTheRunWithinOneChunkAndStopLeavesNothingClaimed) {
  constexpr int kChunk = 2;
  Enqueue(1, 100);  // 50 chunks of >= 50 ms: the run would take seconds
  auto config = Config(kChunk, "0.05");
  auto run = std::async(std::launch::async, [&] { return batch::Run(conninfo(), config); });
  WaitUntil([&] { return Applied() >= 6; }, "the first chunks");

  auto answer = nlohmann::json::parse(Send("pause"));
  ASSERT_EQ(answer["ok"], true) << answer.dump();
  long long at_pause = Applied();
  std::this_thread::sleep_for(400ms);  // several chunks' worth
  long long held = Applied();
  EXPECT_LE(held - at_pause, kChunk) << "more than the chunk in flight ran after pause";
  EXPECT_EQ(StatusState(), "paused");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(Applied(), held) << "the run went on while paused";

  Send("resume");
  WaitUntil([&] { return Applied() > held; }, "progress after resume");
  Send("stop");
  ASSERT_EQ(run.wait_for(10s), std::future_status::ready) << "stop did not end the run";
  auto summary = run.get();
  EXPECT_EQ(ToString(summary.stop_reason), "operator");
  EXPECT_EQ(summary.outcome, "incomplete");
  EXPECT_EQ(summary.counts.done, Applied());
  EXPECT_GT(summary.queued_left, 0);
  EXPECT_EQ(summary.counts.done + summary.queued_left, 100);
  ExpectNothingClaimed();
  EXPECT_EQ(PacingEvents(), "throttle_start:operator,throttle_stop:operator");
  EXPECT_FALSE(fs::exists(socket_)) << "the run leaves no socket behind";
}

TEST_F(BatchPacingTest, RealLockWaitersAboveMaxLoadHoldTheRunUntilTheyAreGone) {
  Enqueue(1, 20);
  BlockSessions(3);  // max_load is 2 lock waiters
  auto config = Config(5, "0");
  auto run = std::async(std::launch::async, [&] { return batch::Run(conninfo(), config); });
  WaitUntil([&] { return PacingEvents() == "throttle_start:lock_waiters"; }, "the throttle");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(Applied(), 0) << "the batch ran while the database was over max_load";
  EXPECT_EQ(StatusState(), "throttled");

  ReleaseSessions();
  ASSERT_EQ(run.wait_for(10s), std::future_status::ready) << "the run never resumed";
  auto summary = run.get();
  EXPECT_EQ(summary.counts.done, 20);
  EXPECT_EQ(Applied(), 20);
  EXPECT_EQ(PacingEvents(), "throttle_start:lock_waiters,throttle_stop:lock_waiters");
}

TEST_F(BatchPacingTest, AChunkThatTimesOutIsRetriedInHalves) {
  // 8 items at 60 ms each: 480 ms, over the 300 ms statement_timeout; a
  // half (240 ms) fits.
  Enqueue(1, 16);
  auto config = Config(8, "0.06 * cardinality($1::bigint[])");
  config.database.statement_timeout = 300ms;
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.done, 16);
  EXPECT_EQ(summary.counts.deferred, 0);
  EXPECT_EQ(Applied(), 16);
  EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), 16);
}

TEST_F(BatchPacingTest, ItemsOfAChunkThatTimesOutAgainAreDeferredNotFailed) {
  Enqueue(1, 4);
  auto config = Config(4, "0.4");  // every piece times out
  config.database.statement_timeout = 300ms;
  auto summary = batch::Run(conninfo(), config);
  EXPECT_EQ(summary.counts.done, 0);
  EXPECT_EQ(summary.counts.dead, 0);
  EXPECT_EQ(summary.counts.deferred, 4);
  EXPECT_EQ(summary.counts.deferrals_by_reason.at("timeout"), 4);
  EXPECT_EQ(Applied(), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'deferred' AND attempts = 0 "
                  "AND defer_reason = 'timeout'"),
            4);
}

}  // namespace
}  // namespace coexist::batch
