#include "db/server.h"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <regex>
#include <sstream>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "db/cluster.h"
#include "db/connection.h"

namespace coexist::db {
namespace {

constexpr const char* kRedacted = "********";

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

std::string PercentDecoded(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() &&
        std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// Every password `conninfo` may hold, as written and as libpq reads it.
std::vector<std::string> PasswordsIn(const std::string& conninfo) {
  std::vector<std::string> found;
  auto add = [&found](const std::string& secret) {
    if (secret.empty()) return;
    found.push_back(secret);
    if (std::string decoded = PercentDecoded(secret); decoded != secret) found.push_back(decoded);
  };
  char* error = nullptr;
  if (PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error)) {
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
      if (o->val != nullptr && std::string_view(o->keyword) == "password") add(o->val);
    }
    PQconninfoFree(options);
  }
  PQfreemem(error);
  // As written, for strings libpq cannot parse (its errors quote them).
  // libpq ends a URL's user info at the first '@' or '/'.
  static const std::regex kUserInfo(R"(^postgres(?:ql)?://[^:@/]*:([^@/]*)@)");
  static const std::regex kUrlParameter(R"([?&]password=([^&]*))");
  static const std::regex kKeyValue(R"((?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'?|\S+))");
  for (const auto* pattern : {&kUserInfo, &kUrlParameter, &kKeyValue}) {
    for (std::sregex_iterator it(conninfo.begin(), conninfo.end(), *pattern), end; it != end;
         ++it) {
      std::string value = (*it)[1];
      add(value);
      if (value.size() >= 2 && value.front() == '\'') {
        add(value.substr(1, value.size() - (value.back() == '\'' ? 2 : 1)));
      }
    }
  }
  // Longest first, so a password that contains another is replaced whole.
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.size() > b.size(); });
  return found;
}

// libpq's parse errors quote pieces of the string ('missing "=" after
// "cret"' for "password=s3 cret"). Keeps a quoted piece only when it is a
// single character or a key of the string ("invalid connection option
// "passwrd"" when the string says passwrd=...); masks every other.
std::string MaskQuotedPieces(const std::string& message, const std::string& conninfo) {
  static const std::regex kQuoted(R"re("([^"]*)")re");
  std::string out;
  auto tail = message.cbegin();
  for (std::sregex_iterator it(message.begin(), message.end(), kQuoted), end; it != end; ++it) {
    std::string piece = (*it)[1];
    bool is_key = !piece.empty() && std::all_of(piece.begin(), piece.end(), [](unsigned char c) {
      return std::isalnum(c) || c == '_';
    }) && std::regex_search(conninfo, std::regex("(^|[\\s?&])" + piece + "\\s*="));
    out.append(tail, (*it)[0].first);
    out += piece.size() == 1 || is_key ? (*it)[0].str() : std::string("\"...\"");
    tail = (*it)[0].second;
  }
  out.append(tail, message.cend());
  return out;
}

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

constexpr const char* kConninfoHint =
    "write it as postgresql://USER@HOST:PORT/DBNAME or as key=value pairs, and percent-encode "
    "special characters in a URL (%40 for @, %25 for %, %2F for /); better, keep the password "
    "out of it: PGPASSFILE or ~/.pgpass (docs/security.md).";

std::string Located(const std::string& origin) {
  return origin.empty() ? "the database URL" : "the database URL in " + origin;
}

// libpq's own integer reading (parse_int_param): optional spaces, a sign,
// digits, spaces; within int.
bool LibpqInteger(const std::string& text) {
  static const std::regex kInteger(R"(^\s*[-+]?[0-9]{1,10}\s*$)");
  if (!std::regex_match(text, kInteger)) return false;
  long long value = std::stoll(text);
  return value >= std::numeric_limits<int>::min() && value <= std::numeric_limits<int>::max();
}

// The values libpq accepts for the options it reads only when it connects,
// so that PQconninfoParse lets a wrong one through.
struct OptionRule {
  const char* key;
  std::vector<std::string> values;  // empty: an integer
  bool any_case = false;            // compared without case (and may be empty)
  const char* meaning;              // for the hint
};

const std::vector<OptionRule>& OptionRules() {
  static const std::vector<OptionRule> kRules = {
      {"connect_timeout", {}, false, "a whole number of seconds (0: wait forever)"},
      {"keepalives", {}, false, "1 (on, the default) or 0"},
      {"keepalives_idle", {}, false, "a whole number of seconds"},
      {"keepalives_interval", {}, false, "a whole number of seconds"},
      {"keepalives_count", {}, false, "a whole number of probes"},
      {"tcp_user_timeout", {}, false, "a whole number of milliseconds"},
      {"sslmode", {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}, false, ""},
      {"gssencmode", {"disable", "prefer", "require"}, false, ""},
      {"channel_binding", {"disable", "prefer", "require"}, false, ""},
      {"target_session_attrs",
       {"any", "read-write", "read-only", "primary", "standby", "prefer-standby"},
       false,
       ""},
      {"ssl_min_protocol_version", {"TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"}, true, ""},
      {"ssl_max_protocol_version", {"TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"}, true, ""},
      {"load_balance_hosts", {"disable", "random"}, false, ""},
      {"sslnegotiation", {"postgres", "direct"}, false, ""},
  };
  return kRules;
}

const OptionRule* RuleOf(std::string_view key) {
  for (const auto& rule : OptionRules()) {
    if (key == rule.key) return &rule;
  }
  return nullptr;
}

bool ValidOptionValue(std::string_view key, const std::string& value) {
  const OptionRule* rule = RuleOf(key);
  if (rule == nullptr) return true;
  if (rule->values.empty()) return LibpqInteger(value);
  if (rule->any_case && value.empty()) return true;
  return std::any_of(rule->values.begin(), rule->values.end(), [&](const std::string& v) {
    return rule->any_case ? strcasecmp(v.c_str(), value.c_str()) == 0 : v == value;
  });
}

std::string OptionHint(const std::string& key) {
  const OptionRule* rule = RuleOf(key);
  if (rule == nullptr) return key + " has a value libpq refuses";
  if (rule->values.empty()) return key + " is " + rule->meaning;
  std::string list;
  for (const auto& v : rule->values) list += (list.empty() ? "" : ", ") + v;
  return key + " is one of " + list;
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
                         " to erase it, or point the command at the database you meant.");
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
  auto pick = [&choice](std::string conninfo, ServerSource source) {
    if (source != ServerSource::kConfigUrl) {
      CheckConninfo(conninfo, Origin(source));
    } else {
      try {
        CheckConninfo(conninfo);
      } catch (const ConfigurationError& e) {
        // Written in the YAML file: named by its place there, like any key.
        throw config::ConfigError(choice.config_url_at, "database.url", e.what(), e.hint());
      }
    }
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

void CheckConninfo(const std::string& conninfo, const std::string& origin) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    std::string reason = Trimmed(error != nullptr ? error : "out of memory");
    PQfreemem(error);
    throw ConnectionSettingsError(Located(origin) + " is malformed: " +
                                      MaskQuotedPieces(RedactPasswords(reason, conninfo), conninfo),
                                  kConninfoHint);
  }
  std::string bad_port;
  std::optional<std::pair<std::string, std::string>> bad_value;  // key, value
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    std::string_view key = o->keyword;
    if (key == "port") {
      // A list for several hosts; an empty entry means the default.
      std::stringstream ports(o->val);
      for (std::string port; std::getline(ports, port, ',') && bad_port.empty();) {
        bool number =
            !port.empty() && port.size() <= 5 &&
            std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); });
        if (!port.empty() && (!number || std::stoi(port) < 1 || std::stoi(port) > 65535)) {
          bad_port = port;
        }
      }
    } else if (!bad_value && !ValidOptionValue(key, o->val)) {
      bad_value.emplace(key, o->val);
    }
  }
  PQconninfoFree(options);
  if (!bad_port.empty()) {
    throw ConnectionSettingsError(
        Located(origin) + " has an invalid port \"" + RedactPasswords(bad_port, conninfo) + "\"",
        "a port is a number from 1 to 65535; " + std::string(kConninfoHint));
  }
  if (bad_value) {
    const auto& [key, value] = *bad_value;
    throw ConnectionSettingsError(Located(origin) + " has an invalid " + key + " \"" +
                                      RedactPasswords(value, conninfo) + "\"",
                                  OptionHint(key) + "; fix it where the URL is written.");
  }
}

bool IsSettingsFailure(const std::string& libpq_message) {
  // libpq 12-17's wording for a value it refuses, a service it cannot
  // find, a hostaddr or list it cannot read; never a server's answer.
  static const std::regex kSettings(
      R"(invalid integer value ".*" for connection option|invalid [a-z_]+ value: ")"
      R"(|invalid port number|could not match [0-9]+ (host names|port numbers) to)"
      R"(|could not parse network address|invalid SSL protocol version range)"
      R"(|value ".*" invalid when [A-Za-z]+ support is not compiled in)"
      R"(|definition of service ".*" not found|service file ".*" not found)"
      R"(|invalid connection option ")");
  return std::regex_search(libpq_message, kSettings);
}

std::string RedactPasswords(std::string text, const std::string& conninfo) {
  for (const auto& secret : PasswordsIn(conninfo)) {
    for (size_t at = text.find(secret); at != std::string::npos;
         at = text.find(secret, at + std::strlen(kRedacted))) {
      text.replace(at, secret.size(), kRedacted);
    }
  }
  return text;
}

}  // namespace coexist::db
