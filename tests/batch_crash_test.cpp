// The coexist executable under kill -9 and started twice for one job: every
// item must be applied exactly once (checked in the operation's ledger), and
// a second run of a job that is running refuses at once (exit status 4).

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/subprocess.h"
#include "tests/support/database_test.h"
#include "tests/support/ledger_operation.h"

namespace coexist {
namespace {

using namespace std::chrono_literals;

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
    // Fixed chunks of 20 at >= 30 ms each: the run lasts a few seconds.
    std::ofstream(config_) << "batch: {job: crash, chunk_size: 20, workers: 2}\n"
                              "pacing: {adaptive: false}\n"
                              "policy: {name: skip_locked}\n"
                           << testing::LedgerOperation("0.03");
    auto status = RunCommand({COEXIST_BINARY, "--database-url", conninfo(), "--config", config_,
                              "enqueue", "--select", "SELECT id FROM products"});
    ASSERT_EQ(status.status, 0) << status.output;
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
    DatabaseTest::TearDown();
  }

  pid_t StartRun(const std::string& log) {
    SpawnOptions options;
    options.argv = {COEXIST_BINARY, "--database-url", conninfo(), "--config",
                    config_,        "batch",          "run"};
    options.output_path = (dir_ / log).string();
    options.parent_death_signal = SIGKILL;
    return Spawn(options);
  }
  void ExpectEveryItemAppliedOnce() {
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.queue WHERE state = 'done'"), kItems);
    EXPECT_EQ(Count("SELECT count(*) FROM ledger"), kItems);
    EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), kItems);
    EXPECT_EQ(Count("SELECT sum(stock) FROM products WHERE id > 100"), kItems - 100);
  }

  std::filesystem::path dir_;
  std::string config_;
};

TEST_F(BatchCrashTest, KillNineMidRunThenRerunAppliesEveryItemOnce) {
  pid_t pid = StartRun("first.log");
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (Count("SELECT count(*) FROM ledger") < 300 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  EXPECT_EQ(WaitForExit(pid), 128 + SIGKILL);
  long long before = Count("SELECT count(*) FROM ledger");
  EXPECT_LT(before, kItems) << "the run finished before the kill; make it slower";
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.queue WHERE state = 'done'"), before);
  EXPECT_EQ(QueryValue("SELECT outcome FROM coexist.runs"), "running");

  pid = StartRun("second.log");
  EXPECT_EQ(WaitForExit(pid), 0);
  ExpectEveryItemAppliedOnce();
  EXPECT_EQ(QueryValue("SELECT string_agg(outcome, ',' ORDER BY run_id) FROM coexist.runs"),
            "abandoned,succeeded");
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
  EXPECT_NE(second.output.find("job crash is already running: run "), std::string::npos)
      << second.output;
  EXPECT_LT(Count("SELECT count(*) FROM ledger"), kItems) << "the first run ended too soon";

  EXPECT_EQ(WaitForExit(first), 0);
  ExpectEveryItemAppliedOnce();
  EXPECT_EQ(QueryValue("SELECT string_agg(outcome, ',') FROM coexist.runs"), "succeeded")
      << "the refused run must leave no runs row";
  // The lock died with the first run's session: the next run goes ahead.
  EXPECT_EQ(WaitForExit(StartRun("third.log")), 0);
}

}  // namespace
}  // namespace coexist
