#include "db/connection.h"

#include <dirent.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"

namespace coexist::db {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::atomic<long long> g_stall_ms{kDefaultStallTimeout.count()};
std::atomic<bool> g_watch{false};

std::string Quoted(const std::string& value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string Format(milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + "s"
                               : std::to_string(d.count()) + "ms";
}

// The address a socket is connected to.
struct Peer {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

bool PeerOf(int fd, Peer& out) {
  out.len = sizeof(out.addr);
  return getpeername(fd, reinterpret_cast<sockaddr*>(&out.addr), &out.len) == 0;
}

bool SamePeer(const Peer& a, const Peer& b) {
  if (a.addr.ss_family != b.addr.ss_family) return false;
  switch (a.addr.ss_family) {
    case AF_UNIX: {
      const auto& x = reinterpret_cast<const sockaddr_un&>(a.addr);
      const auto& y = reinterpret_cast<const sockaddr_un&>(b.addr);
      return x.sun_path[0] != '\0' && std::strncmp(x.sun_path, y.sun_path, sizeof(x.sun_path)) == 0;
    }
    case AF_INET: {
      const auto& x = reinterpret_cast<const sockaddr_in&>(a.addr);
      const auto& y = reinterpret_cast<const sockaddr_in&>(b.addr);
      return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
    }
    case AF_INET6: {
      const auto& x = reinterpret_cast<const sockaddr_in6&>(a.addr);
      const auto& y = reinterpret_cast<const sockaddr_in6&>(b.addr);
      return x.sin6_port == y.sin6_port &&
             std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof(x.sin6_addr)) == 0;
    }
    default:
      return false;
  }
}

// Calls `on(fd)` for every socket of this process connected to one of
// `peers`, but `except`; returns how many.
template <typename On>
int ForEachSocketTo(const std::vector<Peer>& peers, int except, On on) {
  int found = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return found;
  int own = dirfd(dir);
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own || fd == except) continue;
    Peer peer;
    if (!PeerOf(static_cast<int>(fd), peer)) continue;
    if (std::any_of(peers.begin(), peers.end(), [&](const Peer& p) { return SamePeer(p, peer); })) {
      ++found;
      on(static_cast<int>(fd));
    }
  }
  closedir(dir);
  return found;
}

// See WatchForStalls in the header. One thread for every watched server;
// each server's probe is a non-blocking libpq connection, so that a
// server that does not answer holds up nobody else's probe.
class StallWatchdog {
 public:
  static StallWatchdog& Get() {
    static StallWatchdog watchdog;
    return watchdog;
  }

  // A connection to the server at `conninfo` (Connect's, settings added)
  // is open on socket `fd`: watch that server.
  void Watch(const std::string& conninfo, const std::string& description, int fd) {
    Peer peer;
    if (fd < 0 || !PeerOf(fd, peer)) return;
    std::lock_guard lock(mutex_);
    auto& server = servers_[conninfo];
    if (server.conninfo.empty()) {
      server.conninfo = conninfo;
      server.description = description;
      // A short command (enqueue, status) ends before its first probe.
      server.next_probe = Clock::now() + Interval();
    }
    if (std::none_of(server.peers.begin(), server.peers.end(),
                     [&](const Peer& p) { return SamePeer(p, peer); })) {
      server.peers.push_back(peer);
    }
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
    Wake();
  }

  ~StallWatchdog() {
    stop_ = true;
    Wake();
    if (thread_.joinable()) thread_.join();
    for (auto& [key, server] : servers_) CloseProbe(server);
    close(wake_fd_);
  }

 private:
  enum class State { kIdle, kConnecting, kQuerying };
  struct Server {
    std::string conninfo;     // may hold a password: never logged
    std::string description;  // host=... port=... dbname=... user=...
    std::vector<Peer> peers;  // guarded by mutex_
    // The rest belongs to the watchdog's thread.
    PGconn* probe = nullptr;
    State state = State::kIdle;
    PostgresPollingStatusType connect_wait = PGRES_POLLING_WRITING;
    bool flush_pending = false;
    Clock::time_point next_probe{};
    Clock::time_point deadline{};
    bool stalled = false;  // fired, and no answer since
  };

  StallWatchdog() : wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

  void Wake() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof(one));
  }

  static milliseconds Timeout() { return milliseconds(g_stall_ms.load()); }
  static milliseconds Interval() { return std::max(milliseconds(100), Timeout() / 4); }

  static void CloseProbe(Server& s) {
    if (s.probe != nullptr) PQfinish(s.probe);
    s.probe = nullptr;
    s.state = State::kIdle;
    s.flush_pending = false;
  }

  // The server answered (or refused: an answer too).
  static void Answered(Server& s, Clock::time_point now) {
    if (s.stalled) {
      spdlog::info("database answering again server={}", s.description);
      s.stalled = false;
    }
    s.state = State::kIdle;
    s.next_probe = now + Interval();
  }

  // No process connection to the server left: forget it (under mutex_).
  bool Unused(Server& s) {
    std::lock_guard lock(mutex_);
    return ForEachSocketTo(s.peers, s.probe != nullptr ? PQsocket(s.probe) : -1, [](int) {}) == 0;
  }

  void StartProbe(Server& s, Clock::time_point now) {
    s.deadline = now + Timeout();
    if (s.probe == nullptr) {
      s.probe = PQconnectStart((s.conninfo + " application_name='coexist-watchdog'").c_str());
      if (s.probe == nullptr || PQstatus(s.probe) == CONNECTION_BAD) {
        CloseProbe(s);  // refused at once: the server (or its host) answered
        Answered(s, now);
        return;
      }
      s.state = State::kConnecting;
      s.connect_wait = PGRES_POLLING_WRITING;
      return;
    }
    if (PQsendQuery(s.probe, "SELECT 1") == 0) {
      CloseProbe(s);
      s.next_probe = now;  // connect again at once
      return;
    }
    s.state = State::kQuerying;
    s.flush_pending = PQflush(s.probe) == 1;
  }

  void Progress(Server& s, short revents, Clock::time_point now) {
    if (s.state == State::kConnecting) {
      s.connect_wait = PQconnectPoll(s.probe);
      if (s.connect_wait == PGRES_POLLING_OK) {
        PQsetnonblocking(s.probe, 1);
        Answered(s, now);
      } else if (s.connect_wait == PGRES_POLLING_FAILED) {
        CloseProbe(s);
        Answered(s, now);
      }
      return;
    }
    if (s.flush_pending && (revents & POLLOUT) != 0) s.flush_pending = PQflush(s.probe) == 1;
    if ((revents & (POLLIN | POLLHUP | POLLERR)) == 0) return;
    if (PQconsumeInput(s.probe) == 0) {
      CloseProbe(s);
      Answered(s, now);
      return;
    }
    while (PQisBusy(s.probe) == 0) {
      PGresult* result = PQgetResult(s.probe);
      if (result == nullptr) {
        if (PQstatus(s.probe) == CONNECTION_BAD) CloseProbe(s);
        Answered(s, now);
        return;
      }
      PQclear(result);
    }
  }

  // No answer within the stall timeout: cut every connection to the server.
  void Fire(Server& s, Clock::time_point now) {
    int sockets = 0;
    {
      // Checked and shut down one by one: a socket closed meanwhile and
      // its number reused for another peer is left alone.
      std::lock_guard lock(mutex_);
      sockets = ForEachSocketTo(s.peers, -1, [](int fd) { shutdown(fd, SHUT_RDWR); });
    }
    CloseProbe(s);
    if (!s.stalled) {
      spdlog::error(
          "database not answering, its connections shut down server={} stall_timeout={} "
          "connections={}",
          s.description, Format(Timeout()), sockets);
    } else {
      spdlog::debug("database still not answering server={} connections={}", s.description,
                    sockets);
    }
    s.stalled = true;
    s.next_probe = now + Interval();
  }

  void Loop() {
    while (!stop_) {
      auto now = Clock::now();
      bool on = g_watch && Timeout().count() > 0;
      std::vector<Server*> servers;
      {
        std::lock_guard lock(mutex_);
        for (auto& [key, server] : servers_) servers.push_back(&server);
      }
      std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
      std::vector<Server*> owners{nullptr};
      auto wake_at = now + std::chrono::seconds(1);
      std::vector<std::string> unused;
      for (Server* s : servers) {
        if (!on) {
          CloseProbe(*s);
          continue;
        }
        if (s->state != State::kIdle && now >= s->deadline) Fire(*s, now);
        if (s->state == State::kIdle && now >= s->next_probe) {
          if (Unused(*s)) {
            CloseProbe(*s);
            unused.push_back(s->conninfo);
            continue;
          }
          StartProbe(*s, now);
        }
        if (s->state == State::kIdle) {
          wake_at = std::min(wake_at, s->next_probe);
          continue;
        }
        short events = s->state == State::kConnecting
                           ? (s->connect_wait == PGRES_POLLING_READING ? POLLIN : POLLOUT)
                           : static_cast<short>(POLLIN | (s->flush_pending ? POLLOUT : 0));
        fds.push_back({PQsocket(s->probe), events, 0});
        owners.push_back(s);
        wake_at = std::min(wake_at, s->deadline);
      }
      if (!unused.empty()) {
        std::lock_guard lock(mutex_);
        for (const auto& key : unused) servers_.erase(key);
      }
      auto wait = std::chrono::duration_cast<milliseconds>(wake_at - Clock::now()).count();
      int n = poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(wait, 0, 1000)));
      if (n <= 0) continue;
      if (fds[0].revents != 0) {
        uint64_t value = 0;
        while (read(wake_fd_, &value, sizeof(value)) > 0) {
        }
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) Progress(*owners[i], fds[i].revents, Clock::now());
      }
    }
  }

  int wake_fd_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::map<std::string, Server> servers_;  // by conninfo; only Loop() erases
  std::thread thread_;
};

}  // namespace

void SetStallTimeout(milliseconds timeout) { g_stall_ms = std::max<long long>(0, timeout.count()); }

milliseconds StallTimeout() { return milliseconds(g_stall_ms.load()); }

void WatchForStalls(milliseconds timeout) {
  SetStallTimeout(timeout);
  g_watch = timeout.count() > 0;
}

std::string WithStallSettings(const std::string& conninfo, milliseconds stall_timeout) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  PQfreemem(error);
  if (options == nullptr) return conninfo;  // CheckConninfo reports it
  std::string out;
  auto add = [&out](const std::string& key, const std::string& value) {
    if (!out.empty()) out += ' ';
    out += key + "=" + Quoted(value);
  };
  std::vector<std::string> given;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    given.emplace_back(o->keyword);
    add(o->keyword, o->val);
  }
  PQconninfoFree(options);
  long long seconds = std::max<long long>(1, (stall_timeout.count() + 999) / 1000);
  auto add_unless_given = [&](const std::string& key, long long value) {
    if (std::find(given.begin(), given.end(), key) == given.end()) {
      add(key, std::to_string(value));
    }
  };
  add_unless_given("keepalives", 1);
  add_unless_given("keepalives_idle", std::max<long long>(1, seconds / 2));
  add_unless_given("keepalives_interval", std::max<long long>(1, seconds / 6));
  add_unless_given("keepalives_count", 3);
  add_unless_given("tcp_user_timeout", stall_timeout.count());
  const char* env_timeout = std::getenv("PGCONNECT_TIMEOUT");
  if (env_timeout == nullptr || *env_timeout == '\0') {
    add_unless_given("connect_timeout", std::max<long long>(2, seconds));
  }
  return out;
}

std::unique_ptr<pqxx::connection> Connect(const Server& server,
                                          const std::string& application_name) {
  return Connect(server.conninfo(), application_name);
}

std::unique_ptr<pqxx::connection> Connect(const std::string& conninfo,
                                          const std::string& application_name) {
  CheckConninfo(conninfo);
  auto stall = StallTimeout();
  std::string effective = stall.count() > 0 ? WithStallSettings(conninfo, stall) : conninfo;
  std::unique_ptr<pqxx::connection> conn;
  try {
    conn = std::make_unique<pqxx::connection>(effective);
  } catch (const pqxx::broken_connection& e) {
    // libpq's message may quote the connection string (the daemon logs
    // this on every retry).
    std::string reason = Trimmed(RedactPasswords(RedactPasswords(e.what(), conninfo), effective));
    if (IsSettingsFailure(reason)) {
      throw ConnectionSettingsError(
          "the database connection settings are wrong (" + DescribeConninfo(conninfo) +
              "): " + reason,
          "fix the option libpq names in the database URL, or the PG* environment variable that "
          "sets it (PGSSLMODE, PGCONNECT_TIMEOUT, PGSERVICE, ...); libpq's documentation lists "
          "each option's values. Retrying cannot help: coexist exits with 78 (EX_CONFIG).");
    }
    throw TempFailError(
        "cannot connect to the database " + DescribeConninfo(conninfo) + ": " + reason,
        "check that the server runs and accepts connections; coexist exits "
        "with 75 (EX_TEMPFAIL) so a scheduler retries later.");
  }
  // libpqxx 6.4 builds its table of encodings on first use, as a
  // function-local static: thread-safe, but inside a library that
  // ThreadSanitizer does not instrument, so the first queries of two shard
  // threads look to it like a race. Built once here under a once_flag,
  // which it does see.
  static std::once_flag encodings_built;
  std::call_once(encodings_built, [&] { conn->esc_like(""); });
  if (g_watch && stall.count() > 0) {
    StallWatchdog::Get().Watch(effective, DescribeConninfo(conninfo), conn->sock());
  }
  // The server notices a dead client host (and frees its row and advisory
  // locks: the job's lock) within about two minutes instead of the kernel's
  // two hours: keepalive probes after 60 s idle, every 10 s, 6 unanswered.
  // No effect on unix sockets.
  // Read committed whatever the server's default: coexist's statements rely
  // on it (a lock that skips or rechecks a row changed since the chunk's
  // first statement); under a default of repeatable read such a row fails
  // the chunk with 40001 instead.
  pqxx::nontransaction tx(*conn);
  tx.exec_params(
      "SELECT set_config('application_name', $1, false), "
      "set_config('tcp_keepalives_idle', '60', false), "
      "set_config('tcp_keepalives_interval', '10', false), "
      "set_config('tcp_keepalives_count', '6', false), "
      "set_config('default_transaction_isolation', 'read committed', false)",
      application_name);
  return conn;
}

void ParseOnly(pqxx::connection_base& conn, const std::string& sql) {
  static constexpr const char* kName = "coexist_parse_only";
  conn.prepare(kName, sql);
  try {
    conn.prepare_now(kName);
  } catch (...) {
    conn.unprepare(kName);
    throw;
  }
  conn.unprepare(kName);
}

}  // namespace coexist::db
