#include "schema/migrations.h"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>
#include <stdexcept>

#include "common/embedded_file.h"
#include "common/error.h"
#include "db/failure.h"

namespace coexist::db {
namespace migrations_sql {
const std::vector<EmbeddedFile>& EmbeddedFiles();
}

namespace {

// Any number works as long as every installer uses the same one.
constexpr long long kInstallLockKey = 0x636f65786973ll;  // "coexis"

std::vector<Migration> ParseMigrations() {
  std::vector<Migration> out;
  for (const auto& file : migrations_sql::EmbeddedFiles()) {
    std::string name(file.name.substr(0, file.name.rfind(".sql")));
    int version = std::stoi(name.substr(0, name.find('_')));
    if (version != static_cast<int>(out.size()) + 1) {
      throw std::logic_error("migration " + name + " breaks the 1, 2, 3... numbering");
    }
    out.push_back({version, name, file.text});
  }
  return out;
}

// How many of this binary's migrations the database records; -1 when
// coexist.schema_migrations does not exist. Only reads.
int AppliedCount(pqxx::connection_base& conn) {
  pqxx::read_transaction tx(conn);
  if (!tx.exec1("SELECT to_regclass('coexist.schema_migrations') IS NOT NULL")[0].as<bool>()) {
    return -1;
  }
  return tx
      .exec_params1("SELECT count(*) FROM coexist.schema_migrations WHERE version BETWEEN 1 AND $1",
                    LatestVersion())[0]
      .as<int>();
}

// The installers' advisory lock, for this transaction. Waited for at most a
// minute (another install applies migrations for seconds, not minutes): a
// session that squats it makes this install exit 75 naming it, instead of
// hanging.
void LockInstall(pqxx::transaction_base& tx) {
  try {
    tx.exec("SET LOCAL lock_timeout = '60s'");
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", kInstallLockKey);
    tx.exec("SET LOCAL lock_timeout = DEFAULT");
  } catch (const pqxx::sql_error& e) {
    if (SqlStateOf(e) != "55P03") throw;
    throw TempFailError(
        "another session has held coexist's install lock for a minute: no migration applied",
        "find it: SELECT pid, usename, application_name, state, xact_start FROM pg_stat_activity "
        "WHERE pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = " +
            std::to_string(kInstallLockKey & 0xffffffffLL) + "); then try again.");
  }
}

int ApplyMissing(pqxx::connection_base& conn) {
  {
    pqxx::work tx(conn);
    LockInstall(tx);
    tx.exec("CREATE SCHEMA IF NOT EXISTS coexist");
    tx.exec(
        "CREATE TABLE IF NOT EXISTS coexist.schema_migrations ("
        " version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())");
    tx.commit();
  }
  int applied = 0;
  for (const auto& migration : AllMigrations()) {
    pqxx::work tx(conn);
    LockInstall(tx);
    auto done = tx.exec_params("SELECT 1 FROM coexist.schema_migrations WHERE version = $1",
                               migration.version);
    if (!done.empty()) continue;
    tx.exec(std::string(migration.sql));
    tx.exec_params("INSERT INTO coexist.schema_migrations (version, name) VALUES ($1, $2)",
                   migration.version, migration.name);
    tx.commit();
    ++applied;
    spdlog::info("migration applied version={} name={}", migration.version, migration.name);
  }
  return applied;
}

}  // namespace

const std::vector<Migration>& AllMigrations() {
  static const std::vector<Migration> migrations = ParseMigrations();
  return migrations;
}

int LatestVersion() { return static_cast<int>(AllMigrations().size()); }

int InstallMigrations(pqxx::connection_base& conn) {
  // Nothing to apply: create nothing either, so that a role without CREATE
  // rights (the batch's role of docs/operations.md) enqueues and runs.
  int recorded = AppliedCount(conn);
  if (recorded == LatestVersion()) return 0;
  try {
    return ApplyMissing(conn);
  } catch (const pqxx::insufficient_privilege& e) {
    std::string what = e.what();
    throw ConfigurationError(
        "the coexist schema " +
            (recorded < 0 ? std::string("is not installed")
                          : "has " + std::to_string(recorded) + " of this binary's " +
                                std::to_string(LatestVersion()) + " migrations") +
            ", and this role may not install it: " + what.substr(0, what.find('\n')),
        "run `coexist db install --config FILE` as the schema's owner (docs/operations.md, "
        "\"Database roles\"), then this command again.");
  }
}

bool SchemaInstalled(pqxx::transaction_base& tx) {
  return tx.exec1("SELECT to_regclass('coexist.schema_migrations') IS NOT NULL")[0].as<bool>();
}

std::set<int> AppliedVersions(pqxx::transaction_base& tx) {
  std::set<int> out;
  for (const auto& row : tx.exec("SELECT version FROM coexist.schema_migrations")) {
    out.insert(row[0].as<int>());
  }
  return out;
}

std::vector<AppliedMigration> AppliedMigrations(pqxx::connection_base& conn) {
  pqxx::read_transaction tx(conn);
  auto exists = tx.exec("SELECT to_regclass('coexist.schema_migrations') IS NOT NULL");
  if (!exists[0][0].as<bool>()) return {};
  std::vector<AppliedMigration> out;
  for (const auto& row :
       tx.exec("SELECT version, name, to_char(applied_at, 'YYYY-MM-DD HH24:MI:SSOF') "
               "FROM coexist.schema_migrations ORDER BY version")) {
    out.push_back({row[0].as<int>(), row[1].as<std::string>(), row[2].as<std::string>()});
  }
  return out;
}

}  // namespace coexist::db
