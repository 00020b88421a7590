#include "db/server.h"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "common/error.h"
#include "common/log.h"
#include "db/cluster.h"

namespace coexist::db {
namespace {

std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
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
  if (!choice.allow_throwaway) {
    throw UsageError("no database configured and no local cluster running",
                     "pass --database-url, set COEXIST_DATABASE_URL, or run 'coexist db up'.");
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
