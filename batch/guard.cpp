#include "batch/guard.h"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>

#include "batch/queue_sql.h"
#include "db/target_table.h"
#include "policies/policy.h"

namespace coexist::batch {
namespace {

std::string Clock(std::chrono::minutes m) {
  char text[8];
  std::snprintf(text, sizeof(text), "%02d:%02d", static_cast<int>(m.count() / 60) % 24,
                static_cast<int>(m.count() % 60));
  return text;
}

// Two runs starting at once would both CREATE OR REPLACE the same function
// and collide in pg_proc: installers take this session advisory lock.
constexpr long long kGuardLockKey = 0x636f6775617264ll;  // "coguard"

void InstallGuardLocked(pqxx::connection_base& conn, const config::Config& config);

}  // namespace

void CheckTarget(pqxx::connection_base& conn, const config::Config& config) {
  const auto& t = config.target;
  const auto& at = config.target_at;
  auto located = [&](const config::Mark& mark) {
    return mark.file.empty() ? config::Mark{config.source, 0, 0} : mark;
  };
  pqxx::read_transaction tx(conn);
  if (!db::TargetExists(tx, t)) {
    throw config::ConfigError(located(at.table), "target.table",
                              "table " + t.Name() + " does not exist",
                              "create it, or name an existing table (schema.table).");
  }
  for (const auto& key : db::MissingTargetColumns(tx, t)) {
    const config::Mark& mark = key == "key_column"       ? at.key_column
                               : key == "version_column" ? at.version_column
                                                         : at.owner_column;
    const std::string& column = key == "key_column"       ? t.key_column
                                : key == "version_column" ? t.version_column
                                                          : *t.owner_column;
    throw config::ConfigError(located(mark), "target." + key,
                              "table " + t.Name() + " has no column \"" + column + "\"",
                              "name a column of the table.");
  }
}

void InstallGuard(pqxx::connection_base& conn, const config::Config& config) {
  CheckTarget(conn, config);
  pqxx::nontransaction(conn).exec_params("SELECT pg_advisory_lock($1)", kGuardLockKey);
  try {
    InstallGuardLocked(conn, config);
  } catch (...) {
    pqxx::nontransaction(conn).exec_params("SELECT pg_advisory_unlock($1)", kGuardLockKey);
    throw;
  }
  pqxx::nontransaction(conn).exec_params("SELECT pg_advisory_unlock($1)", kGuardLockKey);
}

namespace {

void InstallGuardLocked(pqxx::connection_base& conn, const config::Config& config) {
  const auto& t = config.target;
  std::string table = conn.quote_name(t.schema) + "." + conn.quote_name(t.table);
  {
    // Re-pointing the version trigger takes a lock on the target that
    // queues behind every online transaction: install only when it is
    // missing or calls a function of the naming before 0009.
    pqxx::read_transaction tx(conn);
    auto trigger = db::VersionTriggerOf(tx, t);
    tx.commit();
    if (trigger != db::VersionTrigger::kCurrent) db::InstallVersionTrigger(conn, t);
  }
  pqxx::work tx(conn);
  // Creating the guard trigger the first time needs a table lock: wait for
  // it a bounded time rather than camping in the lock queue.
  tx.exec("SET LOCAL lock_timeout = '5s'");
  if (t.owner_column) {
    tx.exec_params("SELECT coexist.install_guard_trigger($1::regclass, $2, $3)", table,
                   t.key_column, *t.owner_column);
  } else {
    tx.exec_params("SELECT coexist.install_guard_trigger($1::regclass, $2)", table, t.key_column);
  }
  // The job's windows are what the configuration says now: replace them.
  tx.exec_params("DELETE FROM coexist.windows WHERE job = $1", config.batch.job);
  auto windows = policies::Create(config.policy)->Windows();
  int position = 0;
  for (const auto& w : windows) {
    std::vector<long long> days(w.weekdays.begin(), w.weekdays.end());
    tx.exec_params(
        "INSERT INTO coexist.windows (job, target, position, time_zone, weekdays, start_time,"
        " end_time, mode) VALUES ($1, $2::regclass, $3, $4, $5::integer[], $6::time, $7::time,"
        " $8)",
        config.batch.job, table, position++, w.time_zone, ArrayLiteral(days), Clock(w.start),
        Clock(w.end), policies::ToString(w.mode));
  }
  tx.commit();
  spdlog::info("guard trigger installed target={} windows={}", t.Name(), windows.size());
}

}  // namespace
}  // namespace coexist::batch
