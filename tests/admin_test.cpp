// Operators' commands against a real PostgreSQL: edit-lock release with its
// audit rows, the expiry sweep, queue status, retry of dead items, runs.

#include "admin/edit_locks.h"
#include "admin/queue.h"
#include "tests/support/database_test.h"

namespace coexist::admin {
namespace {

using coexist::testing::DatabaseTest;
using std::chrono::milliseconds;

class Admin : public DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    conn_ = Connect();
  }
  std::string Lock(long long key, const std::string& owner, const std::string& ttl = "1 hour") {
    return QueryValue("SELECT coexist.acquire_edit_lock('products', " + std::to_string(key) +
                      ", '" + owner + "', '" + ttl + "')");
  }
  std::unique_ptr<pqxx::connection> conn_;
};

TEST_F(Admin, ReleaseByRecordOwnerAndAgeIsAudited) {
  Lock(1, "alice");
  Lock(2, "alice");
  Lock(3, "bob");
  Lock(4, "carol");
  QueryValue(
      "UPDATE coexist.edit_locks SET acquired_at = now() - interval '3 hours' WHERE record_key = "
      "4");

  auto by_record =
      ReleaseEditLocks(*conn_, {.target = "products", .record_key = 3}, "admin:test@host");
  ASSERT_EQ(by_record.size(), 1u);
  EXPECT_EQ(by_record[0].owner, "bob");
  auto by_owner = ReleaseEditLocks(*conn_, {.owner = "alice"}, "admin:test@host");
  EXPECT_EQ(by_owner.size(), 2u);
  auto by_age =
      ReleaseEditLocks(*conn_, {.older_than = milliseconds(2 * 3600 * 1000)}, "admin:test@host");
  ASSERT_EQ(by_age.size(), 1u);
  EXPECT_EQ(by_age[0].owner, "carol");
  EXPECT_TRUE(ListEditLocks(*conn_, true).empty());
  EXPECT_EQ(QueryValue("SELECT string_agg(subject || ':' || record_key, ',' ORDER BY record_key) "
                       "FROM coexist.events"
                       " WHERE kind = 'edit_lock_released_by_admin' AND actor = 'admin:test@host'"
                       " AND details ? 'token'"),
            "alice:1,alice:2,bob:3,carol:4");
}

TEST_F(Admin, ReleaseWithNoMatchChangesNothing) {
  Lock(5, "alice");
  EXPECT_TRUE(ReleaseEditLocks(*conn_, {.owner = "nobody"}, "admin:test").empty());
  EXPECT_EQ(ListEditLocks(*conn_, false).size(), 1u);
  EXPECT_EQ(QueryValue("SELECT count(*) FROM coexist.events"), "0");
}

TEST_F(Admin, ListShowsLiveLocksAndSweepRemovesExpiredOnes) {
  Lock(6, "alice");
  Lock(7, "bob", "1 millisecond");
  QueryValue("SELECT pg_sleep(0.01)");
  auto live = ListEditLocks(*conn_, false);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].owner, "alice");
  EXPECT_EQ(live[0].target, "products");
  EXPECT_EQ(ListEditLocks(*conn_, true).size(), 2u);
  EXPECT_EQ(SweepExpiredEditLocks(*conn_, "sweep"), 1);
  EXPECT_EQ(ListEditLocks(*conn_, true).size(), 1u);
  EXPECT_EQ(QueryValue("SELECT subject FROM coexist.events WHERE kind = 'edit_lock_expired'"),
            "bob");
}

TEST_F(Admin, QueueStatusCountsStatesReasonsAndDeadErrors) {
  QueryValue(
      "INSERT INTO coexist.queue (job, record_key, state, defer_reason, last_error) VALUES"
      " ('nightly', 1, 'queued', NULL, NULL), ('nightly', 2, 'deferred', 'edit_locked', NULL),"
      " ('nightly', 3, 'deferred', 'edit_locked', NULL), ('nightly', 4, 'dead', NULL, 'division by "
      "zero'),"
      " ('nightly', 5, 'dead', NULL, 'division by zero'), ('other', 6, 'done', NULL, NULL)");
  auto all = ReadQueueStatus(*conn_, "");
  ASSERT_EQ(all.jobs.size(), 2u);
  const auto& nightly = all.jobs[0];
  EXPECT_EQ(nightly.job, "nightly");
  EXPECT_EQ(nightly.by_state.at("queued"), 1);
  EXPECT_EQ(nightly.by_state.at("deferred"), 2);
  EXPECT_EQ(nightly.by_state.at("dead"), 2);
  EXPECT_EQ(nightly.defer_reasons.at("edit_locked"), 2);
  ASSERT_TRUE(nightly.oldest_queued_seconds.has_value());
  ASSERT_EQ(all.top_dead_errors.size(), 1u);
  EXPECT_EQ(all.top_dead_errors[0].items, 2);
  EXPECT_EQ(all.top_dead_errors[0].error, "division by zero");
  EXPECT_FALSE(all.jobs[1].oldest_queued_seconds.has_value()) << "job 'other' has nothing waiting";

  EXPECT_EQ(RetryDeadItems(*conn_, "nightly", "admin:test"), 2);
  EXPECT_EQ(
      QueryValue("SELECT count(*) FROM coexist.queue WHERE state = 'queued' AND attempts = 0"),
      "3");
  EXPECT_EQ(QueryValue("SELECT details->>'items' FROM coexist.events WHERE kind = 'items_retried'"),
            "2");
  EXPECT_EQ(RetryDeadItems(*conn_, "nightly", "admin:test"), 0);
}

TEST_F(Admin, RunsListAndShow) {
  QueryValue(
      "INSERT INTO coexist.runs (job, policy, host, pid, outcome, done, ended_at) VALUES"
      " ('nightly', 'skip_locked', 'h1', 10, 'succeeded', 100, now()),"
      " ('nightly', 'skip_locked', 'h1', 11, 'incomplete', 90, now()), ('other', 'time_window', "
      "'h2', 12, 'running', 0, NULL)");
  QueryValue(
      "INSERT INTO coexist.events (kind, run_id) VALUES ('item_deferred', 2), ('item_deferred', "
      "2)");
  auto runs = ListRuns(*conn_, "nightly", 10);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].run_id, 2) << "newest first";
  EXPECT_EQ(runs[0].outcome, "incomplete");
  EXPECT_EQ(ListRuns(*conn_, "", 1).size(), 1u);
  auto shown = ShowRun(*conn_, 2);
  ASSERT_TRUE(shown.has_value());
  EXPECT_EQ(shown->run.done, 90);
  EXPECT_EQ(shown->events_by_kind.at("item_deferred"), 2);
  EXPECT_FALSE(ShowRun(*conn_, 99).has_value());
}

}  // namespace
}  // namespace coexist::admin
