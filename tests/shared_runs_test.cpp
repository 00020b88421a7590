// Shared runs of one job (batch.runs: shared): several `coexist batch run`
// processes work one queue at once. Items of one key are enqueued twice and
// online users edit the same rows meanwhile; one process is killed with
// kill -9 mid-run. Every item must be applied exactly once (a ledger row per
// item, and each row's stock is its items plus what online users added),
// every surviving run must have done a share, and the killed run's items go
// to the others. A daemon in shared mode works beside two runs. Exclusive
// and shared runs of a job never work side by side. `coexist ctl --job J
// stop` stops every run of the job through the database; `coexist jobs
// pause J` holds every run of it, and a run started while it is paused.

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "common/subprocess.h"
#include "db/cluster.h"
#include "tests/support/batch_process.h"
#include "tests/support/database_test.h"
#include "tests/support/exposition.h"
#include "tests/support/ledger_operation.h"

namespace coexist {
namespace {

using namespace std::chrono_literals;

class SharedRunsTest : public testing::DatabaseTest {
 protected:
  static constexpr long long kKeys = 600;  // each enqueued twice

  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE ledger (key bigint NOT NULL)");
    QueryValue("CREATE TABLE online_log (id bigint NOT NULL, delta bigint NOT NULL)");
    QueryValue("INSERT INTO products (id, stock) SELECT g, 0 FROM generate_series(101, " +
               std::to_string(100 + kKeys) + ") g");
    dir_ = std::filesystem::temp_directory_path() / ("cx-shared-" + database_name());
    std::filesystem::create_directories(dir_);
    WriteConfig("shared.yaml", "shared", "{name: online_priority, max_wait: 10s}");
    ASSERT_NO_FATAL_FAILURE(EnqueueEveryKeyTwice());
  }
  void EnqueueEveryKeyTwice() {
    for (int round = 0; round < 2; ++round) {
      auto status =
          RunCommand({COEXIST_BINARY, "--database-url", conninfo(), "--config", Path("shared.yaml"),
                      "enqueue", "--select", "SELECT id FROM products WHERE id > 100"});
      ASSERT_EQ(status.status, 0) << status.output;
    }
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
    DatabaseTest::TearDown();
  }

  std::string Path(const std::string& name) { return (dir_ / name).string(); }

  // Chunks of 10 items at >= `sleep` seconds each, one worker per process.
  void WriteConfig(const std::string& name, const std::string& runs, const std::string& policy,
                   const std::string& sleep = "0.03") {
    std::ofstream(Path(name)) << "target: {owner_column: owner}\n"
                              << "batch: {job: shared, chunk_size: 10, workers: 1, runs: " << runs
                              << "}\n"
                                 "pacing: {adaptive: false}\n"
                                 "policy: "
                              << policy << "\n"
                              << testing::LedgerOperation(sleep);
  }

  // `coexist batch run`, or (command "daemon") `coexist batch daemon`.
  pid_t StartRun(const std::string& config, const std::string& log,
                 const std::string& command = "run", const std::vector<std::string>& extra = {}) {
    SpawnOptions options;
    options.argv = {COEXIST_BINARY, "--database-url", conninfo(), "--config",
                    Path(config),   "batch",          command};
    options.argv.insert(options.argv.end(), extra.begin(), extra.end());
    options.output_path = Path(log);
    options.parent_death_signal = SIGKILL;
    return Spawn(options);
  }
  void WaitForLedger(long long rows) {
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (Count("SELECT count(*) FROM ledger") < rows &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
  }
  std::string Log(const std::string& name) {
    std::ifstream in(dir_ / name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::filesystem::path dir_;
};

class SharedRunsPolicyTest : public SharedRunsTest,
                             public ::testing::WithParamInterface<const char*> {};

TEST_P(SharedRunsPolicyTest, ThreeRunsDrainOneQueueOfRepeatedKeysOnceEvenWhenOneIsKilled) {
  WriteConfig("shared.yaml", "shared", GetParam());
  // Online users: each transaction locks two random rows in key order, adds
  // 1000 to both and logs it.
  std::atomic<bool> stop{false};
  std::atomic<long long> committed{0}, refused{0}, failed{0};
  std::thread online([&] {
    auto conn = Connect("coexist-online test");
    std::mt19937 random(5);
    while (!stop) {
      long long a = 101 + static_cast<long long>(random() % kKeys);
      long long b = 101 + static_cast<long long>(random() % kKeys);
      try {
        pqxx::work tx(*conn);
        std::string ids = "ARRAY[" + std::to_string(a) + "," + std::to_string(b) + "]::bigint[]";
        tx.exec("SELECT 1 FROM products WHERE id = ANY (" + ids + ") ORDER BY id FOR UPDATE");
        std::this_thread::sleep_for(2ms);
        tx.exec("WITH u AS (UPDATE products SET stock = stock + 1000 WHERE id = ANY (" + ids +
                ") RETURNING id) INSERT INTO online_log SELECT id, 1000 FROM u");
        tx.commit();
        ++committed;
      } catch (const pqxx::sql_error& e) {
        // status_partition refuses writes to the records it took over
        // (CX004): the user tries again later. Anything else is a failure.
        if (e.sqlstate() == "CX004") {
          ++refused;
          continue;
        }
        ++failed;
        ADD_FAILURE() << "online transaction failed: " << e.what();
      }
    }
  });
  std::vector<pid_t> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(StartRun("shared.yaml", "run" + std::to_string(i)));
  WaitForLedger(150);
  ASSERT_EQ(kill(runs[0], SIGKILL), 0);
  EXPECT_EQ(WaitForExit(runs[0]), 128 + SIGKILL);
  // 0, or 2 when a policy that defers row-locked records deferred some.
  for (int i : {1, 2}) {
    int status = WaitForExit(runs[static_cast<size_t>(i)]);
    EXPECT_TRUE(status == 0 || status == 2) << Log("run" + std::to_string(i));
  }
  stop = true;
  online.join();
  // A survivor marked the killed run abandoned while it worked, and handed
  // back what it had taken over.
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'abandoned'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs WHERE outcome <> 'abandoned' AND done > 0"), 2)
      << "each survivor did a share";
  // What was deferred goes in a later run.
  for (int again = 0; again < 3 && Count("SELECT count(*) FROM coexist.items WHERE state <> "
                                         "'done'") > 0;
       ++again) {
    QueryValue("UPDATE coexist.queue SET not_before = now() WHERE state = 'deferred'");
    auto next = RunCommand({COEXIST_BINARY, "--database-url", conninfo(), "--config",
                            Path("shared.yaml"), "batch", "run"});
    EXPECT_EQ(next.status, 0) << next.output;
  }

  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state <> 'done'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 2 * kKeys);
  EXPECT_EQ(Count("SELECT count(*) FROM (SELECT key FROM ledger GROUP BY key HAVING count(*) <> "
                  "2) k"),
            0)
      << "each key's two items applied once each";
  EXPECT_EQ(Count("SELECT count(*) FROM products p WHERE id > 100 AND stock <>"
                  " (SELECT count(*) FROM ledger l WHERE l.key = p.id)"
                  " + (SELECT coalesce(sum(delta), 0) FROM online_log o WHERE o.id = p.id)"),
            0)
      << "a lost or doubled update";
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE owner <> 'online'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.takeovers"), 0);
  EXPECT_GT(committed, 0);
  EXPECT_EQ(failed, 0);
}

INSTANTIATE_TEST_SUITE_P(Policies, SharedRunsPolicyTest,
                         // skip_locked: its chunks try the operation before
                         // probing rows ("Nothing in the way"), and meet the
                         // online users' row locks there.
                         ::testing::Values("{name: online_priority, max_wait: 10s}",
                                           "{name: status_partition}", "{name: skip_locked}"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           return std::string(param.index == 0   ? "online_priority"
                                              : param.index == 1 ? "status_partition"
                                                                 : "skip_locked");
                         });

// pg_ctl restart -m immediate under two shared runs: every connection
// breaks at once, both runs end (75), and the next shared run marks both
// abandoned and applies the rest, each item once.
TEST_F(SharedRunsTest, AnImmediateServerRestartEndsEveryRunAndTheNextOneFinishes) {
  pid_t first = StartRun("shared.yaml", "first.log");
  pid_t second = StartRun("shared.yaml", "second.log");
  WaitForLedger(150);
  auto& cluster = testing::ClusterEnvironment::Get().cluster();
  cluster.StopServer(db::TempCluster::StopMode::kImmediate);
  std::this_thread::sleep_for(300ms);
  cluster.StartServer();
  EXPECT_EQ(WaitForExit(first), 75) << Log("first.log");
  EXPECT_EQ(WaitForExit(second), 75) << Log("second.log");
  EXPECT_LT(Count("SELECT count(*) FROM ledger"), 2 * kKeys) << "the runs finished first";

  auto next = RunCommand({COEXIST_BINARY, "--database-url", conninfo(), "--config",
                          Path("shared.yaml"), "batch", "run"});
  EXPECT_EQ(next.status, 0) << next.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state <> 'done'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM (SELECT key FROM ledger GROUP BY key HAVING count(*) <> "
                  "2) k"),
            0)
      << "each key's two items applied once each";
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 2 * kKeys);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'abandoned'"), 2);
}

TEST_F(SharedRunsTest, ExclusiveAndSharedRunsOfAJobNeverWorkSideBySide) {
  // Shorter chunks: each run here drains the queue alone.
  WriteConfig("shared.yaml", "shared", "{name: online_priority}", "0.01");
  WriteConfig("exclusive.yaml", "exclusive", "{name: online_priority}", "0.01");
  pid_t shared = StartRun("shared.yaml", "shared.log");
  WaitForLedger(20);
  auto exclusive = RunCommand({COEXIST_BINARY, "--database-url", conninfo(), "--config",
                               Path("exclusive.yaml"), "batch", "run"});
  EXPECT_EQ(exclusive.status, 4) << exclusive.output;
  EXPECT_NE(exclusive.output.find("job shared is already running: held by run "), std::string::npos)
      << exclusive.output;
  EXPECT_EQ(WaitForExit(shared), 0) << Log("shared.log");

  ASSERT_NO_FATAL_FAILURE(EnqueueEveryKeyTwice());
  pid_t first = StartRun("exclusive.yaml", "exclusive.log");
  WaitForLedger(2 * kKeys + 20);
  auto second = RunCommand({COEXIST_BINARY, "--database-url", conninfo(), "--config",
                            Path("shared.yaml"), "batch", "run"});
  EXPECT_EQ(second.status, 4) << second.output;
  EXPECT_NE(second.output.find("job shared has an exclusive run at work: held by run "),
            std::string::npos)
      << second.output;
  EXPECT_EQ(WaitForExit(first), 0) << Log("exclusive.log");
}

TEST_F(SharedRunsTest, ADaemonAndTwoRunsDrainOneQueueOfRepeatedKeysOnce) {
  // Chunks of 0.05 s: the queue takes three runs a few seconds.
  WriteConfig("shared.yaml", "shared", "{name: online_priority}", "0.05");
  pid_t daemon = StartRun("shared.yaml", "daemon.log", "daemon");
  auto runs_of = [&](pid_t pid) {
    return Count("SELECT count(*) FROM coexist.runs WHERE pid = " + std::to_string(pid));
  };
  // The daemon's first run is at work before the others start.
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (runs_of(daemon) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(runs_of(daemon), 1) << Log("daemon.log");
  std::vector<pid_t> runs = {StartRun("shared.yaml", "run0"), StartRun("shared.yaml", "run1")};
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(WaitForExit(runs[i]), 0) << Log("run" + std::to_string(i));
  }
  WaitForLedger(2 * kKeys);
  kill(daemon, SIGTERM);
  EXPECT_EQ(WaitForExit(daemon), 0) << Log("daemon.log");

  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state <> 'done'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 2 * kKeys);
  EXPECT_EQ(Count("SELECT count(*) FROM (SELECT key FROM ledger GROUP BY key HAVING count(*) <> "
                  "2) k"),
            0)
      << "each key's two items applied once each";
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE id > 100 AND stock <> 2"), 0);
  EXPECT_GT(Count("SELECT coalesce(sum(done), 0) FROM coexist.runs WHERE pid = " +
                  std::to_string(daemon)),
            0)
      << "the daemon's run did a share";
  for (pid_t run : runs) {
    EXPECT_GT(
        Count("SELECT coalesce(sum(done), 0) FROM coexist.runs WHERE pid = " + std::to_string(run)),
        0)
        << "each batch run did a share";
  }
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs WHERE outcome <> 'succeeded'"), 0);
}

// Two shared runs drain the job together. Each run's summary and metrics
// give the job's figures over the runs that worked alongside it; the runs
// end one at a time (0024), so the one that ends second has the job's
// totals, and the host's one textfile keeps its view.
TEST_F(SharedRunsTest, TheRunThatEndsLastReportsTheJobsRunsTogether) {
  WriteConfig("shared.yaml", "shared", "{name: online_priority}");
  std::ofstream(Path("shared.yaml"), std::ios::app)
      << "metrics: {textfile: " << Path("job.prom") << "}\n";
  // Held here, the job's finish lock makes both runs reach their end and
  // wait for it: then they end one at a time, as they must.
  auto holder = Connect("coexist-test finish lock");
  pqxx::work hold(*holder);
  hold.exec("SELECT coexist.lock_job_finish('shared')");
  std::vector<pid_t> runs;
  for (int i = 0; i < 2; ++i) {
    runs.push_back(StartRun("shared.yaml", "run" + std::to_string(i), "run",
                            {"--json", Path("run" + std::to_string(i) + ".json")}));
  }
  auto waiting = [&] {
    return Count(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND classid = coexist.finish_lock_class()::oid");
  };
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (waiting() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(waiting(), 2) << Log("run0") << Log("run1");
  hold.commit();
  for (size_t i = 0; i < runs.size(); ++i) {
    ASSERT_EQ(WaitForExit(runs[i]), 0) << Log("run" + std::to_string(i));
  }
  std::vector<nlohmann::json> summaries;
  for (int i = 0; i < 2; ++i) {
    summaries.push_back(nlohmann::json::parse(Log("run" + std::to_string(i) + ".json")));
  }
  // Both did a share, so each worked while the other did: they overlap.
  long long done = 0;
  for (const auto& s : summaries) {
    EXPECT_GT(s["done"].get<long long>(), 0) << s.dump();
    EXPECT_EQ(s["runs_together"]["runs"], 2) << s.dump();
    EXPECT_EQ(s["runs_together"]["failed"], 0) << s.dump();
    done += s["done"].get<long long>();
  }
  EXPECT_EQ(done, 2 * kKeys);
  // The first to end saw the other still running; the last saw its end.
  size_t last = summaries[0]["runs_together"]["running"] == 0 ? 0 : 1;
  const auto& first = summaries[1 - last];
  EXPECT_EQ(first["runs_together"]["running"], 1) << first.dump();
  EXPECT_EQ(summaries[last]["runs_together"]["running"], 0) << summaries[last].dump();
  EXPECT_EQ(summaries[last]["runs_together"]["done"], 2 * kKeys) << summaries[last].dump();
  EXPECT_EQ(summaries[last]["runs_together"]["deferred"], 0);
  EXPECT_GT(summaries[last]["runs_together"]["seconds"].get<double>(), 0);
  EXPECT_NE(Log("run" + std::to_string(last))
                .find("with the job's other runs: 2 runs (0 still "
                      "running, 0 failed or died), done " +
                      std::to_string(2 * kKeys)),
            std::string::npos)
      << Log("run" + std::to_string(last));

  // `runs list` shows the job's runs side by side, each with its process.
  auto list =
      RunCommand({COEXIST_BINARY, "--database-url", conninfo(), "runs", "list", "--job", "shared"});
  ASSERT_EQ(list.status, 0) << list.output;
  for (pid_t run : runs) {
    EXPECT_NE(list.output.find(":" + std::to_string(run) + "\n"), std::string::npos) << list.output;
  }

  auto samples = testing::ParseExposition(Log("job.prom"));
  EXPECT_EQ(samples.at(R"(coexist_batch_last_runs_together{job="shared"})"), 2);
  EXPECT_EQ(samples.at(R"(coexist_batch_last_runs_together_running{job="shared"})"), 0);
  EXPECT_EQ(samples.at(R"(coexist_batch_last_runs_together_items{job="shared",outcome="done"})"),
            2 * kKeys);
  EXPECT_EQ(
      samples.at(
          R"(coexist_batch_last_run_items{job="shared",outcome="done",policy="online_priority"})"),
      summaries[last]["done"].get<long long>())
      << "the run's own series are the last run's";
}

TEST_F(SharedRunsTest, CtlJobStopStopsEveryRunOfTheJobThroughTheDatabase) {
  // Chunks of 0.1 s: the queue takes two runs several seconds, so the stop
  // finds both at work.
  WriteConfig("shared.yaml", "shared", "{name: online_priority}", "0.1");
  WriteConfig("exclusive.yaml", "exclusive", "{name: online_priority}", "0.1");
  auto running = [&] {
    return Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'running'");
  };
  auto ctl_stop = [&] {
    return RunCommand(
        {COEXIST_BINARY, "--database-url", conninfo(), "ctl", "--job", "shared", "stop"});
  };
  std::vector<pid_t> runs = {StartRun("shared.yaml", "run0"), StartRun("shared.yaml", "run1")};
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while ((running() < 2 || Count("SELECT count(*) FROM ledger") < 20) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(running(), 2);

  auto stop = ctl_stop();
  ASSERT_EQ(stop.status, 0) << stop.output;
  std::string ids =
      QueryValue("SELECT string_agg(run_id::text, ',' ORDER BY run_id) FROM coexist.runs");
  EXPECT_NE(stop.output.find(R"({"job":"shared","ok":true,"stopping":[)" + ids + "]}"),
            std::string::npos)
      << stop.output;
  // Claiming stopped early with items still queued: exit 2, as for ctl stop.
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string log = "run" + std::to_string(i);
    EXPECT_EQ(WaitForExit(runs[i]), 2) << Log(log);
    EXPECT_NE(Log(log).find("claiming stopped: job_stop"), std::string::npos) << Log(log);
  }
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'incomplete' AND "
                  "details->>'stop_reason' = 'job_stop' AND stop_requested_at IS NOT NULL"),
            2);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'job_stop_requested' AND "
                  "job = 'shared' AND actor LIKE 'admin:%'"),
            2);
  EXPECT_GT(Count("SELECT count(*) FROM coexist.items WHERE state = 'queued'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"),
            Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"))
      << "every done item applied once, no claimed one applied";

  // An exclusive run is stopped the same way; the stopped runs are not
  // asked again, and a run that started after a stop is not stopped by it.
  pid_t exclusive = StartRun("exclusive.yaml", "exclusive.log");
  long long done = Count("SELECT count(*) FROM ledger");
  deadline = std::chrono::steady_clock::now() + 60s;
  while ((running() < 1 || Count("SELECT count(*) FROM ledger") < done + 10) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  std::string exclusive_id =
      QueryValue("SELECT run_id::text FROM coexist.runs WHERE outcome = 'running'");
  stop = ctl_stop();
  ASSERT_EQ(stop.status, 0) << stop.output;
  EXPECT_NE(stop.output.find(R"("stopping":[)" + exclusive_id + "]}"), std::string::npos)
      << stop.output;
  EXPECT_EQ(WaitForExit(exclusive), 2) << Log("exclusive.log");
  EXPECT_EQ(
      QueryValue("SELECT details->>'stop_reason' FROM coexist.runs WHERE run_id = " + exclusive_id),
      "job_stop");

  // Nothing running: nothing to stop.
  stop = ctl_stop();
  EXPECT_EQ(stop.status, 0) << stop.output;
  EXPECT_NE(stop.output.find(R"("stopping":[])"), std::string::npos) << stop.output;
}

TEST_F(SharedRunsTest, CtlJobSendsOnlyStopThroughTheDatabase) {
  auto pause =
      RunCommand({COEXIST_BINARY, "--database-url", conninfo(), "ctl", "--job", "shared", "pause"});
  EXPECT_EQ(pause.status, 64) << pause.output;
  EXPECT_NE(pause.output.find("coexist: ctl --job shared pause: only stop goes through the "
                              "database\nHINT: pause, resume, status and the sizing commands "
                              "steer one run through its control socket: pass --socket PATH, or "
                              "--config FILE with pacing.control_socket set, without --job."),
            std::string::npos)
      << pause.output;
  auto both = RunCommand({COEXIST_BINARY, "--database-url", conninfo(), "ctl", "--job", "shared",
                          "--socket", Path("x.sock"), "stop"});
  EXPECT_EQ(both.status, 64) << both.output;
  EXPECT_NE(both.output.find("coexist: --job and --socket both given\n"), std::string::npos)
      << both.output;
}

// `coexist jobs`, `jobs pause` and `jobs resume` on the test's database.
CommandResult Jobs(const std::string& conninfo, std::vector<std::string> args) {
  std::vector<std::string> argv = {COEXIST_BINARY, "--database-url", conninfo, "jobs"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

// Shared runs walk one range pass together: the first to start splits the
// key range (2 workers x 4 segments), the others join it and take the
// segments no chunk holds; a run killed mid-pass leaves its segment's
// checkpoint, and a sibling walks on from there. The operation leaves the
// predicate true (stock + 1), so only the checkpoints keep a row from being
// applied twice.
TEST_F(SharedRunsTest, SharedRunsWalkOneRangePassTogetherAndFinishAKilledOnesSegments) {
  std::ofstream(Path("walk.yaml")) << "batch: {job: walk, chunk_size: 10, workers: 2, runs: shared,"
                                      " range: {where: \"id > 100\"}}\n"
                                      "pacing: {adaptive: false}\n"
                                   << testing::LedgerOperation("0.3");
  // The first run starts the pass (alone it would take 9 s); the two that
  // join it once it walks are at work when it is killed.
  auto walked_by = [&](pid_t pid) {
    return Count("SELECT coalesce(max(done), 0) FROM coexist.runs WHERE job = 'walk' AND pid = " +
                 std::to_string(pid));
  };
  std::vector<pid_t> runs = {StartRun("walk.yaml", "walk0.log")};
  ASSERT_TRUE(testing::WaitUntil([&] { return walked_by(runs[0]) > 0; })) << Log("walk0.log");
  runs.push_back(StartRun("walk.yaml", "walk1.log"));
  runs.push_back(StartRun("walk.yaml", "walk2.log"));
  ASSERT_TRUE(testing::WaitUntil([&] { return walked_by(runs[1]) > 0 && walked_by(runs[2]) > 0; }))
      << Log("walk1.log") << Log("walk2.log");
  ASSERT_EQ(kill(runs[0], SIGKILL), 0);
  EXPECT_EQ(WaitForExit(runs[0]), 128 + SIGKILL);
  EXPECT_EQ(WaitForExit(runs[1]), 0) << Log("walk1.log");
  EXPECT_EQ(WaitForExit(runs[2]), 0) << Log("walk2.log");
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), kKeys);
  EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), kKeys);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE id > 100 AND stock <> 1"), 0);
  // One pass, split once, every segment walked.
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.range_checkpoints WHERE job = 'walk'"), 8);
  EXPECT_EQ(Count("SELECT count(DISTINCT pass) FROM coexist.range_checkpoints"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.range_checkpoints WHERE NOT finished"), 0);
  EXPECT_EQ(Count("SELECT sum(expected) FROM coexist.range_checkpoints"), kKeys);
  // Every run walked part of it, the killed one included.
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs WHERE job = 'walk' AND done > 0"), 3)
      << QueryValue(
             "SELECT string_agg(run_id || ' ' || outcome || ' ' || done, ', ')"
             " FROM coexist.runs WHERE job = 'walk'");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE job = 'walk'"), 0);
}

TEST_F(SharedRunsTest, JobsPauseHoldsEveryRunOfTheJobAndResumeLetsThemFinishEachItemOnce) {
  // Chunks of 0.1 s: two runs take several seconds, so the pause finds both
  // at work.
  WriteConfig("shared.yaml", "shared", "{name: online_priority}", "0.1");
  auto running = [&] {
    return Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'running'");
  };
  auto ledger = [&] { return Count("SELECT count(*) FROM ledger"); };
  auto held = [&] {
    return Count(
        "SELECT count(DISTINCT run_id) FROM coexist.events WHERE kind = 'throttle_start' AND "
        "details->>'reason' = 'job_paused'");
  };
  // Every running run heartbeats (alive) twice after `since`: time passed
  // while each of them was free to claim had it not been held.
  auto wait_two_heartbeats = [&] {
    std::string since = QueryValue("SELECT clock_timestamp()::text");
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'running' AND "
                 "heartbeat_at < '" +
                 since + "'::timestamptz + interval '1.5 s'") > 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
  };
  std::vector<pid_t> runs = {StartRun("shared.yaml", "run0"), StartRun("shared.yaml", "run1")};
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while ((running() < 2 || ledger() < 20) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(running(), 2);

  auto pause = Jobs(conninfo(), {"pause", "shared", "--reason", "deploy window"});
  ASSERT_EQ(pause.status, 0) << pause.output;
  EXPECT_NE(pause.output.find("job shared paused"), std::string::npos) << pause.output;
  auto paused_at = std::chrono::steady_clock::now();
  while (held() < 2 && std::chrono::steady_clock::now() < paused_at + 60s) {
    std::this_thread::sleep_for(10ms);
  }
  auto took = std::chrono::steady_clock::now() - paused_at;
  ASSERT_EQ(held(), 2) << Log("run0") << Log("run1");
  RecordProperty("held_after_ms", static_cast<int>(took / 1ms));
  // A heartbeat a second, then the chunk in hand (0.1 s).
  EXPECT_LT(took, 3s) << std::chrono::duration<double>(took).count() << " s";
  long long done = ledger();
  wait_two_heartbeats();
  EXPECT_EQ(ledger(), done) << "a held run applied a chunk";
  EXPECT_EQ(running(), 2) << "held runs stay alive";
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'throttle_start' AND "
                  "details->>'paused_by' LIKE 'admin:%' AND "
                  "details->>'pause_reason' = 'deploy window'"),
            2);

  // A run and a daemon started while the job is paused claim nothing.
  pid_t late = StartRun("shared.yaml", "late.log");
  pid_t daemon = StartRun("shared.yaml", "daemon.log", "daemon");
  std::string late_ones = "pid IN (" + std::to_string(late) + ", " + std::to_string(daemon) + ")";
  deadline = std::chrono::steady_clock::now() + 60s;
  while (running() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(running(), 4) << Log("late.log") << Log("daemon.log");
  wait_two_heartbeats();
  EXPECT_EQ(Count("SELECT sum(claimed) FROM coexist.runs WHERE " + late_ones), 0);
  EXPECT_EQ(ledger(), done);
  // Each run's heartbeat tells the watchers its pacer holds it, and why.
  EXPECT_EQ(QueryValue("SELECT string_agg(DISTINCT (details->'pacing'->>'state') || ': ' ||"
                       " (details->'pacing'->>'reason'), ', ') FROM coexist.runs"
                       " WHERE outcome = 'running'"),
            "paused: job_paused");
  auto list = Jobs(conninfo(), {});
  EXPECT_EQ(list.status, 0) << list.output;
  EXPECT_TRUE(
      std::regex_search(list.output, std::regex("\nshared +4 +[0-9]+/" + std::to_string(2 * kKeys) +
                                                " +0 +[-0-9.]+ +[-0-9a-z ]+ +paused since ")))
      << list.output;
  EXPECT_NE(list.output.find("): deploy window\n1 job\n"), std::string::npos) << list.output;

  // Paused again: said, nothing written.
  auto again = Jobs(conninfo(), {"pause", "shared", "--reason", "twice"});
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("job shared is paused already: nothing changed"), std::string::npos)
      << again.output;

  // Held runs stop cleanly on SIGTERM, having claimed nothing: the run with
  // items left (2), the daemon as always (0).
  ASSERT_EQ(kill(late, SIGTERM), 0);
  ASSERT_EQ(kill(daemon, SIGTERM), 0);
  EXPECT_EQ(WaitForExit(late), 2) << Log("late.log");
  EXPECT_EQ(WaitForExit(daemon), 0) << Log("daemon.log");
  EXPECT_EQ(
      QueryValue("SELECT string_agg(outcome || ' ' || claimed, ', ') FROM coexist.runs WHERE " +
                 late_ones),
      "incomplete 0, incomplete 0");

  auto resume = Jobs(conninfo(), {"resume", "shared"});
  ASSERT_EQ(resume.status, 0) << resume.output;
  EXPECT_NE(resume.output.find("job shared resumed"), std::string::npos) << resume.output;
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(WaitForExit(runs[i]), 0) << Log("run" + std::to_string(i));
  }
  EXPECT_EQ(ledger(), 2 * kKeys);
  EXPECT_EQ(Count("SELECT count(*) FROM (SELECT key FROM ledger GROUP BY key HAVING count(*) <> "
                  "2) k"),
            0)
      << "each key's two items applied once each";
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs WHERE details ? 'pacing'"), 0)
      << "a finished run's row keeps no pacer state";
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state <> 'done'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'throttle_stop' AND "
                  "details->>'reason' = 'job_paused'"),
            2)
      << "the resumed runs";

  // Resumed again: said, nothing written. The audit trail: one pause, one
  // resume, each with who (OS user and host; the role in details) and why.
  auto twice = Jobs(conninfo(), {"resume", "shared"});
  EXPECT_EQ(twice.status, 0) << twice.output;
  EXPECT_NE(twice.output.find("job shared is not paused: nothing changed"), std::string::npos)
      << twice.output;
  EXPECT_EQ(
      QueryValue("SELECT string_agg(kind || ' ' || job || ' ' || (actor LIKE 'admin:%@%')"
                 " || ' ' || coalesce(details->>'reason', details->>'paused_reason') || ' '"
                 " || (details->>'db_user' = current_user), ', ' ORDER BY event_id)"
                 " FROM coexist.events WHERE kind IN ('job_paused', 'job_resumed')"),
      "job_paused shared true deploy window true, job_resumed shared true deploy window true");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.job_pauses"), 0);
}

TEST_F(SharedRunsTest, PausingAnUnknownJobExits65AndWritesNothing) {
  long long events = Count("SELECT count(*) FROM coexist.events");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"pause", "nightly", "--reason", "typo"}, {"resume", "nightly"}}) {
    auto result = Jobs(conninfo(), args);
    EXPECT_EQ(result.status, 65) << result.output;
    EXPECT_NE(result.output.find("coexist: job 'nightly' is unknown here: no queue item, run or "
                                 "range checkpoint names it\nHINT: `coexist jobs` lists the jobs "
                                 "this database knows"),
              std::string::npos)
        << result.output;
  }
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.job_pauses"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events"), events);
  // A pause says why.
  auto no_reason = Jobs(conninfo(), {"pause", "shared"});
  EXPECT_EQ(no_reason.status, 64) << no_reason.output;
  EXPECT_NE(no_reason.output.find("--reason is required"), std::string::npos) << no_reason.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.job_pauses"), 0);
  // A job whose items are all done (they left the queue for their chunk's
  // row) and whose runs were purged is one `coexist jobs` lists: it can be
  // paused before its next enqueue.
  QueryValue(
      "INSERT INTO coexist.done_chunks (job, done_at, item_ids, record_keys, item_keys, "
      "attempts, payloads) VALUES ('finished', now(), '{1}', '{1}', '{NULL}', '{1}',"
      " ARRAY['{}']::jsonb[])");
  auto finished = Jobs(conninfo(), {"pause", "finished", "--reason", "hold the next run"});
  EXPECT_EQ(finished.status, 0) << finished.output;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.job_pauses WHERE job = 'finished'"), 1);
}

}  // namespace
}  // namespace coexist
