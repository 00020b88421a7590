// pacing.cpu_priority and pacing.synchronous_commit through the real
// binary: with the prioritize extension every chunk runs in a backend at
// the configured nice value, and the worker threads run at it while the main
// thread does not; without the extension the run still succeeds, warns once
// and records the fix; `config check --database` and `db install` say
// whether the extension is installed; synchronous_commit is what each
// chunk's transaction runs with. (Exactly-once under crashes with
// synchronous_commit off: tests/batch_crash_test.cpp.)

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <pqxx/pqxx>
#include <sstream>
#include <thread>

#include "common/subprocess.h"
#include "tests/support/database_test.h"
#include "tests/support/ledger_operation.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr int kItems = 600;

class BatchPriorityTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE ledger (key bigint NOT NULL, tag text)");
    // Only the batch's own SET can make it anything else.
    MakeCommitsDurable();
    QueryValue("DELETE FROM products");
    QueryValue("INSERT INTO products (id, stock) SELECT g, 0 FROM generate_series(1, " +
               std::to_string(kItems) + ") g");
    dir_ = fs::temp_directory_path() / ("cx-priority-" + database_name());
    fs::create_directories(dir_);
    config_ = (dir_ / "job.yaml").string();
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
    DatabaseTest::TearDown();
  }
  // Two workers, fixed chunks of 20 at >= 20 ms each; `tag` is an SQL
  // expression the ledger records for each item (see LedgerOperation).
  void WriteConfig(const std::string& pacing, const std::string& tag) {
    std::ofstream(config_) << "batch: {job: priority, chunk_size: 20, workers: 2}\n"
                           << "pacing: " << pacing << "\n"
                           << testing::LedgerOperation("0.02", "' || " + tag + " || '");
  }
  CommandResult Coexist(std::vector<std::string> args) {
    std::vector<std::string> argv = {COEXIST_BINARY, "--database-url", conninfo(), "--config",
                                     config_};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }
  void Enqueue() {
    auto enqueued = Coexist({"enqueue", "--select", "SELECT id FROM products"});
    ASSERT_EQ(enqueued.status, 0) << enqueued.output;
  }
  void ExpectEveryItemAppliedOnce() {
    EXPECT_EQ(Count("SELECT count(*) FROM ledger"), kItems);
    EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), kItems);
  }
  std::string Tags() { return QueryValue("SELECT string_agg(DISTINCT tag, ',') FROM ledger"); }

  fs::path dir_;
  std::string config_;
};

// The nice value of each thread of `pid`, by thread id (field 19 of
// /proc/PID/task/TID/stat, the 17th after the command's closing paren).
std::map<pid_t, int> ThreadNiceValues(pid_t pid) {
  std::map<pid_t, int> nice;
  std::error_code error;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", error)) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), {});
    auto paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(stat.substr(paren + 2));
    std::string field;
    for (int i = 0; i < 17 && fields >> field; ++i) {
    }
    nice[std::stoi(task.path().filename().string())] = std::stoi(field);
  }
  return nice;
}

TEST_F(BatchPriorityTest, LowPriorityRenicesTheWorkersAndTheirBackendsOnly) {
  QueryValue("CREATE EXTENSION prioritize SCHEMA public");
  WriteConfig("{adaptive: false, cpu_priority: low}",
              "get_backend_priority(pg_backend_pid())::text");
  ASSERT_NO_FATAL_FAILURE(Enqueue());
  SpawnOptions options;
  options.argv = {COEXIST_BINARY, "--database-url", conninfo(), "--config",
                  config_,        "batch",          "run"};
  options.output_path = (dir_ / "run.log").string();
  options.parent_death_signal = SIGKILL;
  pid_t pid = Spawn(options);
  // Both workers have done a chunk: both threads have lowered themselves.
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (Count("SELECT count(*) FROM ledger") < 100 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  auto nice = ThreadNiceValues(pid);
  int low = 0;
  for (const auto& [tid, value] : nice) low += value == 19 ? 1 : 0;
  EXPECT_EQ(low, 2) << "one thread per worker";
  EXPECT_EQ(nice[pid], 0) << "the main thread (control loop) keeps its priority";
  ASSERT_EQ(WaitForExit(pid), 0);
  ExpectEveryItemAppliedOnce();
  EXPECT_EQ(Tags(), "19") << "every chunk ran in a backend at nice 19";
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'cpu_priority_unavailable'"),
            0);
}

TEST_F(BatchPriorityTest, WithoutTheExtensionTheRunGoesOnAndSaysSoOnce) {
  WriteConfig("{adaptive: false, cpu_priority: 10}", "'x'");
  ASSERT_NO_FATAL_FAILURE(Enqueue());
  auto run = Coexist({"batch", "run"});
  ASSERT_EQ(run.status, 0) << run.output;
  ExpectEveryItemAppliedOnce();
  std::string warning = "pacing.cpu_priority: the prioritize extension is not installed";
  auto first = run.output.find(warning);
  EXPECT_NE(first, std::string::npos) << run.output;
  EXPECT_EQ(run.output.find(warning, first + 1), std::string::npos) << "said once\n" << run.output;
  EXPECT_EQ(QueryValue("SELECT string_agg(details::text, ';') FROM coexist.events WHERE kind = "
                       "'cpu_priority_unavailable'"),
            R"({"fix": "run CREATE EXTENSION prioritize; as a superuser in the job's database", )"
            R"("available": true, "cpu_priority": 10})");
}

TEST_F(BatchPriorityTest, ConfigCheckAndDbInstallSayWhetherTheExtensionIsInstalled) {
  WriteConfig("{cpu_priority: low}", "'x'");
  std::string missing =
      "prioritize extension: not installed (available on the server); the batch's backends run "
      "at the server's priority: run CREATE EXTENSION prioritize; as a superuser in the job's "
      "database\n";
  auto check = Coexist({"config", "check", config_, "--database"});
  EXPECT_EQ(check.status, 0) << check.output;
  EXPECT_NE(check.output.find("\n  " + missing), std::string::npos) << check.output;
  auto install = Coexist({"db", "install"});
  EXPECT_EQ(install.status, 0) << install.output;
  EXPECT_NE(install.output.find("\n" + missing), std::string::npos) << install.output;

  QueryValue("CREATE EXTENSION prioritize SCHEMA public");
  std::string installed =
      "prioritize extension: installed in schema public; the batch's backends run at nice 19 "
      "(pacing.cpu_priority)\n";
  check = Coexist({"config", "check", config_, "--database"});
  EXPECT_NE(check.output.find("\n  " + installed), std::string::npos) << check.output;
  install = Coexist({"db", "install"});
  EXPECT_NE(install.output.find("\n" + installed), std::string::npos) << install.output;
}

TEST_F(BatchPriorityTest, SynchronousCommitIsTheBatchSessionsOnly) {
  WriteConfig("{synchronous_commit: local}", "current_setting('synchronous_commit')");
  ASSERT_NO_FATAL_FAILURE(Enqueue());
  auto run = Coexist({"batch", "run"});
  ASSERT_EQ(run.status, 0) << run.output;
  ExpectEveryItemAppliedOnce();
  EXPECT_EQ(Tags(), "local");
  auto other = Connect();
  EXPECT_EQ(pqxx::nontransaction(*other).exec1("SHOW synchronous_commit")[0].as<std::string>(),
            "on")
      << "another session's is the database's";
}

// The default keeps the server's settings: nothing reniced, nothing SET.
TEST_F(BatchPriorityTest, WithoutTheKeysNothingChanges) {
  QueryValue("CREATE EXTENSION prioritize SCHEMA public");
  WriteConfig("{adaptive: false}",
              "current_setting('synchronous_commit') || '/' || "
              "get_backend_priority(pg_backend_pid())::text");
  ASSERT_NO_FATAL_FAILURE(Enqueue());
  auto run = Coexist({"batch", "run"});
  ASSERT_EQ(run.status, 0) << run.output;
  ExpectEveryItemAppliedOnce();
  EXPECT_EQ(Tags(), "on/0");
}

}  // namespace
}  // namespace coexist
