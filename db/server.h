#pragma once

#include <memory>
#include <optional>
#include <string>

#include "config_core/config_error.h"

namespace coexist::db {

class TempCluster;

// What a command does to its database; it decides which rules below apply
// (docs/design.md "Running it", docs/operations.md "Which database a command uses").
enum class DatabaseUse {
  // Keeps or reads state that must outlive the command (enqueue, batch,
  // db install/status, the admin commands): rules 1-5 only. A throwaway
  // cluster would be deleted a second later, so without any of them
  // Resolve throws ConfigurationError (exit 78).
  kKeepState,
  // Erases or overwrites data with test data (simulate, demo, db seed,
  // online-sim): rule 6 when rules 1-5 find nothing. A database that rules
  // 1-5 find is used only when `allow_database` names it; else UsageError
  // (exit 64) saying what would be erased.
  kEraseData,
};

// Where a command's database is, and how it was chosen. First match wins:
//  1. --database-url on the command line
//  2. COEXIST_DATABASE_URL in the environment
//  3. database.url in the YAML configuration
//  4. PGHOST, PGDATABASE or PGSERVICE in the environment (libpq reads them)
//  5. the local cluster of `coexist db up`, while it runs
//  6. a throwaway cluster, started now and removed when the Server goes
//     (DatabaseUse::kEraseData only)
struct ServerChoice {
  std::optional<std::string> command_line_url;
  std::optional<std::string> config_url;
  // Where config_url is written: a malformed one is a config::ConfigError
  // located there.
  config::Mark config_url_at;
  // `db up`'s data folder; empty means DefaultLocalDataDir().
  std::string local_data_dir;
  DatabaseUse use = DatabaseUse::kKeepState;
  // kEraseData: the name of the database the user allows to be erased
  // (--allow-database). It must be the database rules 1-5 lead to, as the
  // server reports it once connected.
  std::optional<std::string> allow_database;
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
  // Applies the rules above. Throws ConfigurationError (78) when a URL is
  // malformed or a kKeepState command finds no database, UsageError (64)
  // when a kEraseData command may not erase the database it found,
  // TempFailError (75) when that database cannot be reached to check its
  // name, UnavailableError when a throwaway cluster cannot be started.
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

// The connection settings themselves are wrong: a malformed URL, an
// option value libpq cannot use (sslmode=bogus, connect_timeout=abc), also
// from the PG* environment (PGSSLMODE). Exit 78 like any ConfigurationError;
// `batch daemon` stops on it instead of retrying, as no retry can pass.
class ConnectionSettingsError : public ConfigurationError {
 public:
  using ConfigurationError::ConfigurationError;
};

// Throws ConnectionSettingsError (exit 78) naming the problem and the fix,
// never the password, when libpq cannot parse `conninfo`, a port is not a
// number from 1 to 65535, or an option libpq checks only when it connects
// has a value it would refuse: an integer option (connect_timeout,
// keepalives, keepalives_idle, keepalives_interval, keepalives_count,
// tcp_user_timeout) that is not a whole number, an enumerated one (sslmode,
// gssencmode, channel_binding, target_session_attrs,
// ssl_min/max_protocol_version, load_balance_hosts, sslnegotiation) that
// is none of its values. `origin` names where it came from
// ("--database-url"); may be empty.
void CheckConninfo(const std::string& conninfo, const std::string& origin = {});

// Whether libpq's message for a failed connection says that a setting is
// wrong (an option's value, from the string or the PG* environment; an
// unknown service) rather than that the server cannot be reached.
bool IsSettingsFailure(const std::string& libpq_message);

// `text` with every password that `conninfo` holds replaced by "********":
// the one libpq parses, and, also when libpq cannot parse the string, a
// URL's "user:password@" part and password= settings, as written and
// percent-decoded. For any message that may echo a connection string
// (libpq's errors do).
std::string RedactPasswords(std::string text, const std::string& conninfo);

}  // namespace coexist::db
