// `coexist items cancel|skip|retry|reschedule` as an operator runs it: what
// each action changes, its one audit row, the dry run, bad input, items a
// live run holds, and a cancel racing a running batch.

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/batch_process.h"
#include "tests/support/database_test.h"
#include "tests/support/ledger_operation.h"
#include "tests/support/shell_command.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;
using coexist::testing::Outcome;

class ItemsTest : public coexist::testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    scratch_ = fs::temp_directory_path() /
               ("coexist-items-" + std::to_string(getpid()) + "-" + database_name());
    fs::create_directories(scratch_);
    config_ = (scratch_ / "job.yaml").string();
    WriteConfig("0");
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(scratch_);
    DatabaseTest::TearDown();
  }

  void WriteConfig(const std::string& sleep) {
    std::ofstream(config_) << "batch: {job: j, chunk_size: 5, workers: 2}\n"
                              "pacing: {adaptive: false}\n"
                              "policy: {name: skip_locked}\n"
                           << testing::LedgerOperation(sleep);
  }

  // build/coexist against this test's database, with the job's configuration.
  Outcome Run(const std::string& args) {
    return coexist::testing::RunShell(std::string(COEXIST_BINARY) + " --database-url '" +
                                          conninfo() + "' --config " + config_ + " " + args,
                                      scratch_);
  }

  // Items of job j: keys 1-5 queued, 6 dead, 7 deferred, 8 done (kept for
  // its idempotency key).
  void Enqueue() {
    QueryValue(
        "INSERT INTO coexist.queue (job, record_key, state, attempts, last_error, defer_reason,"
        " idempotency_key) VALUES"
        " ('j', '1', 'queued', 0, NULL, NULL, NULL), ('j', '2', 'queued', 0, NULL, NULL, NULL),"
        " ('j', '3', 'queued', 0, NULL, NULL, NULL), ('j', '4', 'queued', 0, NULL, NULL, NULL),"
        " ('j', '5', 'queued', 0, NULL, NULL, 'ik5'),"
        " ('j', '6', 'dead', 5, 'ERROR: Boom in check', NULL, NULL),"
        " ('j', '7', 'deferred', 0, NULL, 'edit_locked', NULL),"
        " ('j', '8', 'done', 1, NULL, NULL, 'ik8')");
  }
  std::string StateOf(const std::string& key) {
    return QueryValue(
        "SELECT string_agg(state::text, ',') FROM coexist.items WHERE job = 'j'"
        " AND record_key = '" +
        key + "'");
  }

  fs::path scratch_;
  std::string config_;
};

TEST_F(ItemsTest, CancelMakesItemsCancelledNeverRunAndAuditsTheActionOnce) {
  Enqueue();
  auto result = Run("items cancel --job j --state queued --state dead --why 'handled by the shop'");
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("job j: 6 items matched (queued 5, dead 1)"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("6 cancelled (queued 5, dead 1)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("first items: 1 (key 1), 2 (key 2)"), std::string::npos) << result.out;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'cancelled'"), 6);
  EXPECT_EQ(StateOf("7"), "deferred");
  EXPECT_EQ(QueryValue("SELECT last_error FROM coexist.queue WHERE record_key = '6'"),
            "ERROR: Boom in check")
      << "what the item was keeps";

  // One event: the action, its filter, counts, who and why.
  ASSERT_EQ(Count("SELECT count(*) FROM coexist.events"), 1);
  auto details = nlohmann::json::parse(QueryValue(
      "SELECT details::text FROM coexist.events WHERE kind = 'items_cancelled' AND job = 'j'"));
  EXPECT_EQ(details["action"], "cancel");
  EXPECT_EQ(details["items"], 6);
  EXPECT_EQ(details["by_state"]["queued"], 5);
  EXPECT_EQ(details["filter"]["states"], nlohmann::json::array({"queued", "dead"}));
  EXPECT_EQ(details["why"], "handled by the shop");
  EXPECT_EQ(details["item_ids"].size(), 6u);
  EXPECT_TRUE(QueryValue("SELECT actor FROM coexist.events").starts_with("admin:"));

  // Counted apart, never as done, never as work left.
  auto jobs = Run("jobs --json");
  ASSERT_EQ(jobs.status, 0) << jobs.err;
  auto j = nlohmann::json::parse(jobs.out)[0];
  EXPECT_EQ(j["cancelled"], 6);
  EXPECT_EQ(j["done"], 1);
  EXPECT_EQ(j["queued"], 0);
  auto status = Run("queue status --job j");
  EXPECT_NE(status.out.find("job j: queued 0, deferred 1, done 1, dead 0, cancelled 6"),
            std::string::npos)
      << status.out;

  // A run applies none of them: only the deferred item, once its time comes.
  QueryValue("CREATE TABLE ledger (key bigint NOT NULL)");
  QueryValue("UPDATE coexist.queue SET not_before = '-infinity' WHERE record_key = '7'");
  auto run = Run("batch run");
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(QueryValue("SELECT string_agg(key::text, ',') FROM ledger"), "7");
}

// An item of several keys, cancelled, no longer holds back the later items
// of its keys (the key order's pending test, 0034).
TEST_F(ItemsTest, ACancelledItemNoLongerHoldsBackTheLaterItemsOfItsKeys) {
  QueryValue("INSERT INTO coexist.queue (job, record_key, record_keys) VALUES ('j', '1', '{1,2}')");
  QueryValue("INSERT INTO coexist.queue (job, record_key) VALUES ('j', '2')");
  const std::string follows =
      "SELECT coexist.follows_pending_item('j', item_id, record_key, record_keys)::text"
      " FROM coexist.queue WHERE record_keys IS NULL";
  ASSERT_EQ(QueryValue(follows), "true");
  auto result = Run("items cancel --job j --key 1 --why 'records 1 and 2 were deleted'");
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("1 cancelled (queued 1)"), std::string::npos) << result.out;
  EXPECT_EQ(QueryValue(follows), "false");
}

TEST_F(ItemsTest, SkipMarksItemsDoneWithoutApplyingThem) {
  Enqueue();
  QueryValue("CREATE TABLE ledger (key bigint NOT NULL)");
  // A key as the key column's type reads it: 005 is 5.
  auto result =
      Run("items skip --job j --key 4 --key 005 --key 6 --why 'fixed by hand' --by alice --json");
  ASSERT_EQ(result.status, 0) << result.err;
  auto out = nlohmann::json::parse(result.out);
  EXPECT_EQ(out["changed"], 3);
  EXPECT_EQ(out["changed_by_state"]["dead"], 1);
  EXPECT_EQ(out["items"][0]["key"], "4");
  EXPECT_NE(out["event_id"], nullptr);
  EXPECT_EQ(StateOf("4"), "done");
  EXPECT_EQ(StateOf("5"), "done") << "kept in the queue for its idempotency key";
  EXPECT_EQ(StateOf("6"), "done");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.done_chunks WHERE run_id IS NULL"), 1);
  EXPECT_EQ(QueryValue("SELECT attempts FROM coexist.items WHERE record_key = '4'"), "0")
      << "not applied: no attempt";
  EXPECT_EQ(QueryValue("SELECT actor || ' ' || (details->>'why') FROM coexist.events"
                       " WHERE kind = 'items_skipped'"),
            "alice fixed by hand");
  auto jobs = nlohmann::json::parse(Run("jobs --json").out)[0];
  EXPECT_EQ(jobs["done"], 4);
  auto run = Run("batch run");
  EXPECT_EQ(Count("SELECT count(*) FROM ledger WHERE key IN (4, 5, 6)"), 0) << run.err;
}

TEST_F(ItemsTest, RetryQueuesAgainAndRescheduleDelaysTheClaim) {
  Enqueue();
  auto retry = Run("items retry --job j --reason boom");
  ASSERT_EQ(retry.status, 0) << retry.err;
  EXPECT_NE(retry.out.find("1 queued again (dead 1)"), std::string::npos) << retry.out;
  EXPECT_EQ(QueryValue("SELECT state || ' ' || attempts || ' ' || last_error FROM coexist.queue"
                       " WHERE record_key = '6'"),
            "queued 0 ERROR: Boom in check");
  EXPECT_EQ(QueryValue("SELECT details->>'action' FROM coexist.events WHERE kind = "
                       "'items_retried'"),
            "retry");

  // Cancelled items come back too.
  ASSERT_EQ(Run("items cancel --job j --key 1 --why oops").status, 0);
  ASSERT_EQ(Run("items retry --job j --state cancelled").status, 0);
  EXPECT_EQ(StateOf("1"), "queued");

  auto later = Run("items reschedule --job j --key 2 --key 7 --in 2h");
  ASSERT_EQ(later.status, 0) << later.err;
  EXPECT_NE(later.out.find("2 rescheduled (queued 1, deferred 1): not claimed before "),
            std::string::npos)
      << later.out;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.queue WHERE not_before > now() + interval '119 "
                  "min' AND record_key IN ('2', '7')"),
            2);
  auto at = Run("items reschedule --job j --key 3 --at '2030-01-01 00:00+00'");
  ASSERT_EQ(at.status, 0) << at.err;
  EXPECT_EQ(QueryValue("SELECT not_before = '2030-01-01 00:00+00' FROM coexist.queue"
                       " WHERE record_key = '3'"),
            "t");

  // A state the action does not apply to: nothing changes, and it says so.
  auto done = Run("items retry --job j --key 8");
  EXPECT_EQ(done.status, 65);
  EXPECT_NE(done.err.find("items retry applies to dead, deferred, cancelled items; the 1 item of "
                          "job j that match --key 8 is done 1: nothing was changed"),
            std::string::npos)
      << done.err;
}

TEST_F(ItemsTest, ListShowsTheItemsTheFiltersMatch) {
  Enqueue();
  auto text = Run("items list --job j --reason BOOM");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("ERROR: Boom in check"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\n1 item\n"), std::string::npos) << text.out;
  auto json = Run("items list --job j --state queued --state deferred --limit 2 --json");
  ASSERT_EQ(json.status, 0) << json.err;
  auto rows = nlohmann::json::parse(json.out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["record_key"], "1");
  EXPECT_EQ(rows[0]["state"], "queued");
  EXPECT_EQ(Run("items list --job j --key 7 --json").out.find("edit_locked") != std::string::npos,
            true);
}

TEST_F(ItemsTest, DryRunPrintsWhatWouldChangeAndChangesNothing) {
  Enqueue();
  auto result = Run("items cancel --job j --all --why test --dry-run --sample 2");
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("7 would be cancelled (queued 5, deferred 1, dead 1)"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("first items: 1 (key 1), 2 (key 2)\n"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("dry run: nothing was changed"), std::string::npos) << result.out;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.queue WHERE state = 'cancelled'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events"), 0);
}

TEST_F(ItemsTest, BadInputNamesTheProblemAndChangesNothing) {
  Enqueue();
  auto expect = [&](const std::string& args, int status, const std::string& text) {
    auto result = Run(args);
    EXPECT_EQ(result.status, status) << args << "\n" << result.err;
    EXPECT_NE(result.err.find(text), std::string::npos) << args << "\n" << result.err;
  };
  expect("items cancel --job nosuch --all --why x", 65, "job 'nosuch' is unknown here");
  expect("items cancel --job j --reason 'no such error' --why x", 65,
         "no item of job j matches --reason 'no such error': nothing was changed\nHINT: "
         "`coexist items list --job j` lists the job's items");
  expect("items cancel --job j --why x", 64, "items cancel needs a filter besides --job");
  expect("items cancel --job j --state queued", 64, "items cancel needs --why TEXT");
  expect("items cancel --job j --state running --why x", 64, "--state 'running' is not an item");
  expect("items retry --job j --since yesterday-ish", 64,
         "--since 'yesterday-ish' is not a timestamp");
  expect("items reschedule --job j --all", 64, "exactly one of --at TIMESTAMP and --in");
  expect("items reschedule --job j --all --in soon", 64, "--in 'soon' is not a duration");
  expect("items reschedule --job j --all --at never", 64, "--at 'never' is not a timestamp");
  expect("items cancel --job j --key 12abc --why x", 65,
         "--key '12abc' is not a key of the job's key type bigint");
  expect("items cancel --job j --key 99999999999999999999 --why x", 65,
         "--key '99999999999999999999' is not a key");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.queue WHERE state = 'queued'"), 5);
}

// An item in a live run's open chunk (its row locked) or taken over by a
// running status_partition run is left alone, counted and named.
TEST_F(ItemsTest, ItemsALiveRunHoldsAreLeftAlone) {
  Enqueue();
  long long run = Count(
      "INSERT INTO coexist.runs (job, policy, host, pid) VALUES ('j', 'skip_locked', 'h', 1)"
      " RETURNING run_id");
  QueryValue(
      "INSERT INTO coexist.takeovers (run_id, item_id, target, record_key)"
      " SELECT " +
      std::to_string(run) +
      ", item_id, 'products', record_key FROM coexist.queue WHERE record_key = '2'");
  auto chunk = Connect();
  pqxx::work held(*chunk);
  held.exec("SELECT 1 FROM coexist.queue WHERE record_key = '1' FOR UPDATE");

  auto result = Run("items cancel --job j --state queued --why test");
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("3 cancelled (queued 3)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("2 items are being worked by the job's live run (run " +
                            std::to_string(run) + "): left alone"),
            std::string::npos)
      << result.out;
  EXPECT_EQ(StateOf("1"), "queued");
  EXPECT_EQ(StateOf("2"), "queued");
  EXPECT_EQ(QueryValue("SELECT details->>'held' FROM coexist.events"), "2");

  // Everything it matches is held: try again later (75), nothing written.
  auto busy = Run("items cancel --job j --key 1 --why test");
  EXPECT_EQ(busy.status, 75) << busy.err;
  EXPECT_NE(busy.err.find("every matching item is in a live run's hands"), std::string::npos)
      << busy.err;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events"), 1);
}

// A batch works the queue while an operator cancels part of it: every item
// ends either applied once and done, or cancelled and never applied.
TEST_F(ItemsTest, CancelDuringARunNeverCancelsAnAppliedItemAndLosesNone) {
  constexpr int kItems = 100;
  QueryValue("CREATE TABLE ledger (key bigint NOT NULL)");
  WriteConfig("0.2");
  ASSERT_EQ(Run("enqueue --select 'SELECT id FROM products'").status, 0);
  // The run starts paused, so the first cancels land on a live run however
  // slow this machine is (a sanitizer build); the rest race it after resume.
  ASSERT_EQ(Run("jobs pause j --reason test").status, 0);
  pid_t batch = testing::StartBatchRun(conninfo(), config_, (scratch_ / "batch.log").string());
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'running'") > 0; }));
  int changed = 0;
  auto cancel = [&](int from) {
    std::string keys;
    for (int k = from; k < from + 10; k += 2) keys += " --key " + std::to_string(k);
    return Run("items cancel --job j" + keys + " --why race");
  };
  for (int from = 1; from <= 20; from += 10) {
    auto result = cancel(from);
    EXPECT_EQ(result.status, 0) << result.err;
    changed += result.status == 0;
  }
  ASSERT_EQ(Run("jobs resume j").status, 0);
  ASSERT_TRUE(testing::WaitUntil([&] { return Count("SELECT count(*) FROM ledger") > 0; }));
  for (int from = 31; from <= kItems; from += 10) {
    auto result = cancel(from);
    // Done already (gone from the queue: 65) or in a chunk (75) are fine.
    EXPECT_TRUE(result.status == 0 || result.status == 65 || result.status == 75)
        << result.status << result.err;
    changed += result.status == 0;
  }
  auto status = testing::WaitForExitWithin(batch, std::chrono::seconds(120));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << testing::Slurp(scratch_ / "batch.log");
  EXPECT_GE(changed, 2) << "the cancels during the pause changed nothing";
  EXPECT_GT(Count("SELECT count(*) FROM coexist.items WHERE state = 'cancelled'"), 0);
  // What the operator was told was cancelled (each event names its items).
  const std::string told =
      "(SELECT jsonb_array_elements_text(details->'item_ids')::bigint FROM coexist.events"
      " WHERE kind = 'items_cancelled')";
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'cancelled'"),
            Count("SELECT count(*) FROM " + told + " t"));
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items i WHERE i.state = 'cancelled' AND"
                  " i.item_id IN " +
                  told),
            Count("SELECT count(*) FROM " + told + " t"));
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items i JOIN ledger l ON l.key = "
                  "i.record_key::bigint WHERE i.item_id IN " +
                  told),
            0)
      << "a cancelled item was applied";
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state IN ('done', 'cancelled')"),
            kItems);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"),
            Count("SELECT count(*) FROM ledger"));
  EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), Count("SELECT count(*) FROM ledger"));
}

}  // namespace
}  // namespace coexist
