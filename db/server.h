#pragma once

#include <memory>
#include <optional>
#include <string>

namespace coexist::db {

class TempCluster;

// Where a command's database is, and how it was chosen. First match wins:
//  1. --database-url on the command line
//  2. COEXIST_DATABASE_URL in the environment
//  3. database.url in the YAML configuration
//  4. PGHOST, PGDATABASE or PGSERVICE in the environment (libpq reads them)
//  5. the local cluster of `coexist db up`, while it runs
//  6. a throwaway cluster, started now and removed when the Server goes
struct ServerChoice {
  std::optional<std::string> command_line_url;
  std::optional<std::string> config_url;
  // `db up`'s data folder; empty means DefaultLocalDataDir().
  std::string local_data_dir;
  // Whether rule 6 may start a cluster. False for commands that must not
  // silently work on an empty throwaway database (db status on a real site).
  bool allow_throwaway = true;
};

enum class ServerSource {
  kCommandLine,
  kEnvironmentUrl,
  kConfigUrl,
  kPgEnvironment,
  kLocalCluster,
  kThrowaway
};

const char* ToString(ServerSource source);

// The database a command works on. Owns the throwaway cluster when rule 6
// applied: keep the Server alive as long as any connection is in use.
class Server {
 public:
  // Applies the rules above. Throws UnavailableError when a throwaway
  // cluster is needed and cannot be started, UsageError when none is allowed.
  static Server Resolve(const ServerChoice& choice);
  // A server at a known connection string (tests).
  static Server At(std::string conninfo);

  Server(Server&&) noexcept;
  Server& operator=(Server&&) noexcept;
  ~Server();

  // libpq connection string; may hold a password: never log it.
  const std::string& conninfo() const { return conninfo_; }
  ServerSource source() const { return source_; }
  // "host=/tmp/x port=5432 dbname=coexist user=coexist": safe to log.
  std::string Describe() const;

 private:
  Server(std::string conninfo, ServerSource source, std::unique_ptr<TempCluster> cluster);

  std::string conninfo_;
  ServerSource source_;
  std::unique_ptr<TempCluster> cluster_;
};

// host=, port=, dbname=, user= of a connection string or URL, never a
// password; "(unparseable connection string)" when libpq cannot parse it.
std::string DescribeConninfo(const std::string& conninfo);

}  // namespace coexist::db
