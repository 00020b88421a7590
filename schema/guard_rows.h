#pragma once

// The statements coexist's C++ runs on the rows the guard trigger reads on
// every online write (schema/functions/install_guard_trigger.sql):
// coexist.windows (a job's windows as its configuration says, their release
// when a run ends) and coexist.targets (the guarded tables, forgotten on
// uninstall).
//
// Each runs in the caller's transaction. Errors are libpqxx's, uncaught.
//
// Thread safety: plain functions; a transaction is used by one thread.

#include <string>
#include <vector>

namespace pqxx {
class transaction_base;
}  // namespace pqxx

namespace coexist::db {

// One row of coexist.windows (docs/schema.md).
struct WindowRow {
  std::string target;  // a regclass literal
  int position = 0;    // its place among the job's windows on the target
  std::string time_zone;
  std::vector<long long> weekdays;   // ISO: 1 Monday .. 7 Sunday
  std::string start_time, end_time;  // "HH:MM"
  std::string mode;                  // "read_only", ...
  bool between_runs = false;
};

// The job's windows become `rows`: those of tables no longer listed go too.
void ReplaceWindows(pqxx::transaction_base& tx, const std::string& job,
                    const std::vector<WindowRow>& rows);

// What ReplaceWindows does, as `db install --plan` shows it.
std::string ReplaceWindowsPlan(pqxx::transaction_base& tx, const std::string& job);

// Ends the job's read_only windows now; returns how many rows went.
long long ReleaseReadOnlyWindows(pqxx::transaction_base& tx, const std::string& job);

// Forgets `target` (a regclass literal): its coexist.targets row, and the
// windows on it or of `job`.
void ForgetTarget(pqxx::transaction_base& tx, const std::string& target, const std::string& job);

// Whether some table is guarded (a coexist.targets row; false before 0003).
bool AnyTargetGuarded(pqxx::transaction_base& tx);

// The guarded tables other than `tables` (schema.table, quoted as needed),
// sorted.
std::vector<std::string> OtherGuardedTables(pqxx::transaction_base& tx,
                                            const std::vector<std::string>& tables);

// Every window of every job goes (the simulator's cells start without).
void DeleteAllWindows(pqxx::transaction_base& tx);

}  // namespace coexist::db
