#include "db/server.h"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "common/error.h"
#include "common/log.h"
#include "db/cluster.h"
#include "db/connection.h"

namespace coexist::db {
namespace {

std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

// Where a source's setting lives, for messages.
const char* Origin(ServerSource source) {
  switch (source) {
    case ServerSource::kCommandLine:
      return "--database-url";
    case ServerSource::kEnvironmentUrl:
      return "COEXIST_DATABASE_URL";
    case ServerSource::kConfigUrl:
      return "database.url";
    case ServerSource::kPgEnvironment:
      return "the PG* environment";
    case ServerSource::kLocalCluster:
      return "the 'db up' cluster";
    case ServerSource::kThrowaway:
      return "a throwaway cluster";
  }
  return "unknown";
}

// How to stop a source from applying, so that a throwaway cluster is used.
std::string HowToDropIt(ServerSource source) {
  switch (source) {
    case ServerSource::kCommandLine:
      return "drop --database-url";
    case ServerSource::kEnvironmentUrl:
      return "unset COEXIST_DATABASE_URL";
    case ServerSource::kConfigUrl:
      return "use a configuration without database.url";
    case ServerSource::kPgEnvironment:
      return "unset PGHOST, PGDATABASE and PGSERVICE";
    case ServerSource::kLocalCluster:
      return "stop it with 'coexist db down'";
    case ServerSource::kThrowaway:
      break;
  }
  return "configure no database";
}

// Whether a database that rules 1-5 chose may be erased: its name, as the
// server reports it, must be the one the user allowed.
void CheckErasable(const Server& server, const std::optional<std::string>& allowed) {
  auto conn = Connect(server, "coexist-check");
  std::string dbname = conn->dbname();
  std::string where = "database \"" + dbname + "\" (host=" + conn->hostname() +
                      " port=" + conn->port() + ", chosen by " + Origin(server.source()) + ")";
  if (!allowed) {
    throw UsageError("refusing to erase " + where +
                         ": this command replaces or overwrites its data with test data",
                     "to erase it, pass --allow-database " + dbname +
                         "; to run on a throwaway cluster instead, " +
                         HowToDropIt(server.source()) + ".");
  }
  if (*allowed != dbname) {
    throw UsageError("--allow-database " + *allowed +
                         " does not name the database this command would erase: " + where,
                     "pass --allow-database " + dbname +
                         " to erase it, or point the command "
                         "at the database you meant.");
  }
  spdlog::warn("database erase allowed dbname={} host={} port={}", log::Value(dbname),
               log::Value(conn->hostname()), log::Value(conn->port()));
}

}  // namespace

const char* ToString(ServerSource source) {
  switch (source) {
    case ServerSource::kCommandLine:
      return "command line";
    case ServerSource::kEnvironmentUrl:
      return "COEXIST_DATABASE_URL";
    case ServerSource::kConfigUrl:
      return "configuration";
    case ServerSource::kPgEnvironment:
      return "PG environment";
    case ServerSource::kLocalCluster:
      return "local cluster (coexist db up)";
    case ServerSource::kThrowaway:
      return "throwaway cluster";
  }
  return "unknown";
}

Server::Server(std::string conninfo, ServerSource source, std::unique_ptr<TempCluster> cluster)
    : conninfo_(std::move(conninfo)), source_(source), cluster_(std::move(cluster)) {}
Server::Server(Server&&) noexcept = default;
Server& Server::operator=(Server&&) noexcept = default;
Server::~Server() = default;

Server Server::At(std::string conninfo) {
  return Server(std::move(conninfo), ServerSource::kCommandLine, nullptr);
}

Server Server::Resolve(const ServerChoice& choice) {
  auto pick = [](std::string conninfo, ServerSource source) {
    Server server(std::move(conninfo), source, nullptr);
    spdlog::info("database chosen source={} {}", log::Value(ToString(source)), server.Describe());
    return server;
  };
  auto configured = [&]() -> std::optional<Server> {
    if (choice.command_line_url) return pick(*choice.command_line_url, ServerSource::kCommandLine);
    if (auto url = Env("COEXIST_DATABASE_URL")) return pick(*url, ServerSource::kEnvironmentUrl);
    if (choice.config_url) return pick(*choice.config_url, ServerSource::kConfigUrl);
    if (Env("PGHOST") || Env("PGDATABASE") || Env("PGSERVICE")) {
      return pick("", ServerSource::kPgEnvironment);
    }
    auto data_dir = choice.local_data_dir.empty() ? DefaultLocalDataDir()
                                                  : std::filesystem::path(choice.local_data_dir);
    if (ProbeLocalCluster(data_dir).running) {
      return pick(LocalClusterConnectionString(data_dir), ServerSource::kLocalCluster);
    }
    return std::nullopt;
  }();
  if (choice.use == DatabaseUse::kKeepState) {
    if (!configured) {
      throw ConfigurationError(
          "no database configured: this command keeps its state in the database, and a "
          "throwaway cluster would lose it",
          "pass --database-url URL, set COEXIST_DATABASE_URL, set database.url in the YAML "
          "configuration or the PG* environment (PGHOST, PGDATABASE, PGSERVICE), or start a "
          "local cluster with 'coexist db up'.");
    }
    return std::move(*configured);
  }
  if (configured) {
    CheckErasable(*configured, choice.allow_database);
    return std::move(*configured);
  }
  if (choice.allow_database) {
    throw UsageError("--allow-database " + *choice.allow_database +
                         " names a database to erase, but no database is configured",
                     "drop --allow-database to run on a throwaway cluster, or configure the "
                     "database (--database-url, COEXIST_DATABASE_URL, database.url, PG* "
                     "environment).");
  }
  auto cluster = TempCluster::Start();
  std::string conninfo = cluster->ConnectionString();
  Server server(conninfo, ServerSource::kThrowaway, std::move(cluster));
  spdlog::info("database chosen source={} {}", log::Value(ToString(server.source())),
               server.Describe());
  return server;
}

std::string Server::Describe() const { return DescribeConninfo(conninfo_); }

std::string DescribeConninfo(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    PQfreemem(error);
    return "(unparseable connection string)";
  }
  std::string out;
  for (const char* key : {"host", "hostaddr", "port", "dbname", "user"}) {
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
      if (o->val != nullptr && *o->val != '\0' && std::string_view(o->keyword) == key) {
        if (!out.empty()) out += ' ';
        out += std::string(key) + "=" + o->val;
      }
    }
  }
  PQconninfoFree(options);
  return out.empty() ? "(libpq defaults)" : out;
}

}  // namespace coexist::db
