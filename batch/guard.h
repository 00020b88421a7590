#pragma once

// Installs the database side of the coexistence rules for a configuration's
// target: the version trigger, the guard trigger (CX003/CX004/CX005, see
// docs/database-api.md) and, for time_window, the job's windows. Called by
// `coexist db install` and by every batch run on start. Idempotent.
// Takes a CheckedConfig (batch/check.h): the target was checked before
// anything is installed, at least with kInstallCheck. Throws
// pqxx::sql_error when the database refuses (42501 without the rights).

#include "batch/check.h"
#include "db/target_table.h"

namespace pqxx {
class connection_base;
class transaction_base;
}  // namespace pqxx

namespace coexist::batch {

// Creating a trigger locks its table: waited for under `locks`
// (db::WithLockAttempts), so online writes never queue behind it long.
void InstallGuard(pqxx::connection_base& conn, const CheckedConfig& checked,
                  const db::LockAttempts& locks = {});

// The job's windows as the configuration says now, on the target and the
// tables of `targets:` (rows of coexist.windows, no DDL): InstallGuard
// writes them, and so does every run's start, so that a window a drained
// run released (ReleaseWindows) holds again while the next run works.
void WriteWindows(pqxx::transaction_base& tx, const CheckedConfig& checked);

// Ends the job's read_only windows for online writers now (the batch has
// drained its queue; policy time_window's release_when_done). Returns how
// many window rows it removed.
long long ReleaseWindows(pqxx::transaction_base& tx, const std::string& job);

}  // namespace coexist::batch
