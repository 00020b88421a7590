// `coexist batch daemon` as systemd runs it: woken by NOTIFY on enqueue,
// draining on SIGTERM, reloading on SIGHUP, surviving a PostgreSQL restart,
// waiting for a busy job, serving /metrics, speaking sd_notify.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <regex>
#include <set>
#include <thread>

#include "db/cluster.h"
#include "tests/ops_test_support.h"
#include "tests/support/database_test.h"
#include "tests/support/ledger_operation.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ops_test::Slurp;
using ops_test::WaitFor;

class DaemonTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE public.ledger (key bigint NOT NULL, tag text NOT NULL)");
    dir_ = fs::temp_directory_path() / ("cx-daemon-" + database_name());
    fs::create_directories(dir_);
    config_ = (dir_ / "daemon.yaml").string();
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      WaitForExit(pid_);
    }
    if (!HasFailure()) fs::remove_all(dir_);
    DatabaseTest::TearDown();
  }

  void WriteConfig(const std::string& text) {
    // Written whole and renamed, as an editor or config management would.
    auto temp = config_ + ".tmp";
    std::ofstream(temp) << text;
    fs::rename(temp, config_);
  }
  static std::string Config(const std::string& extra, const std::string& operation,
                            int chunk = 10) {
    return "batch: {job: d, chunk_size: " + std::to_string(chunk) +
           "}\npolicy: {name: skip_locked}\n" + operation + extra;
  }
  void Start(const std::vector<std::string>& env = {}) {
    pid_ = ops_test::StartCoexist(
        env, {"--database-url", conninfo(), "--config", config_, "batch", "daemon"}, log_path());
  }
  // SIGTERM, then the exit status.
  int Stop() {
    kill(pid_, SIGTERM);
    int status = WaitForExit(pid_);
    pid_ = -1;
    return status;
  }
  fs::path log_path() const { return dir_ / "daemon.log"; }
  std::string Log() const { return Slurp(log_path()); }
  bool LogHas(const std::string& text) const { return Log().find(text) != std::string::npos; }
  bool WaitForLog(const std::string& text, std::chrono::milliseconds timeout = 20s) {
    return WaitFor([&] { return LogHas(text); }, timeout);
  }
  // The daemon's startup run has finished: it is waiting for work.
  bool WaitUntilIdle() {
    return WaitFor(
        [&] { return Count("SELECT count(*) FROM coexist.runs WHERE outcome <> 'running'") > 0; },
        20s);
  }
  void Enqueue(int first, int last) {
    QueryValue("INSERT INTO coexist.queue (job, record_key) SELECT 'd', g FROM generate_series(" +
               std::to_string(first) + ", " + std::to_string(last) + ") g");
  }
  long long Done() { return Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"); }
  void ExpectEachAppliedOnce(long long items) {
    EXPECT_EQ(Count("SELECT count(*) FROM ledger"), items);
    EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), items);
    EXPECT_EQ(Done(), items);
  }

  fs::path dir_;
  std::string config_;
  pid_t pid_ = -1;
};

TEST_F(DaemonTest, EnqueueWakesTheDaemonLongBeforeThePoll) {
  WriteConfig(Config("daemon: {poll_interval: 60s}\n", testing::LedgerOperation("0", "a")));
  Start();
  ASSERT_TRUE(WaitUntilIdle()) << Log();
  auto enqueued = std::chrono::steady_clock::now();
  Enqueue(1, 40);
  ASSERT_TRUE(WaitFor([&] { return Done() == 40; }, 20s)) << Log();
  auto waited = std::chrono::steady_clock::now() - enqueued;
  EXPECT_LT(waited, 20s) << "woken by the poll, not by NOTIFY";
  ExpectEachAppliedOnce(40);
  EXPECT_EQ(Stop(), 0) << Log();
  EXPECT_TRUE(LogHas("daemon stopped")) << Log();
}

TEST_F(DaemonTest, PurgesRowsOlderThanItsRetentionAfterItsFirstLook) {
  QueryValue(
      "INSERT INTO coexist.queue (job, record_key, state, done_at) VALUES"
      " ('d', 1, 'done', now() - interval '2 days'), ('d', 2, 'done', now() - interval '1 hour')");
  WriteConfig(Config("retention: {done_items: 1d}\n", testing::LedgerOperation("0", "a")));
  Start();
  ASSERT_TRUE(WaitForLog("old rows purged done_items=1 events=0 runs=0")) << Log();
  EXPECT_EQ(QueryValue("SELECT string_agg(record_key::text, ',') FROM coexist.items"), "2");
  EXPECT_EQ(QueryValue("SELECT actor FROM coexist.events WHERE kind = 'queue_purged'"), "daemon:d");
  EXPECT_EQ(Stop(), 0) << Log();
}

TEST_F(DaemonTest, SigtermMidRunDrainsAndLeavesNothingClaimed) {
  // Fixed chunks of 5 items, 50 ms each: the signal comes mid-queue.
  WriteConfig(Config("daemon: {poll_interval: 60s}\npacing: {adaptive: false}\n",
                     testing::LedgerOperation("0.05", "a"), 5));
  Enqueue(1, 100);
  Start();
  ASSERT_TRUE(WaitFor([&] { return Count("SELECT count(*) FROM ledger") >= 10; }, 20s)) << Log();
  EXPECT_EQ(Stop(), 0) << Log();
  long long applied = Count("SELECT count(*) FROM ledger");
  EXPECT_LT(applied, 100) << "the queue drained before the signal; make it slower";
  ExpectEachAppliedOnce(applied);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'queued' AND attempts = 0"),
            100 - applied);
  EXPECT_EQ(
      Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'running' OR ended_at IS NULL"), 0);
  EXPECT_TRUE(LogHas("daemon stopping, draining signal=15")) << Log();
}

TEST_F(DaemonTest, SighupWithABrokenFileKeepsTheOldConfigAndAGoodFileApplies) {
  WriteConfig(Config("daemon: {poll_interval: 60s}\n", testing::LedgerOperation("0", "old")));
  Start();
  ASSERT_TRUE(WaitUntilIdle()) << Log();

  WriteConfig(Config("daemon: {poll_interval: 60s, pol_interval: 1s}\n",
                     testing::LedgerOperation("0", "bad")));
  kill(pid_, SIGHUP);
  ASSERT_TRUE(WaitForLog("configuration reload rejected, old configuration kept")) << Log();
  EXPECT_TRUE(LogHas(config_ + ":9:30: daemon.pol_interval: unknown key")) << Log();
  Enqueue(1, 10);
  ASSERT_TRUE(WaitFor([&] { return Done() == 10; }, 20s)) << Log();
  EXPECT_EQ(Count("SELECT count(*) FROM ledger WHERE tag = 'old'"), 10);

  WriteConfig(Config("daemon: {poll_interval: 60s}\n", testing::LedgerOperation("0", "new")));
  kill(pid_, SIGHUP);
  ASSERT_TRUE(WaitForLog("configuration reloaded")) << Log();
  Enqueue(11, 20);
  ASSERT_TRUE(WaitFor([&] { return Done() == 20; }, 20s)) << Log();
  EXPECT_EQ(Count("SELECT count(*) FROM ledger WHERE tag = 'new'"), 10);
  ExpectEachAppliedOnce(20);
  EXPECT_EQ(Stop(), 0) << Log();
}

TEST_F(DaemonTest, AnOperationTheDatabaseRejectsExits78AtStartAndIsRolledBackOnReload) {
  std::string missing =
      "operation:\n  chunk_sql: INSERT INTO no_such_table SELECT unnest($1::bigint[])\n";
  WriteConfig(Config("daemon: {poll_interval: 60s}\n", missing));
  Start();
  EXPECT_EQ(WaitForExit(pid_), 78) << Log();
  pid_ = -1;
  EXPECT_TRUE(LogHas("operation.chunk_sql: the database rejects it")) << Log();

  WriteConfig(Config("daemon: {poll_interval: 60s}\n", testing::LedgerOperation("0", "old")));
  Start();
  ASSERT_TRUE(WaitUntilIdle()) << Log();
  WriteConfig(Config("daemon: {poll_interval: 60s}\n", missing));
  kill(pid_, SIGHUP);
  ASSERT_TRUE(WaitForLog("reloaded configuration rejected by the database, previous one restored"))
      << Log();
  Enqueue(1, 10);
  ASSERT_TRUE(WaitFor([&] { return Done() == 10; }, 20s)) << Log();
  EXPECT_EQ(Count("SELECT count(*) FROM ledger WHERE tag = 'old'"), 10);
  EXPECT_EQ(Stop(), 0) << Log();
}

// A run that stopped because every item failed (batch.max_consecutive_failures)
// is not followed by another at the next wake: an enqueue's NOTIFY does not
// start one while the daemon holds; a reload with the fixed operation ends
// the hold at once and the queue drains, each item applied once.
TEST_F(DaemonTest, HoldsRunsAfterItemsFailInARowUntilAReloadFixesTheOperation) {
  std::string failing =
      "operation:\n  chunk_sql: INSERT INTO ledger (key, tag) SELECT NULL, 'x' FROM "
      "unnest($1::bigint[])\n";
  auto config = [](const std::string& operation) {
    return "batch: {job: d, chunk_size: 10, max_consecutive_failures: 5}\n"
           "policy: {name: skip_locked}\ndaemon: {poll_interval: 60s}\n" +
           operation;
  };
  WriteConfig(config(failing));
  Enqueue(1, 100);
  Start();
  ASSERT_TRUE(WaitForLog("run stopped: items fail in a row, holding runs")) << Log();
  EXPECT_TRUE(LogHas("hold=1m")) << Log();
  auto charged = Count("SELECT count(*) FROM coexist.items WHERE attempts > 0");
  EXPECT_LT(charged, 20);
  Enqueue(101, 110);  // NOTIFY wakes the daemon, which holds
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs"), 1) << Log();
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE attempts > 0"), charged);

  WriteConfig(config(testing::LedgerOperation("0", "fixed")));
  kill(pid_, SIGHUP);
  ASSERT_TRUE(WaitFor([&] { return Done() == 110; }, 20s)) << Log();
  ExpectEachAppliedOnce(110);
  EXPECT_EQ(Stop(), 0) << Log();
}

TEST_F(DaemonTest, FinishesItsQueueAcrossAPostgresqlRestart) {
  WriteConfig(
      Config("daemon: {poll_interval: 1s, reconnect_initial: 100ms, reconnect_max: 1s}\n"
             "pacing: {adaptive: false}\n",
             testing::LedgerOperation("0.05", "a"), 5));
  Enqueue(1, 100);
  Start();
  ASSERT_TRUE(WaitFor([&] { return Count("SELECT count(*) FROM ledger") >= 10; }, 20s)) << Log();
  auto& cluster = testing::ClusterEnvironment::Get().cluster();
  cluster.StopServer();
  std::this_thread::sleep_for(1s);
  cluster.StartServer();
  ASSERT_TRUE(WaitFor([&] { return Done() == 100; }, 60s)) << Log();
  ExpectEachAppliedOnce(100);
  EXPECT_TRUE(LogHas("database unavailable, retrying")) << Log();
  EXPECT_GE(Count("SELECT count(*) FROM coexist.runs"), 2) << "a new run after the restart";

  // Again while it waits for work: the listening connection breaks, the
  // daemon reconnects and LISTENs again, and the next enqueue wakes it.
  cluster.StopServer();
  std::this_thread::sleep_for(500ms);
  cluster.StartServer();
  auto connects = [&] {
    std::string log = Log();
    int n = 0;
    for (size_t at = 0; (at = log.find("database connected", at)) != std::string::npos; ++at) ++n;
    return n;
  };
  ASSERT_TRUE(WaitFor([&] { return connects() >= 3; }, 20s)) << Log();
  Enqueue(101, 110);
  ASSERT_TRUE(WaitFor([&] { return Done() == 110; }, 20s)) << Log();
  ExpectEachAppliedOnce(110);
  EXPECT_EQ(Stop(), 0) << Log();
}

// pg_ctl restart -m immediate under a run, with the default pacing (its
// health sampler loses its connection too): the run ends, the daemon
// reconnects, abandons the run, hands its rows back and drains the queue.
class DaemonRestartTest : public DaemonTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(DaemonRestartTest, DrainsItsQueueAfterAnImmediateRestartMidRun) {
  // The run's row must outlive the crash to be found abandoned: the stop
  // comes ~100 ms after the run starts, inside the throwaway cluster's
  // window of asynchronous commits (it once lost the row whole).
  MakeCommitsDurable();
  WriteConfig(
      "target: {owner_column: owner}\nbatch: {job: d, chunk_size: 5, workers: 2}\npolicy: {name: " +
      std::string(GetParam()) +
      "}\n"
      "daemon: {poll_interval: 1s, reconnect_initial: 100ms, reconnect_max: 1s}\n" +
      testing::LedgerOperation("0.05", "a"));
  Enqueue(1, 100);
  Start();
  ASSERT_TRUE(WaitFor([&] { return Count("SELECT count(*) FROM ledger") >= 10; }, 20s)) << Log();
  auto& cluster = testing::ClusterEnvironment::Get().cluster();
  cluster.StopServer(db::TempCluster::StopMode::kImmediate);
  std::this_thread::sleep_for(300ms);
  cluster.StartServer();
  ASSERT_TRUE(WaitFor([&] { return Done() == 100; }, 60s)) << Log();
  ExpectEachAppliedOnce(100);
  EXPECT_EQ(Count("SELECT count(*) FROM products WHERE owner <> 'online'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.takeovers"), 0);
  ASSERT_TRUE(WaitFor(
      [&] { return Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'running'") == 0; },
      20s))
      << Log();
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'abandoned'"), 1) << Log();
  EXPECT_EQ(Stop(), 0) << Log();
}

INSTANTIATE_TEST_SUITE_P(Policies, DaemonRestartTest,
                         ::testing::Values("skip_locked", "status_partition", "batch_priority"));

TEST_F(DaemonTest, WaitsWhileAnotherRunHoldsTheJob) {
  auto holder = Connect("other-run");
  pqxx::nontransaction(*holder).exec("SELECT coexist.try_lock_job('d')");
  WriteConfig(Config("daemon: {poll_interval: 200ms}\n", testing::LedgerOperation("0", "a")));
  Enqueue(1, 10);
  Start();
  ASSERT_TRUE(WaitForLog("job busy, waiting")) << Log();
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 0);
  holder.reset();
  ASSERT_TRUE(WaitFor([&] { return Done() == 10; }, 20s)) << Log();
  ExpectEachAppliedOnce(10);
  EXPECT_EQ(Stop(), 0) << Log();
}

TEST_F(DaemonTest, WaitsOutsideTheWindowAndRunsWhenOneIsActive) {
  auto config = [](const std::string& policy) {
    return "batch: {job: d, chunk_size: 10}\n" + policy + testing::LedgerOperation("0", "a") +
           "daemon: {poll_interval: 200ms}\n";
  };
  WriteConfig(config(ops_test::WindowPolicy(2, 1)));  // opens in two hours
  Enqueue(1, 10);
  Start();
  ASSERT_TRUE(WaitForLog("claiming not allowed now, waiting reason=outside_window")) << Log();
  std::this_thread::sleep_for(500ms);  // a few polls
  EXPECT_EQ(Done(), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.events WHERE kind = 'claim_refused'"), 1)
      << "only the startup run asks; the polls check the window without a run";

  WriteConfig(config(ops_test::WindowPolicy(-1, 3)));  // active now
  kill(pid_, SIGHUP);
  ASSERT_TRUE(WaitFor([&] { return Done() == 10; }, 20s)) << Log();
  ExpectEachAppliedOnce(10);
  EXPECT_EQ(Stop(), 0) << Log();
}

// GET /metrics over a plain TCP socket on loopback.
std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  EXPECT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, n);
  close(fd);
  return response;
}

TEST_F(DaemonTest, ServesCumulativeMetricsOnLoopback) {
  WriteConfig(Config("daemon: {poll_interval: 60s}\nmetrics: {listen: \"127.0.0.1:0\"}\n",
                     testing::LedgerOperation("0", "a")));
  Start();
  ASSERT_TRUE(WaitForLog("metrics endpoint listening")) << Log();
  std::smatch match;
  std::string log = Log();
  ASSERT_TRUE(
      std::regex_search(log, match, std::regex("metrics endpoint listening .*port=([0-9]+)")));
  int port = std::stoi(match[1]);
  ASSERT_TRUE(WaitUntilIdle()) << Log();
  QueryValue("SELECT coexist.acquire_edit_lock('products', 3, 'alice', '10 minutes')");
  Enqueue(1, 25);  // item 3 is deferred: edit-locked
  ASSERT_TRUE(WaitFor([&] { return Done() == 24; }, 20s)) << Log();
  std::map<std::string, double> samples;
  // The counters are updated when the run returns, a moment after commit.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto response = HttpGet(port, "/metrics");
        auto body = response.find("\r\n\r\n");
        if (response.find(" 200 ") == std::string::npos || body == std::string::npos) return false;
        samples = ops_test::ParseExposition(response.substr(body + 4));
        auto it = samples.find(R"(coexist_daemon_items_total{job="d",outcome="done"})");
        return it != samples.end() && it->second == 24;
      },
      10s))
      << Log();
  // The startup run found nothing to do; the enqueue's run deferred one item.
  EXPECT_EQ(samples.at(R"(coexist_daemon_runs_total{job="d",outcome="succeeded"})"), 1);
  EXPECT_EQ(samples.at(R"(coexist_daemon_runs_total{job="d",outcome="incomplete"})"), 1);
  EXPECT_EQ(samples.at(R"(coexist_daemon_runs_total{job="d",outcome="failed"})"), 0);
  EXPECT_EQ(samples.at(R"(coexist_daemon_deferrals_total{job="d",reason="edit_locked"})"), 1);
  EXPECT_EQ(samples.at(R"(coexist_daemon_items_total{job="d",outcome="deferred"})"), 1);
  EXPECT_EQ(samples.at(R"(coexist_daemon_database_connected{job="d"})"), 1);
  EXPECT_GT(samples.at(R"(coexist_daemon_last_success_timestamp_seconds{job="d"})"), 0);
  EXPECT_EQ(Stop(), 0) << Log();
}

// metrics.dashboard: the daemon's one port serves the live dashboard (the
// page and /api/state, docs/operations.md "The dashboard") beside /metrics.
TEST_F(DaemonTest, ServesTheDashboardBesideMetricsOnItsPort) {
  WriteConfig(
      Config("daemon: {poll_interval: 60s}\n"
             "metrics: {listen: \"127.0.0.1:0\", dashboard: true}\n",
             testing::LedgerOperation("0", "a")));
  Start();
  ASSERT_TRUE(WaitForLog("metrics endpoint listening")) << Log();
  std::smatch match;
  std::string log = Log();
  ASSERT_TRUE(std::regex_search(
      log, match, std::regex("metrics endpoint listening .*port=([0-9]+) dashboard=read-only")))
      << log;
  int port = std::stoi(match[1]);
  Enqueue(1, 5);
  ASSERT_TRUE(WaitFor([&] { return Done() == 5; }, 20s)) << Log();
  auto page = HttpGet(port, "/");
  EXPECT_NE(page.find(" 200 "), std::string::npos) << page;
  EXPECT_NE(page.find("<title>coexist dashboard</title>"), std::string::npos) << page;
  auto state = HttpGet(port, "/api/state");
  auto body = state.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos) << state;
  auto json = nlohmann::json::parse(state.substr(body + 4));
  EXPECT_EQ(json["controls"], false);
  ASSERT_EQ(json["jobs"].size(), 1u) << json.dump();
  EXPECT_EQ(json["jobs"][0]["job"], "d");
  EXPECT_EQ(json["jobs"][0]["done"], 5);
  EXPECT_TRUE(WaitFor(
      [&] {
        return HttpGet(port, "/metrics")
                   .find("coexist_daemon_items_total{job=\"d\",outcome=\"done\"} 5") !=
               std::string::npos;
      },
      10s))
      << HttpGet(port, "/metrics");
  EXPECT_EQ(Stop(), 0) << Log();
}

// Receives what sd_notify sends, as systemd would.
class NotifySocket {
 public:
  explicit NotifySocket(const fs::path& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    timeval timeout{0, 100'000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~NotifySocket() {
    close(fd_);
    fs::remove(path_);
  }
  // Collects messages until `done` holds for what was received or timeout.
  bool ReceiveUntil(const std::function<bool(const std::vector<std::string>&)>& done,
                    std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done(messages)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      char buffer[4096];
      ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n > 0) messages.emplace_back(buffer, n);
    }
    return true;
  }
  std::vector<std::string> messages;

 private:
  fs::path path_;
  int fd_ = -1;
};

bool Has(const std::vector<std::string>& messages, const std::string& prefix) {
  for (const auto& m : messages) {
    if (m.starts_with(prefix)) return true;
  }
  return false;
}

TEST_F(DaemonTest, SpeaksSystemdsNotifyProtocol) {
  NotifySocket notify(dir_ / "notify.sock");
  // 10 fixed chunks of 0.3 s: long enough for a live STATUS during the run.
  WriteConfig(Config("daemon: {poll_interval: 60s}\npacing: {adaptive: false}\n",
                     testing::LedgerOperation("0.3", "a"), 5));
  Enqueue(1, 50);
  Start({"NOTIFY_SOCKET=" + (dir_ / "notify.sock").string(), "WATCHDOG_USEC=200000"});
  std::regex live("STATUS=running; runs 1, done [1-9][0-9]*, .*");
  ASSERT_TRUE(notify.ReceiveUntil(
      [&](const auto& m) {
        int watchdogs = 0;
        bool running = false;
        for (const auto& s : m) {
          watchdogs += s == "WATCHDOG=1";
          running = running || std::regex_match(s, live);
        }
        return Has(m, "READY=1") && running && Has(m, "STATUS=idle; runs 1, done 50") &&
               watchdogs >= 3;
      },
      30s))
      << Log();
  kill(pid_, SIGTERM);
  EXPECT_TRUE(notify.ReceiveUntil([](const auto& m) { return Has(m, "STOPPING=1"); }, 10s));
  EXPECT_EQ(WaitForExit(pid_), 0) << Log();
  pid_ = -1;
  // READY comes before the first STATUS.
  auto ready = std::find(notify.messages.begin(), notify.messages.end(), "READY=1");
  ASSERT_NE(ready, notify.messages.end());
  for (auto it = notify.messages.begin(); it != ready; ++it)
    EXPECT_FALSE(it->starts_with("STATUS="));
}

}  // namespace
}  // namespace coexist
