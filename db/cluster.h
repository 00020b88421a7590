#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/subprocess.h"

namespace coexist::db {

// Where PostgreSQL's server programs (initdb, postgres, pg_ctl) live:
// `pg_config --bindir` when that holds them, else the newest
// /usr/lib/postgresql/*/bin. Throws UnavailableError when none is found.
std::filesystem::path FindServerBinDir();

struct ClusterOptions {
  // Parent folder for throwaway clusters; empty means $TMPDIR or /tmp.
  std::filesystem::path temp_root;
  int max_connections = 300;
  // Durability is pointless for a throwaway cluster and slows tests down.
  bool fast_unsafe = true;
};

// A PostgreSQL cluster that lives in a fresh temporary folder and listens only
// on a unix socket inside it (no TCP port). Started as an unprivileged user
// when this process runs as root. The destructor stops the server and removes
// the folder; a signals::Cleanup does the same on Ctrl-C or SIGTERM, and the
// server gets SIGQUIT through PR_SET_PDEATHSIG if this process dies (kill -9),
// so at most an inert folder is left, which the next Start() removes.
//
// Start it from the main thread: the death signal follows the starting thread.
// Not thread-safe (beyond the signal cleanup); share the connection string,
// not the object.
class TempCluster {
 public:
  // initdb, start, wait until it accepts connections, create database
  // "coexist". Throws UnavailableError (no server binaries, initdb failed,
  // the server did not start; the message ends with the server log's tail).
  static std::unique_ptr<TempCluster> Start(const ClusterOptions& options = {});
  ~TempCluster();
  TempCluster(const TempCluster&) = delete;
  TempCluster& operator=(const TempCluster&) = delete;

  // libpq connection string for the given database on this cluster.
  std::string ConnectionString(const std::string& dbname = "coexist") const;
  const std::filesystem::path& dir() const { return dir_; }
  pid_t server_pid() const { return server_pid_; }

  // Stops the server and keeps the data; StartServer() brings it back on
  // the same socket. For tests of reconnect and crash behaviour: fast is
  // `pg_ctl stop -m fast` (sessions are terminated, the server checkpoints),
  // immediate is `-m immediate` (no checkpoint: the start recovers, as
  // after a crash).
  enum class StopMode { kFast, kImmediate };
  void StopServer(StopMode mode = StopMode::kFast);
  void StartServer();

  // Stops the server and removes the folder. Idempotent.
  void Remove();

 private:
  TempCluster(std::filesystem::path dir, std::filesystem::path bindir, std::optional<RunAs> run_as,
              ClusterOptions options);
  void StopServerLocked(StopMode mode = StopMode::kFast);

  std::filesystem::path dir_;
  std::filesystem::path bindir_;
  std::optional<RunAs> run_as_;
  ClusterOptions options_;
  // Held by Remove(), StopServer() and the server's start, and by the
  // emergency cleanup on the signal watcher thread, which never releases it:
  // the two never stop the server or remove the folder at the same time or
  // twice. Only the owning thread writes dir_ and server_pid_.
  std::mutex mutex_;
  pid_t server_pid_ = -1;
  struct CleanupGuard;
  std::unique_ptr<CleanupGuard> cleanup_;
};

// Removes throwaway cluster folders under `temp_root` whose owning process is
// gone (left behind by kill -9). Returns how many were removed.
int RemoveStaleTempClusters(const std::filesystem::path& temp_root);

// The cluster `coexist db up` keeps running until `coexist db down`.
// Its data folder holds the data and the socket.
struct LocalClusterStatus {
  std::filesystem::path data_dir;
  bool running = false;
  pid_t pid = -1;
};

// Per-user default: $XDG_STATE_HOME/coexist/pgdata (~/.local/state/...);
// for root /var/tmp/coexist-root/pgdata, since the server runs as "postgres".
std::filesystem::path DefaultLocalDataDir();
LocalClusterStatus ProbeLocalCluster(const std::filesystem::path& data_dir);
// Creates (initdb) when needed and starts in the background; a no-op when
// already running. Returns the connection string.
std::string LocalClusterUp(const std::filesystem::path& data_dir);
// Stops it; with remove_data, deletes the folder too. A no-op when not running.
void LocalClusterDown(const std::filesystem::path& data_dir, bool remove_data);
std::string LocalClusterConnectionString(const std::filesystem::path& data_dir,
                                         const std::string& dbname = "coexist");

}  // namespace coexist::db
