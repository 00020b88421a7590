// Operators' commands against a real PostgreSQL: edit-lock release with its
// audit rows, the expiry sweep, queue status, retry of dead items, purge of
// old rows, runs.

#include <atomic>

#include "admin/edit_locks.h"
#include "schema/queue_store_ops.h"
#include "tests/support/database_test.h"

namespace coexist::admin {
namespace {

using db::kPurgeBatchRows;
using db::ListRuns;
using db::PurgeOldRows;
using db::ReadQueueStatus;
using db::RetryDeadItems;
using db::ShowRun;

using coexist::testing::DatabaseTest;
using std::chrono::hours;
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
      "'4'");

  auto by_record =
      ReleaseEditLocks(*conn_, {.target = "products", .record_key = "3"}, "admin:test@host");
  ASSERT_EQ(by_record.size(), 1u);
  EXPECT_EQ(by_record[0].owner, "bob");
  auto by_owner = ReleaseEditLocks(*conn_, {.owner = "alice"}, "admin:test@host");
  EXPECT_EQ(by_owner.size(), 2u);
  auto by_age =
      ReleaseEditLocks(*conn_, {.older_than = milliseconds(2 * 3600 * 1000)}, "admin:test@host");
  ASSERT_EQ(by_age.size(), 1u);
  EXPECT_EQ(by_age[0].owner, "carol");
  EXPECT_TRUE(ListEditLocks(*conn_, true).empty());
  EXPECT_EQ(
      QueryValue("SELECT string_agg(subject || ':' || record_key, ',' ORDER BY record_key::bigint) "
                 "FROM coexist.events"
                 " WHERE kind = 'edit_lock_released_by_admin' AND actor = 'admin:test@host'"
                 " AND details ? 'token'"),
      "alice:1,alice:2,bob:3,carol:4");
}

// The command and the SQL function an application calls are one release:
// the same audit record, the same NOTIFY.
TEST_F(Admin, CommandAndSqlFunctionAuditAReleaseAlike) {
  Lock(8, "dave");
  Lock(9, "erin");
  ReleaseEditLocks(*conn_, {.target = "products", .record_key = "8"}, "admin:test@host");
  EXPECT_EQ(QueryValue("SELECT coexist.admin_release_edit_lock('products', 9, 'admin:sql')"), "t");
  EXPECT_EQ(QueryValue("SELECT string_agg(subject || ':' || (SELECT string_agg(k, ',' ORDER BY k)"
                       " FROM jsonb_object_keys(details) AS k), ';' ORDER BY record_key::bigint)"
                       " FROM coexist.events WHERE kind = 'edit_lock_released_by_admin'"),
            "dave:acquired_at,token;erin:acquired_at,token");
  EXPECT_EQ(QueryValue("SELECT coexist.admin_release_edit_lock('products', 9, 'admin:sql')"), "f");
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
  // A job whose items all left the queue for done chunks (0029) is listed.
  QueryValue(
      "INSERT INTO coexist.done_chunks (job, run_id, done_at, item_ids, record_keys, item_keys,"
      " attempts, payloads) VALUES ('other', 1, now(), '{7,8}', '{7,8}', '{NULL,NULL}', '{1,1}',"
      " ARRAY['{}', '{}']::jsonb[]), ('zzz', 1, now(), '{9}', '{9}', '{NULL}', '{1}',"
      " ARRAY['{}']::jsonb[])");
  auto all = ReadQueueStatus(*conn_, "");
  ASSERT_EQ(all.jobs.size(), 3u);
  EXPECT_EQ(all.jobs[1].by_state.at("done"), 3) << "one done row, two done in a chunk";
  EXPECT_EQ(all.jobs[2].job, "zzz");
  EXPECT_EQ(all.jobs[2].by_state.at("done"), 1);
  EXPECT_EQ(all.jobs[2].by_state.at("queued"), 0);
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
  EXPECT_TRUE(all.top_retry_errors.empty());
  // An item that failed once and waits for its next try shows its error too.
  QueryValue(
      "UPDATE coexist.queue SET attempts = 1, last_error = 'null value in column' "
      "WHERE record_key = '1'");
  auto failing = ReadQueueStatus(*conn_, "nightly");
  ASSERT_EQ(failing.top_retry_errors.size(), 1u);
  EXPECT_EQ(failing.top_retry_errors[0].items, 1);
  EXPECT_EQ(failing.top_retry_errors[0].error, "null value in column");
  QueryValue("UPDATE coexist.queue SET attempts = 0, last_error = NULL WHERE record_key = '1'");

  EXPECT_EQ(RetryDeadItems(*conn_, "nightly", "admin:test"), 2);
  EXPECT_EQ(
      QueryValue("SELECT count(*) FROM coexist.items WHERE state = 'queued' AND attempts = 0"),
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

TEST_F(Admin, PurgeDeletesOnlyOldDoneItemsEventsAndFinishedRuns) {
  // More old done items than two purge statements take.
  const long long old_done = 2 * kPurgeBatchRows + 100;
  QueryValue(
      "INSERT INTO coexist.queue (job, record_key, state, done_at)"
      " SELECT 'nightly', g, 'done', now() - interval '8 days'"
      " FROM generate_series(1, " +
      std::to_string(old_done) + ") g");
  // Kept: a recent done item, and waiting or dead items however old.
  QueryValue(
      "INSERT INTO coexist.queue (job, record_key, state, done_at, enqueued_at, updated_at)"
      " SELECT 'kept', k, s::coexist.item_state, now() - d, now() - interval '100 days',"
      " now() - interval '100 days'"
      " FROM (VALUES (1, 'done', interval '6 days'), (2, 'queued', interval '100 days'),"
      " (3, 'deferred', interval '100 days'), (4, 'dead', interval '100 days')) v(k, s, d)");
  QueryValue(
      "INSERT INTO coexist.events (kind, at) VALUES ('item_deferred', now() - interval '31 days'),"
      " ('edit_lock_revoked', now() - interval '40 days'), ('escalation', now() - interval '1 "
      "year'),"
      " ('kept_event', now() - interval '29 days')");
  QueryValue(
      "INSERT INTO coexist.runs (job, policy, host, pid, outcome, started_at, ended_at) VALUES"
      " ('old', 'skip_locked', 'h', 1, 'succeeded', now() - interval '92 days',"
      "  now() - interval '91 days'),"
      " ('old', 'skip_locked', 'h', 2, 'abandoned', now() - interval '100 days',"
      "  now() - interval '99 days'),"
      " ('kept', 'skip_locked', 'h', 3, 'running', now() - interval '100 days', NULL),"
      " ('kept', 'skip_locked', 'h', 4, 'failed', now() - interval '2 days', now() - interval "
      "'1 day')");

  // Done chunks (0029): an old one goes whole, counted as its items; a
  // recent one stays.
  QueryValue(
      "INSERT INTO coexist.done_chunks (job, run_id, done_at, item_ids, record_keys, item_keys,"
      " attempts, payloads) VALUES"
      " ('nightly', 1, now() - interval '8 days', '{101,102,103}', '{101,102,103}',"
      "  '{NULL,NULL,NULL}', '{1,1,1}', ARRAY['{}', '{}', '{}']::jsonb[]),"
      " ('kept', 1, now() - interval '6 days', '{104}', '{104}', '{NULL}', '{1}',"
      "  ARRAY['{}']::jsonb[])");

  auto purged =
      PurgeOldRows(*conn_, {hours(7 * 24), hours(30 * 24), hours(90 * 24)}, "admin:test@host");
  EXPECT_EQ(purged.done_items, old_done + 3);
  EXPECT_EQ(QueryValue("SELECT string_agg(item_ids::text, ',') FROM coexist.done_chunks"), "{104}");
  EXPECT_EQ(purged.events, 3);
  EXPECT_EQ(purged.runs, 2);
  EXPECT_EQ(
      QueryValue(
          "SELECT string_agg(state::text, ',' ORDER BY record_key::bigint) FROM coexist.items"),
      "done,queued,deferred,dead,done");
  EXPECT_EQ(QueryValue("SELECT string_agg(kind, ',' ORDER BY event_id) FROM coexist.events"),
            "kept_event,queue_purged");
  EXPECT_EQ(QueryValue("SELECT actor || ' ' || details::text FROM coexist.events"
                       " WHERE kind = 'queue_purged'"),
            "admin:test@host {\"runs\": 2, \"events\": 3, \"done_items\": " +
                std::to_string(old_done + 3) + "}");
  EXPECT_EQ(QueryValue("SELECT string_agg(job, ',') FROM coexist.runs"), "kept,kept");

  // Nothing left to purge: nothing deleted, no audit row.
  auto again =
      PurgeOldRows(*conn_, {hours(7 * 24), hours(30 * 24), hours(90 * 24)}, "admin:test@host");
  EXPECT_EQ(again.done_items + again.events + again.runs, 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'queue_purged'"), 1);
}

TEST_F(Admin, PurgeWithZeroAgesOrAStopRequestKeepsEverything) {
  QueryValue(
      "INSERT INTO coexist.queue (job, record_key, state, done_at)"
      " VALUES ('nightly', 1, 'done', now() - interval '1 year');"
      "INSERT INTO coexist.events (kind, at) VALUES ('escalation', now() - interval '1 year')");
  auto kept = PurgeOldRows(*conn_, {}, "admin:test");
  EXPECT_EQ(kept.done_items + kept.events + kept.runs, 0);
  std::atomic<bool> stop{true};
  auto stopped = PurgeOldRows(*conn_, {hours(1), hours(1), hours(1)}, "admin:test", &stop);
  EXPECT_EQ(stopped.done_items + stopped.events + stopped.runs, 0);
  EXPECT_EQ(
      Count("SELECT count(*) FROM coexist.items") + Count("SELECT count(*) FROM coexist.events"),
      2);
}

// A purge statement skips rows another session holds instead of waiting.
TEST_F(Admin, PurgeSkipsRowsAnotherSessionLocks) {
  QueryValue(
      "INSERT INTO coexist.queue (job, record_key, state, done_at)"
      " SELECT 'nightly', g, 'done', now() - interval '8 days' FROM generate_series(1, 3) g");
  auto other = Connect();
  pqxx::work held(*other);
  held.exec("SELECT 1 FROM coexist.queue WHERE record_key = '2' FOR UPDATE");
  pqxx::nontransaction(*conn_).exec("SET lock_timeout = '100ms'");
  auto purged = PurgeOldRows(*conn_, {hours(24), {}, {}}, "admin:test");
  EXPECT_EQ(purged.done_items, 2);
  held.commit();
  EXPECT_EQ(QueryValue("SELECT record_key FROM coexist.items"), "2");
}

}  // namespace
}  // namespace coexist::admin
