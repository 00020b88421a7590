#include "batch/guard.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <pqxx/pqxx>
#include <thread>

#include "batch/check.h"
#include "batch/record_sql.h"
#include "common/error.h"
#include "db/target_table.h"
#include "policies/policy.h"
#include "schema/guard_rows.h"

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

void InstallGuardLocked(pqxx::connection_base& conn, const CheckedConfig& checked,
                        const db::LockAttempts& locks);

}  // namespace

void InstallGuard(pqxx::connection_base& conn, const CheckedConfig& checked,
                  const db::LockAttempts& locks) {  // Waited for at most a minute (another
                                                    // installer holds it for seconds): a
  // session that squats it makes this exit 75 naming how to find it.
  auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (!pqxx::nontransaction(conn)
              .exec_params1("SELECT pg_try_advisory_lock($1)", kGuardLockKey)[0]
              .as<bool>()) {
    if (std::chrono::steady_clock::now() > give_up) {
      throw TempFailError(
          "another session has held coexist's guard install lock for a minute: nothing installed",
          "find it: SELECT pid, usename, application_name, state FROM pg_stat_activity WHERE pid "
          "IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = " +
              std::to_string(kGuardLockKey & 0xffffffffLL) + "); then try again.");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  try {
    InstallGuardLocked(conn, checked, locks);
  } catch (...) {
    pqxx::nontransaction(conn).exec_params("SELECT pg_advisory_unlock($1)", kGuardLockKey);
    throw;
  }
  pqxx::nontransaction(conn).exec_params("SELECT pg_advisory_unlock($1)", kGuardLockKey);
}

namespace {

// The version trigger of `t`, when missing or of an older naming.
void EnsureVersionTrigger(pqxx::connection_base& conn, const config::TargetTable& t,
                          const db::LockAttempts& locks) {
  // Re-pointing the version trigger takes a lock on the table that queues
  // behind every online transaction: install only when it is missing or
  // calls a function of the naming before 0009.
  pqxx::read_transaction tx(conn);
  auto trigger = db::VersionTriggerOf(tx, t);
  tx.commit();
  if (trigger != db::VersionTrigger::kCurrent) db::InstallVersionTrigger(conn, t, locks);
}

// The guard trigger of `t`.
void InstallGuardOn(pqxx::transaction_base& tx, const config::TargetTable& t) {
  std::string table = tx.quote_name(t.schema) + "." + tx.quote_name(t.table);
  if (t.owner_column) {
    tx.exec_params("SELECT coexist.install_guard_trigger($1::regclass, $2, $3)", table,
                   t.key_column, *t.owner_column);
  } else {
    tx.exec_params("SELECT coexist.install_guard_trigger($1::regclass, $2)", table, t.key_column);
  }
}

void InstallGuardLocked(pqxx::connection_base& conn, const CheckedConfig& checked,
                        const db::LockAttempts& locks) {
  const config::Config& config = checked.config();
  EnsureVersionTrigger(conn, config.target, locks);
  for (const auto& t : config.targets) EnsureVersionTrigger(conn, t, locks);
  // Creating the guard trigger the first time locks the table: each table
  // in a transaction of its own, its lock waited for a bounded time and
  // tried again, rather than camping in the lock queue ahead of online
  // writers.
  std::vector<config::TargetTable> tables = {config.target};
  tables.insert(tables.end(), config.targets.begin(), config.targets.end());
  for (const auto& t : tables) {
    db::WithLockAttempts(conn, "install the guard trigger on " + t.Name(),
                         conn.quote_name(t.schema) + "." + conn.quote_name(t.table), locks,
                         [&](pqxx::transaction_base& tx) { InstallGuardOn(tx, t); });
  }
  pqxx::work tx(conn);
  WriteWindows(tx, checked);
  tx.commit();
  spdlog::info("guard trigger installed target={} more_targets={}", config.target.Name(),
               config.targets.size());
}

}  // namespace

void WriteWindows(pqxx::transaction_base& tx, const CheckedConfig& checked) {
  // What the configuration says now: those of tables no longer listed go too.
  const config::Config& config = checked.config();
  auto windows = checked.policy().Windows();
  std::vector<config::TargetTable> tables = {config.target};
  tables.insert(tables.end(), config.targets.begin(), config.targets.end());
  std::vector<db::WindowRow> rows;
  for (const auto& t : tables) {
    std::string table = tx.quote_name(t.schema) + "." + tx.quote_name(t.table);
    int position = 0;
    for (const auto& w : windows) {
      rows.push_back({table, position++, w.time_zone,
                      std::vector<long long>(w.weekdays.begin(), w.weekdays.end()), Clock(w.start),
                      Clock(w.end), policies::ToString(w.mode), w.between_runs});
    }
  }
  db::ReplaceWindows(tx, config.batch.job, rows);
}

long long ReleaseWindows(pqxx::transaction_base& tx, const std::string& job) {
  return db::ReleaseReadOnlyWindows(tx, job);
}
}  // namespace coexist::batch
