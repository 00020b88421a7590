#include "db/cluster.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "common/signals.h"

namespace coexist::db {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr const char* kTempPrefix = "coexist-pg-";
constexpr const char* kSuperuser = "coexist";

bool HasServerPrograms(const fs::path& bindir) {
  return fs::exists(bindir / "initdb") && fs::exists(bindir / "postgres") &&
         fs::exists(bindir / "pg_ctl");
}

bool ProcessAlive(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

// Alive and not a zombie: a server we signalled may be our own child.
bool ProcessRunning(pid_t pid) {
  if (!ProcessAlive(pid)) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto state_at = line.rfind(')');
  return state_at == std::string::npos || line.find(" Z", state_at) != state_at + 1;
}

pid_t ReadPid(const fs::path& file) {
  std::ifstream in(file);
  long pid = -1;
  if (!(in >> pid)) return -1;
  return static_cast<pid_t>(pid);
}

// The uids whose throwaway folders and servers are ours: this process's,
// and the account the servers run as when this process is root.
std::vector<uid_t> OurUids() {
  std::vector<uid_t> uids{geteuid()};
  if (auto run_as = UnprivilegedUserIfRoot()) uids.push_back(run_as->uid);
  return uids;
}

bool OwnedBy(uid_t uid, const std::vector<uid_t>& owners) {
  return std::find(owners.begin(), owners.end(), uid) != owners.end();
}

// Why `dir` is not a folder of ours that only its owner can write to ("is
// a symbolic link", ...), or "" when it is. lstat: never follows a link.
std::string FolderProblem(const fs::path& dir, const std::vector<uid_t>& owners) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return std::string("cannot be read: ") + strerror(errno);
  if (S_ISLNK(st.st_mode)) return "is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  if (!OwnedBy(st.st_uid, owners)) return "belongs to uid " + std::to_string(st.st_uid);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) return "is writable by other users";
  return "";
}

// The pid in `file` inside a folder of ours, read without following a
// link, from a regular file of ours; -1 otherwise.
pid_t ReadOurPid(const fs::path& file, const std::vector<uid_t>& owners) {
  int fd = open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  bool ours = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && OwnedBy(st.st_uid, owners);
  char text[32] = {};
  ssize_t size = ours ? read(fd, text, sizeof text - 1) : -1;
  close(fd);
  if (size <= 0) return -1;
  long pid = std::strtol(text, nullptr, 10);
  return pid > 0 && pid <= std::numeric_limits<pid_t>::max() ? static_cast<pid_t>(pid) : -1;
}

std::string ProcLink(pid_t pid, const char* what) {
  std::error_code ec;
  fs::path target = fs::read_symlink("/proc/" + std::to_string(pid) + "/" + what, ec);
  return ec ? std::string() : target.string();
}

// Whether `pid` is verifiably a PostgreSQL server of ours serving
// `data_dir`: a process of one of `owners`, running a "postgres" binary,
// whose working folder (the postmaster's is its data folder) is `data_dir`.
// A pid from a stale or planted postmaster.pid may name anything else.
bool IsOurServer(pid_t pid, const fs::path& data_dir, const std::vector<uid_t>& owners) {
  struct stat st {};
  if (pid <= 0 || stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0) return false;
  if (!OwnedBy(st.st_uid, owners)) return false;
  if (fs::path(ProcLink(pid, "exe")).filename() != "postgres") return false;
  if (!FolderProblem(data_dir, owners).empty()) return false;  // a link, another user's
  std::error_code ec;
  fs::path expected = fs::canonical(data_dir.parent_path(), ec) / data_dir.filename();
  return !ec && ProcLink(pid, "cwd") == expected.string();
}

std::string Tail(const fs::path& file, size_t max_lines = 15) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  size_t start = lines.size() > max_lines ? lines.size() - max_lines : 0;
  for (size_t i = start; i < lines.size(); ++i) out += "\n  " + lines[i];
  return out;
}

// Hands a folder we created to the server's account; never through a link.
void Chown(const fs::path& path, const std::optional<RunAs>& run_as) {
  if (run_as &&
      fchownat(AT_FDCWD, path.c_str(), run_as->uid, run_as->gid, AT_SYMLINK_NOFOLLOW) != 0) {
    throw UnavailableError("cannot hand " + path.string() + " to user " + run_as->name);
  }
}

// Absolute, without "." or "..", and without a trailing "/" (with which
// lstat would follow a link).
fs::path Normalized(const fs::path& dir) {
  fs::path out = fs::absolute(dir).lexically_normal();
  return out.has_filename() ? out : out.parent_path();
}

// Makes `data_dir` (the `db up` cluster's folder) a folder of ours, or
// refuses. Its parent may be a shared folder such as /var/tmp: anyone may
// have planted a link or a folder there, so the parent must be a real folder
// of root or ours that others cannot write to (or sticky), and `data_dir` a
// real folder of ours or of the server's account; nothing follows a link.
void PrepareLocalDataDir(const fs::path& given, const std::optional<RunAs>& run_as) {
  const fs::path data_dir = Normalized(given);
  auto refuse = [](const fs::path& path, const std::string& problem) {
    return Error(ExitCode::kCantCreate,
                 "refusing to use " + path.string() + " for the local cluster: it " + problem,
                 "remove it if you did not make it (another user may have planted it), or pass "
                 "--data-dir with a folder of your own.");
  };
  fs::path parent = data_dir.parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  struct stat st {};
  if (lstat(parent.c_str(), &st) != 0) throw refuse(parent, "cannot be created");
  if (S_ISLNK(st.st_mode)) throw refuse(parent, "is a symbolic link");
  if (!S_ISDIR(st.st_mode)) throw refuse(parent, "is not a directory");
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    throw refuse(parent, "belongs to uid " + std::to_string(st.st_uid));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    throw refuse(parent, "is writable by other users");
  }
  if (mkdir(data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw refuse(data_dir, std::string("cannot be created: ") + strerror(errno));
  }
  std::vector<uid_t> owners{geteuid()};
  if (run_as) owners.push_back(run_as->uid);
  if (std::string problem = FolderProblem(data_dir, owners); !problem.empty()) {
    throw refuse(data_dir, problem);
  }
  if (fs::exists(data_dir / "PG_VERSION")) return;
  int fd = open(data_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  bool handed =
      fd >= 0 && fchmod(fd, 0700) == 0 && (!run_as || fchown(fd, run_as->uid, run_as->gid) == 0);
  if (fd >= 0) close(fd);
  if (!handed) throw refuse(data_dir, std::string("cannot be handed over: ") + strerror(errno));
}

// The same checks without creating anything, for a folder that exists.
std::string LocalDataDirProblem(const fs::path& given) {
  const fs::path data_dir = Normalized(given);
  std::vector<uid_t> owners = OurUids();
  std::string problem = FolderProblem(data_dir, owners);
  if (!problem.empty()) return data_dir.string() + " " + problem;
  struct stat st {};
  fs::path parent = data_dir.parent_path();
  if (lstat(parent.c_str(), &st) != 0 || S_ISLNK(st.st_mode) ||
      (st.st_uid != 0 && st.st_uid != geteuid()) ||
      ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)) {
    return parent.string() + " is a link, another user's, or writable by others";
  }
  return "";
}

std::string Conninfo(const fs::path& socket_dir, const std::string& dbname) {
  return "host=" + socket_dir.string() + " port=5432 user=" + kSuperuser + " dbname=" + dbname;
}

// Waits until the server accepts connections or `server_pid` (when >0) exits.
bool WaitUntilReady(const std::string& conninfo, pid_t server_pid, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (PQping(conninfo.c_str()) == PQPING_OK) return true;
    if (server_pid > 0 && waitpid(server_pid, nullptr, WNOHANG) == server_pid) return false;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

void CreateDatabase(const fs::path& socket_dir, const std::string& name) {
  PGconn* conn = PQconnectdb(Conninfo(socket_dir, "postgres").c_str());
  std::string error;
  if (PQstatus(conn) != CONNECTION_OK) {
    error = PQerrorMessage(conn);
  } else {
    PGresult* check =
        PQexecParams(conn, "SELECT 1 FROM pg_database WHERE datname = $1", 1, nullptr,
                     std::array<const char*, 1>{name.c_str()}.data(), nullptr, nullptr, 0);
    bool exists = PQresultStatus(check) == PGRES_TUPLES_OK && PQntuples(check) == 1;
    PQclear(check);
    if (!exists) {
      PGresult* res = PQexec(conn, ("CREATE DATABASE \"" + name + "\"").c_str());
      if (PQresultStatus(res) != PGRES_COMMAND_OK) error = PQresultErrorMessage(res);
      PQclear(res);
    }
  }
  PQfinish(conn);
  if (!error.empty()) throw UnavailableError("cannot create database " + name + ": " + error);
}

void RunInitdb(const fs::path& bindir, const fs::path& data_dir,
               const std::optional<RunAs>& run_as) {
  auto result = RunCommand(
      {(bindir / "initdb").string(), "-D", data_dir.string(), "-U", kSuperuser, "--auth=trust",
       "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"},
      run_as);
  if (result.status != 0) {
    throw UnavailableError("initdb failed with status " + std::to_string(result.status) + ":\n" +
                           result.output);
  }
}

// Sends `signo` and waits up to `limit` for the child to exit.
bool StopChild(pid_t pid, int signo, std::chrono::milliseconds limit) {
  kill(pid, signo);
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    pid_t done = waitpid(pid, nullptr, WNOHANG);
    if (done == pid || (done < 0 && errno == ECHILD)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// Immediate shutdown; if the server lingers (a loaded machine), SIGKILL its
// whole process group (Spawn made the server a group leader), so no backend
// is left writing into the folder we are about to remove.
void KillServer(pid_t pid) {
  if (StopChild(pid, SIGQUIT, 10s)) return;
  kill(-pid, SIGKILL);
  StopChild(pid, SIGKILL, 5s);
}

void RemoveFolder(const fs::path& dir) {
  std::error_code ec;
  for (int attempt = 0; attempt < 3 && fs::exists(dir, ec); ++attempt) {
    fs::remove_all(dir, ec);
    if (ec) std::this_thread::sleep_for(100ms);
  }
}

}  // namespace

fs::path FindServerBinDir() {
  auto from_pg_config = RunCommand({"/usr/bin/pg_config", "--bindir"});
  if (from_pg_config.status == 0) {
    std::string dir = from_pg_config.output;
    dir.erase(dir.find_last_not_of(" \n") + 1);
    if (HasServerPrograms(dir)) return dir;
  }
  std::vector<std::pair<int, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string name = entry.path().filename().string();
    if (HasServerPrograms(entry.path() / "bin") &&
        std::all_of(name.begin(), name.end(), ::isdigit)) {
      found.emplace_back(std::stoi(name), entry.path() / "bin");
    }
  }
  if (found.empty()) {
    throw UnavailableError("no PostgreSQL server programs found (initdb, postgres, pg_ctl)",
                           "run scripts/setup.sh to install postgresql-15, or configure a "
                           "database with --database-url or COEXIST_DATABASE_URL.");
  }
  return std::max_element(found.begin(), found.end())->second;
}

struct TempCluster::CleanupGuard {
  explicit CleanupGuard(std::function<void()> fn) : cleanup(std::move(fn)) {}
  signals::Cleanup cleanup;
};

TempCluster::TempCluster(fs::path dir, fs::path bindir, std::optional<RunAs> run_as,
                         ClusterOptions options)
    : dir_(std::move(dir)),
      bindir_(std::move(bindir)),
      run_as_(std::move(run_as)),
      options_(std::move(options)) {}

std::unique_ptr<TempCluster> TempCluster::Start(const ClusterOptions& options) {
  fs::path bindir = FindServerBinDir();
  fs::path root = options.temp_root;
  if (root.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    root = tmp && *tmp ? tmp : "/tmp";
  }
  RemoveStaleTempClusters(root);

  std::string pattern = (root / (std::string(kTempPrefix) + "XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw UnavailableError("cannot create a temporary folder under " + root.string());
  }
  auto run_as = UnprivilegedUserIfRoot();
  std::unique_ptr<TempCluster> cluster(new TempCluster(pattern, bindir, run_as, options));
  TempCluster* raw = cluster.get();
  cluster->cleanup_ = std::make_unique<CleanupGuard>([raw] {
    std::unique_lock lock(raw->mutex_);
    if (raw->dir_.empty()) return;
    if (raw->server_pid_ > 0) KillServer(raw->server_pid_);
    RemoveFolder(raw->dir_);
    // Kept locked until the process exits: the main thread, whose connection
    // just broke, must not stop or remove the cluster a second time.
    lock.release();
  });
  std::ofstream(cluster->dir_ / "owner.pid") << getpid() << '\n';
  Chown(cluster->dir_, run_as);
  RunInitdb(bindir, cluster->dir_ / "data", run_as);
  cluster->StartServer();
  CreateDatabase(cluster->dir_, "coexist");
  spdlog::info("throwaway cluster started dir={} pid={} user={}",
               log::Value(cluster->dir_.string()), cluster->server_pid_,
               run_as ? run_as->name : "self");
  return cluster;
}

void TempCluster::StartServer() {
  if (server_pid_ > 0) return;
  std::vector<std::string> argv = {(bindir_ / "postgres").string(),
                                   "-D",
                                   (dir_ / "data").string(),
                                   "-k",
                                   dir_.string(),
                                   "-c",
                                   "listen_addresses=",
                                   "-c",
                                   "max_connections=" + std::to_string(options_.max_connections),
                                   "-c",
                                   "shared_buffers=128MB"};
  if (options_.fast_unsafe) {
    for (const char* setting : {"fsync=off", "synchronous_commit=off", "full_page_writes=off"}) {
      argv.insert(argv.end(), {"-c", setting});
    }
  }
  pid_t pid = Spawn({.argv = argv,
                     .run_as = run_as_,
                     .output_path = (dir_ / "server.log").string(),
                     .parent_death_signal = SIGQUIT});
  {
    std::lock_guard lock(mutex_);
    server_pid_ = pid;
  }
  if (!WaitUntilReady(ConnectionString("postgres"), pid, 60s)) {
    std::string tail = Tail(dir_ / "server.log");
    std::lock_guard lock(mutex_);
    StopChild(server_pid_, SIGQUIT, 5s);
    server_pid_ = -1;
    throw UnavailableError("the throwaway PostgreSQL server did not start; its log ends with:" +
                           tail);
  }
}

void TempCluster::StopServer(StopMode mode) {
  std::lock_guard lock(mutex_);
  StopServerLocked(mode);
}

void TempCluster::StopServerLocked(StopMode mode) {
  if (server_pid_ <= 0) return;
  // SIGINT is PostgreSQL's fast shutdown, SIGQUIT its immediate one (also
  // used when a fast shutdown lingers).
  int signo = mode == StopMode::kImmediate ? SIGQUIT : SIGINT;
  if (!StopChild(server_pid_, signo, 20s)) KillServer(server_pid_);
  server_pid_ = -1;
}

void TempCluster::Remove() {
  std::lock_guard lock(mutex_);
  if (dir_.empty()) return;
  StopServerLocked();
  RemoveFolder(dir_);
  spdlog::debug("throwaway cluster removed dir={}", log::Value(dir_.string()));
  dir_.clear();
}

TempCluster::~TempCluster() {
  try {
    Remove();
  } catch (...) {
    // A destructor must not throw; the next Start() removes what is left.
  }
}

std::string TempCluster::ConnectionString(const std::string& dbname) const {
  return Conninfo(dir_, dbname);
}

int RemoveStaleTempClusters(const fs::path& temp_root) {
  const std::vector<uid_t> owners = OurUids();
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(temp_root, ec)) {
    if (!entry.path().filename().string().starts_with(kTempPrefix)) continue;
    // Another user's folder, or a link, in a shared $TMPDIR: not ours to judge.
    if (!FolderProblem(entry.path(), owners).empty()) continue;
    pid_t owner = ReadOurPid(entry.path() / "owner.pid", owners);
    if (owner <= 0 || ProcessAlive(owner)) continue;
    fs::path data = entry.path() / "data";
    pid_t server = ReadOurPid(data / "postmaster.pid", owners);
    if (IsOurServer(server, data, owners)) {
      kill(server, SIGQUIT);
      for (int i = 0; i < 500 && ProcessRunning(server); ++i) std::this_thread::sleep_for(10ms);
    } else if (ProcessAlive(server)) {
      spdlog::warn(
          "stale throwaway cluster names a process that is not its server, not signalled "
          "dir={} pid={}",
          log::Value(entry.path().string()), server);
    }
    std::error_code remove_ec;
    if (fs::remove_all(entry.path(), remove_ec) > 0 && !remove_ec) {
      ++removed;
      spdlog::info("stale throwaway cluster removed dir={}", log::Value(entry.path().string()));
    }
  }
  return removed;
}

fs::path DefaultLocalDataDir() {
  if (geteuid() == 0) return "/var/tmp/coexist-root/pgdata";
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state) {
    return fs::path(state) / "coexist" / "pgdata";
  }
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/tmp") / ".local" / "state" / "coexist" / "pgdata";
}

LocalClusterStatus ProbeLocalCluster(const fs::path& data_dir) {
  LocalClusterStatus status{.data_dir = data_dir};
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(data_dir, ec))) return status;
  // A server behind a planted folder would receive every command's data.
  if (std::string problem = LocalDataDirProblem(data_dir); !problem.empty()) {
    spdlog::warn("local cluster folder ignored reason={}", log::Value(problem));
    return status;
  }
  pid_t pid = ReadPid(data_dir / "postmaster.pid");
  if (ProcessAlive(pid) &&
      PQping(LocalClusterConnectionString(data_dir, "postgres").c_str()) == PQPING_OK) {
    status.running = true;
    status.pid = pid;
  }
  return status;
}

std::string LocalClusterConnectionString(const fs::path& data_dir, const std::string& dbname) {
  return Conninfo(data_dir, dbname);
}

std::string LocalClusterUp(const fs::path& data_dir) {
  if (ProbeLocalCluster(data_dir).running) return LocalClusterConnectionString(data_dir);
  fs::path bindir = FindServerBinDir();
  auto run_as = UnprivilegedUserIfRoot();
  PrepareLocalDataDir(data_dir, run_as);
  if (!fs::exists(data_dir / "PG_VERSION")) {
    RunInitdb(bindir, data_dir, run_as);
    spdlog::info("local cluster created data_dir={}", log::Value(data_dir.string()));
  }
  std::string options = "-c listen_addresses='' -k " + data_dir.string();
  auto result =
      RunCommand({(bindir / "pg_ctl").string(), "-D", data_dir.string(), "-l",
                  (data_dir / "server.log").string(), "-o", options, "-w", "-t", "60", "start"},
                 run_as);
  if (result.status != 0) {
    throw UnavailableError("pg_ctl start failed:\n" + result.output +
                           Tail(data_dir / "server.log"));
  }
  CreateDatabase(data_dir, "coexist");
  spdlog::info("local cluster running data_dir={}", log::Value(data_dir.string()));
  return LocalClusterConnectionString(data_dir);
}

void LocalClusterDown(const fs::path& data_dir, bool remove_data) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(data_dir, ec))) return;
  if (std::string problem = LocalDataDirProblem(data_dir); !problem.empty()) {
    throw Error(ExitCode::kCantCreate, "refusing to stop or remove the local cluster: " + problem,
                "remove it if you did not make it; another user may have planted it.");
  }
  if (ProbeLocalCluster(data_dir).running) {
    auto result = RunCommand({(FindServerBinDir() / "pg_ctl").string(), "-D", data_dir.string(),
                              "-m", "fast", "-w", "stop"},
                             UnprivilegedUserIfRoot());
    if (result.status != 0) throw UnavailableError("pg_ctl stop failed:\n" + result.output);
    spdlog::info("local cluster stopped data_dir={}", log::Value(data_dir.string()));
  }
  if (remove_data && fs::exists(data_dir / "PG_VERSION")) {
    fs::remove_all(data_dir);
    spdlog::info("local cluster removed data_dir={}", log::Value(data_dir.string()));
  }
}

}  // namespace coexist::db
