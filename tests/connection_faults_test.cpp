// What the chaos suite found around the sessions and the server, each
// against the real `coexist` binary: another role squatting a run's lock
// or the job's lock is named and bounded; an option value libpq refuses is
// a configuration error (78), never retried; a server that stops answering
// (SIGSTOP, its kernel still acknowledging) is noticed within
// database.stall_timeout, and nothing is lost.

#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <pqxx/pqxx>
#include <thread>

#include "common/error.h"
#include "db/connection.h"
#include "tests/ops_test_support.h"
#include "tests/support/database_test.h"
#include "tests/support/ledger_operation.h"

namespace coexist {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ops_test::Slurp;
using ops_test::WaitFor;

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The server of the test binary's cluster, stopped (SIGSTOP) with every
// process it started: its kernel still accepts and acknowledges, nothing
// answers. Resumed (SIGCONT) by Thaw() or at the end of the scope, so no
// test leaves a process stopped.
class FrozenServer {
 public:
  FrozenServer() {
    pid_t postmaster = testing::ClusterEnvironment::Get().cluster().server_pid();
    // The postmaster first: it forks no new backend once stopped.
    Stop(postmaster);
    for (const auto& entry : fs::directory_iterator("/proc")) {
      std::string name = entry.path().filename();
      if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
      std::ifstream stat(entry.path() / "stat");
      std::string line;
      std::getline(stat, line);
      auto close = line.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(line.substr(close + 2));
      char state = 0;
      pid_t parent = 0;
      rest >> state >> parent;
      if (parent == postmaster) Stop(std::stoi(name));
    }
  }
  ~FrozenServer() { Thaw(); }
  FrozenServer(const FrozenServer&) = delete;
  FrozenServer& operator=(const FrozenServer&) = delete;

  void Thaw() {
    for (pid_t pid : stopped_) kill(pid, SIGCONT);
    stopped_.clear();
  }
  size_t processes() const { return stopped_.size(); }

 private:
  void Stop(pid_t pid) {
    if (kill(pid, SIGSTOP) == 0) stopped_.push_back(pid);
  }
  std::vector<pid_t> stopped_;
};

class ConnectionFaultsTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    QueryValue("CREATE TABLE public.ledger (key bigint NOT NULL)");
    dir_ = fs::temp_directory_path() / ("cx-conn-" + database_name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (pid_t pid : children_) {
      if (kill(pid, SIGKILL) == 0) WaitForExit(pid);
    }
    if (!HasFailure()) fs::remove_all(dir_);
    DatabaseTest::TearDown();
  }

  // `sections` (batch: {job: d, ...} at least), skip_locked, and the
  // ledger operation whose chunks sleep `sleep` s.
  std::string WriteConfig(const std::string& sections, const std::string& sleep = "0") {
    auto path = dir_ / "job.yaml";
    std::ofstream(path) << sections << "policy: {name: skip_locked}\n"
                        << testing::LedgerOperation(sleep);
    return path.string();
  }
  // `coexist --config CONFIG args...` on this test's database, output to
  // `log` in the test's folder.
  pid_t Start(const std::vector<std::string>& args, const std::string& log,
              const std::vector<std::string>& env = {}, const std::string& url = "") {
    std::vector<std::string> argv = {"--database-url", url.empty() ? conninfo() : url};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_t pid = ops_test::StartCoexist(env, argv, dir_ / log);
    children_.push_back(pid);
    return pid;
  }
  // The exit status of `pid` if it ends within `limit`; else nullopt (the
  // child is killed in TearDown).
  std::optional<int> ExitWithin(pid_t pid, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int raw = 0;
      pid_t done = waitpid(pid, &raw, WNOHANG);
      if (done == pid) {
        std::erase(children_, pid);
        return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
      }
      std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
  }
  struct Ran {
    std::optional<int> status;  // nullopt: still running after the limit
    std::string log;
  };
  Ran Run(const std::vector<std::string>& args, const std::string& log,
          const std::vector<std::string>& env = {}, const std::string& url = "",
          std::chrono::milliseconds limit = 120s) {
    pid_t pid = Start(args, log, env, url);
    auto status = ExitWithin(pid, limit);
    return {status, Slurp(dir_ / log)};
  }
  std::string Log(const std::string& log) { return Slurp(dir_ / log); }

  void Enqueue(int first, int last) {
    QueryValue("INSERT INTO coexist.queue (job, record_key) SELECT 'd', g FROM generate_series(" +
               std::to_string(first) + ", " + std::to_string(last) + ") g");
  }
  long long Done() { return Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"); }
  void ExpectEachAppliedOnce(long long items) {
    EXPECT_EQ(Count("SELECT count(*) FROM ledger"), items);
    EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), items);
    EXPECT_EQ(Done(), items);
    EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state <> 'done'"), 0);
  }

  // A session of another role (LOGIN, nothing granted), application_name
  // squatter-app.
  std::unique_ptr<pqxx::connection> ConnectAsAnotherRole() {
    role_ = "sq_" + database_name();
    QueryValue("DO $$ BEGIN CREATE ROLE " + role_ +
               " LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
    return std::make_unique<pqxx::connection>(conninfo() + " user=" + role_ +
                                              " application_name=squatter-app");
  }

  fs::path dir_;
  std::vector<pid_t> children_;
  std::string role_;
};

// Sessions holding job d's lock.
constexpr const char* kJobSessions =
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1668244857 "
    "AND objid = hashtext('d')::oid";

// --- 8: a squatted run lock or job lock ----------------------------------

// The key of the run the next `batch run` inserts: another role's session
// holds pg_advisory_lock(1668244856, next run_id) (the chaos finding).
// `batch run` used to block in pg_advisory_lock forever, without a log
// line, deaf to SIGTERM.
TEST_F(ConnectionFaultsTest, ASquattedRunLockIsNamedAndTheRunExitsFourNotHangs) {
  auto config = WriteConfig("batch: {job: d}\n");
  Enqueue(1, 20);
  long long next = Count("SELECT nextval(pg_get_serial_sequence('coexist.runs', 'run_id'))") + 1;
  auto squatter = ConnectAsAnotherRole();
  int squatter_pid = pqxx::nontransaction(*squatter).exec1("SELECT pg_backend_pid()")[0].as<int>();
  pqxx::nontransaction(*squatter).exec("SELECT pg_advisory_lock(1668244856, " +
                                       std::to_string(next) + ")");

  auto ran = Run({"--config", config, "batch", "run"}, "squatted.log", {}, "", 60s);
  ASSERT_TRUE(ran.status) << "batch run still waits for its run lock\n" << ran.log;
  EXPECT_EQ(*ran.status, 4) << ran.log;
  std::string who = "pid " + std::to_string(squatter_pid) + ", role " + role_ +
                    ", application_name 'squatter-app'";
  EXPECT_TRUE(Has(ran.log, "run lock held by another session, run not started job=d run_id=" +
                               std::to_string(next)))
      << ran.log;
  EXPECT_TRUE(
      Has(ran.log, "coexist: job d's run " + std::to_string(next) + " cannot take its own lock"))
      << ran.log;
  EXPECT_TRUE(Has(ran.log, who)) << ran.log;
  EXPECT_TRUE(Has(ran.log, "SELECT pg_terminate_backend(" + std::to_string(squatter_pid) + ")"))
      << ran.log;
  // Nothing was claimed, no run row is left running.
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'queued' AND attempts = 0"),
            20);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs"), 0);

  // The next run has another run id: it works beside the squatter.
  ran = Run({"--config", config, "batch", "run"}, "next.log");
  ASSERT_TRUE(ran.status) << ran.log;
  EXPECT_EQ(*ran.status, 0) << ran.log;
  ExpectEachAppliedOnce(20);
}

// Past batch.busy_timeout the squatter is no passing session: exit 5.
TEST_F(ConnectionFaultsTest, ARunLockSquattedPastBusyTimeoutExitsFive) {
  auto config = WriteConfig("batch: {job: d, busy_timeout: 1s}\n");
  Enqueue(1, 5);
  long long next = Count("SELECT nextval(pg_get_serial_sequence('coexist.runs', 'run_id'))") + 1;
  auto squatter = ConnectAsAnotherRole();
  pqxx::nontransaction(*squatter).exec("SELECT pg_advisory_lock(1668244856, " +
                                       std::to_string(next) + ")");
  std::this_thread::sleep_for(2500ms);  // connected longer than busy_timeout
  auto ran = Run({"--config", config, "batch", "run"}, "stuck.log", {}, "", 60s);
  ASSERT_TRUE(ran.status) << ran.log;
  EXPECT_EQ(*ran.status, 5) << ran.log;
  EXPECT_TRUE(Has(ran.log, "role " + role_ + ", application_name 'squatter-app'")) << ran.log;
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE attempts > 0"), 0);
}

// The job's lock squatted by another role: the daemon names the session
// (it logged "held by another session" and nothing else), and once the
// squat outlasts busy_timeout it says so at error level and in STATUS=.
TEST_F(ConnectionFaultsTest, TheDaemonNamesAJobLockSquatterAndEscalatesPastBusyTimeout) {
  auto config = WriteConfig("batch: {job: d, busy_timeout: 2s}\ndaemon: {poll_interval: 200ms}\n");
  Enqueue(1, 10);
  auto squatter = ConnectAsAnotherRole();
  int squatter_pid = pqxx::nontransaction(*squatter).exec1("SELECT pg_backend_pid()")[0].as<int>();
  pqxx::nontransaction(*squatter).exec("SELECT pg_advisory_lock(1668244857, hashtext('d'))");
  pid_t daemon = Start({"--config", config, "batch", "daemon"}, "daemon.log");
  std::string who = "pid " + std::to_string(squatter_pid) + ", role " + role_ +
                    ", application_name 'squatter-app'";
  ASSERT_TRUE(WaitFor([&] { return Has(Log("daemon.log"), "job busy, waiting"); }, 30s))
      << Log("daemon.log");
  EXPECT_TRUE(Has(Log("daemon.log"), who)) << Log("daemon.log");
  ASSERT_TRUE(WaitFor([&] { return Has(Log("daemon.log"), "job stuck:"); }, 30s))
      << Log("daemon.log");
  std::string log = Log("daemon.log");
  auto stuck = log.substr(log.find("job stuck:"));
  stuck = stuck.substr(0, stuck.find('\n'));
  EXPECT_TRUE(Has(stuck, "busy_timeout=2s")) << stuck;
  EXPECT_TRUE(Has(stuck, who)) << stuck;
  EXPECT_TRUE(Has(stuck, "pg_terminate_backend(" + std::to_string(squatter_pid) + ")")) << stuck;
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 0);

  squatter.reset();  // the squatter leaves: the daemon takes the job
  ASSERT_TRUE(WaitFor([&] { return Done() == 10; }, 30s)) << Log("daemon.log");
  ExpectEachAppliedOnce(10);
  kill(daemon, SIGTERM);
  EXPECT_EQ(ExitWithin(daemon, 30s), std::optional<int>(0)) << Log("daemon.log");
}

// The daemon meets a squatted run lock: named in its log, and the next
// look starts a run with another run id, which drains the queue.
TEST_F(ConnectionFaultsTest, TheDaemonNamesARunLockSquatterAndGoesOnWithTheNextRunId) {
  auto config = WriteConfig("batch: {job: d}\ndaemon: {poll_interval: 200ms}\n");
  Enqueue(1, 10);
  long long next = Count("SELECT nextval(pg_get_serial_sequence('coexist.runs', 'run_id'))") + 1;
  auto squatter = ConnectAsAnotherRole();
  pqxx::nontransaction(*squatter).exec("SELECT pg_advisory_lock(1668244856, " +
                                       std::to_string(next) + ")");
  pid_t daemon = Start({"--config", config, "batch", "daemon"}, "daemon.log");
  ASSERT_TRUE(WaitFor([&] { return Done() == 10; }, 30s)) << Log("daemon.log");
  ExpectEachAppliedOnce(10);
  EXPECT_TRUE(Has(Log("daemon.log"),
                  "run lock held by another session, run not started job=d "
                  "run_id=" +
                      std::to_string(next)))
      << Log("daemon.log");
  EXPECT_TRUE(Has(Log("daemon.log"), "role " + role_ + ", application_name 'squatter-app'"))
      << Log("daemon.log");
  kill(daemon, SIGTERM);
  EXPECT_EQ(ExitWithin(daemon, 30s), std::optional<int>(0)) << Log("daemon.log");
}

// --- 9: option values libpq refuses only when it connects -----------------

TEST_F(ConnectionFaultsTest, AnInvalidOptionValueInTheUrlExits78NamingItNeverThePassword) {
  auto config = WriteConfig("batch: {job: d}\n");
  std::string host = conninfo().substr(5, conninfo().find(' ') - 5);  // host=DIR ...
  struct Case {
    std::string url;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {"postgresql://coexist:s3cret@/" + database_name() + "?host=" + host + "&sslmode=bogus",
            "the database URL in --database-url has an invalid sslmode \"bogus\""},
           {"postgresql://coexist:s3cret@/" + database_name() + "?host=" + host +
                "&connect_timeout=abc",
            "the database URL in --database-url has an invalid connect_timeout \"abc\""},
           {conninfo() + " password=s3cret keepalives_idle=often",
            "has an invalid keepalives_idle \"often\""},
           {conninfo() + " password=s3cret target_session_attrs=whatever",
            "has an invalid target_session_attrs \"whatever\""},
       }) {
    auto ran = Run({"--config", config, "batch", "run"}, "bad-url.log", {}, c.url, 60s);
    ASSERT_TRUE(ran.status) << c.url << "\n" << ran.log;
    EXPECT_EQ(*ran.status, 78) << c.url << "\n" << ran.log;
    EXPECT_TRUE(Has(ran.log, c.expected)) << ran.log;
    EXPECT_TRUE(Has(ran.log, "HINT: ")) << ran.log;
    EXPECT_FALSE(Has(ran.log, "s3cret")) << ran.log;
    fs::remove(dir_ / "bad-url.log");
  }
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs"), 0);
}

// The same values from libpq's environment pass the URL check and fail at
// connect: told from an unreachable server by libpq's message. The daemon
// used to retry them forever; it stops with 78.
TEST_F(ConnectionFaultsTest, AnInvalidOptionValueFromTheEnvironmentExits78AndStopsTheDaemon) {
  auto config =
      WriteConfig("batch: {job: d}\ndaemon: {poll_interval: 200ms, reconnect_initial: 100ms}\n");
  for (const std::string env : {"PGSSLMODE=bogus", "PGCONNECT_TIMEOUT=abc"}) {
    auto ran = Run({"--config", config, "batch", "run"}, "env.log", {env}, "", 60s);
    ASSERT_TRUE(ran.status) << env << "\n" << ran.log;
    EXPECT_EQ(*ran.status, 78) << env << "\n" << ran.log;
    EXPECT_TRUE(Has(ran.log, "the database connection settings are wrong")) << ran.log;
    fs::remove(dir_ / "env.log");

    auto daemon = Run({"--config", config, "batch", "daemon"}, "daemon.log", {env}, "", 60s);
    ASSERT_TRUE(daemon.status) << "the daemon retries " << env << " forever\n" << daemon.log;
    EXPECT_EQ(*daemon.status, 78) << env << "\n" << daemon.log;
    EXPECT_TRUE(Has(daemon.log, "database connection settings are wrong, daemon stopping"))
        << daemon.log;
    EXPECT_FALSE(Has(daemon.log, "database unavailable, retrying")) << daemon.log;
    fs::remove(dir_ / "daemon.log");
  }
}

// --- 10: a server that stops answering ------------------------------------

// A TCP listener on 127.0.0.1 that completes the handshake (the kernel
// does) and never answers: a stalled server as the client sees it.
class SilentServer {
 public:
  SilentServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentServer() { Close(); }
  // Resets the connections it never accepted: a connect waiting on it fails.
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int port() const { return port_; }

  // The socket of this process connected to it (libpq's), or -1.
  int ClientSocket() const {
    for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
      int fd = std::atoi(entry.path().filename().c_str());
      sockaddr_in peer{};
      socklen_t len = sizeof(peer);
      if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
          peer.sin_family == AF_INET && ntohs(peer.sin_port) == port_) {
        return fd;
      }
    }
    return -1;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

int TcpOption(int fd, int level, int name) {
  int value = -1;
  socklen_t len = sizeof(value);
  getsockopt(fd, level, name, &value, &len);
  return value;
}

// The client side of every connection: keepalives and tcp_user_timeout
// from database.stall_timeout (the URL's own settings win), and a connect
// to a server that never answers fails after connect_timeout (75).
TEST(StallSettings, EveryConnectionCarriesKeepalivesATcpUserTimeoutAndAConnectTimeout) {
  db::SetStallTimeout(3s);
  SilentServer server;
  for (bool own : {false, true}) {
    std::string conninfo = "host=127.0.0.1 port=" + std::to_string(server.port()) +
                           " dbname=x user=x" + (own ? " keepalives_idle=7" : "");
    auto started = std::chrono::steady_clock::now();
    auto connect = std::async(std::launch::async, [&] {
      try {
        db::Connect(conninfo);
        return 0;
      } catch (const TempFailError& e) {
        return static_cast<int>(e.code());
      }
    });
    int fd = -1;
    if (!WaitFor([&] { return (fd = server.ClientSocket()) >= 0; }, 10s)) {
      server.Close();
      FAIL() << "no connection to the silent server";
    }
    EXPECT_EQ(TcpOption(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
    EXPECT_EQ(TcpOption(fd, IPPROTO_TCP, TCP_KEEPIDLE), own ? 7 : 1);
    EXPECT_EQ(TcpOption(fd, IPPROTO_TCP, TCP_KEEPINTVL), 1);
    EXPECT_EQ(TcpOption(fd, IPPROTO_TCP, TCP_KEEPCNT), 3);
    EXPECT_EQ(TcpOption(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 3000);
    if (connect.wait_for(60s) != std::future_status::ready) {
      server.Close();  // else the future's end waits for the connect forever
      FAIL() << "no connect_timeout";
    }
    EXPECT_EQ(connect.get(), 75);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);
  }
  db::SetStallTimeout(db::kDefaultStallTimeout);
}

TEST(StallSettings, TheUrlsOwnSettingsAreKeptAndZeroAddsNone) {
  std::string with = db::WithStallSettings(
      "postgresql://u:p%40ss@h:5433/d?connect_timeout=9&tcp_user_timeout=100", 30s);
  EXPECT_TRUE(Has(with, "connect_timeout='9'")) << with;
  EXPECT_TRUE(Has(with, "tcp_user_timeout='100'")) << with;
  EXPECT_TRUE(Has(with, "keepalives_idle='15'")) << with;
  EXPECT_TRUE(Has(with, "keepalives_interval='5'")) << with;
  EXPECT_TRUE(Has(with, "password='p@ss'")) << with;
  EXPECT_FALSE(Has(with, "connect_timeout='30'")) << with;
  EXPECT_EQ(db::DescribeConninfo(with), "host=h port=5433 dbname=d user=u");
}

// A run whose server stops answering mid-run (its postgres processes
// stopped with SIGSTOP: no RST, the kernel acknowledges) exits 75 within
// a bounded time of database.stall_timeout, where it used to wait
// forever; after SIGCONT the next run marks it abandoned and finishes
// the queue, each item applied once.
TEST_F(ConnectionFaultsTest, ARunWhoseServerStopsAnsweringExits75AndNothingIsLost) {
  auto config = WriteConfig(
      "database: {stall_timeout: 3s}\nbatch: {job: d, chunk_size: 5, workers: 2}\n"
      "pacing: {adaptive: false}\n",
      "0.05");
  Enqueue(1, 100);
  pid_t run = Start({"--config", config, "batch", "run"}, "stalled.log");
  ASSERT_TRUE(WaitFor([&] { return Count("SELECT count(*) FROM ledger") >= 10; }, 60s))
      << Log("stalled.log");
  std::optional<int> status;
  {
    FrozenServer frozen;
    ASSERT_GT(frozen.processes(), 1u);
    status = ExitWithin(run, 60s);
  }  // SIGCONT
  ASSERT_TRUE(status) << "batch run still waits for a server that does not answer\n"
                      << Log("stalled.log");
  EXPECT_EQ(*status, 75) << Log("stalled.log");
  EXPECT_TRUE(Has(Log("stalled.log"), "database not answering, its connections shut down"))
      << Log("stalled.log");
  EXPECT_TRUE(Has(Log("stalled.log"), "stall_timeout=3s")) << Log("stalled.log");
  // The stopped run's sessions end once they run again and read the
  // sockets it shut down.
  ASSERT_TRUE(WaitFor([&] { return Count(kJobSessions) == 0; }, 30s));

  auto ran = Run({"--config", config, "batch", "run"}, "after.log");
  ASSERT_TRUE(ran.status) << ran.log;
  EXPECT_EQ(*ran.status, 0) << ran.log;
  ExpectEachAppliedOnce(100);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'running'"), 0);
}

// A run started while the server does not answer fails its connect after
// connect_timeout (the stall timeout): 75, not a wait for ever.
TEST_F(ConnectionFaultsTest, ARunStartedDuringAStallExits75) {
  auto config = WriteConfig("database: {stall_timeout: 3s}\nbatch: {job: d}\n");
  Enqueue(1, 10);
  std::optional<int> status;
  {
    FrozenServer frozen;
    pid_t run = Start({"--config", config, "batch", "run"}, "during.log");
    status = ExitWithin(run, 60s);
  }
  ASSERT_TRUE(status) << Log("during.log");
  EXPECT_EQ(*status, 75) << Log("during.log");
  EXPECT_TRUE(Has(Log("during.log"), "cannot connect to the database")) << Log("during.log");
  auto ran = Run({"--config", config, "batch", "run"}, "after.log");
  ASSERT_TRUE(ran.status) << ran.log;
  EXPECT_EQ(*ran.status, 0) << ran.log;
  ExpectEachAppliedOnce(10);
}

// The daemon, mid-run, notices the stall, reconnects once the server
// answers again, and drains the queue, each item once.
TEST_F(ConnectionFaultsTest, TheDaemonNoticesAStallReconnectsAndLosesNothing) {
  auto config = WriteConfig(
      "database: {stall_timeout: 3s}\nbatch: {job: d, chunk_size: 5, workers: 2}\n"
      "pacing: {adaptive: false}\n"
      "daemon: {poll_interval: 1s, reconnect_initial: 100ms, reconnect_max: 1s}\n",
      "0.05");
  Enqueue(1, 100);
  pid_t daemon = Start({"--config", config, "batch", "daemon"}, "daemon.log");
  ASSERT_TRUE(WaitFor([&] { return Count("SELECT count(*) FROM ledger") >= 10; }, 60s))
      << Log("daemon.log");
  {
    FrozenServer frozen;
    ASSERT_TRUE(WaitFor(
        [&] { return Has(Log("daemon.log"), "database not answering, its connections shut down"); },
        60s))
        << "the daemon waits for a server that does not answer\n"
        << Log("daemon.log");
    ASSERT_TRUE(
        WaitFor([&] { return Has(Log("daemon.log"), "database unavailable, retrying"); }, 60s))
        << Log("daemon.log");
  }
  ASSERT_TRUE(WaitFor([&] { return Done() == 100; }, 120s)) << Log("daemon.log");
  ExpectEachAppliedOnce(100);
  kill(daemon, SIGTERM);
  EXPECT_EQ(ExitWithin(daemon, 30s), std::optional<int>(0)) << Log("daemon.log");
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'running'"), 0);
}

}  // namespace
}  // namespace coexist
