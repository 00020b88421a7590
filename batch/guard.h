#pragma once

// Installs the database side of the coexistence rules for a configuration's
// target: the version trigger, the guard trigger (CX003/CX004/CX005, see
// docs/database-api.md) and, for time_window, the job's windows. Called by
// `coexist db install` and by every batch run on start. Idempotent.
// Throws config::ConfigError (78), located at the key, when the target or
// one of its columns is missing (CheckTarget); pqxx::sql_error when the
// database refuses the rest (42501 without the rights).

#include "config/config.h"

namespace pqxx {
class connection_base;
}

namespace coexist::batch {

void InstallGuard(pqxx::connection_base& conn, const config::Config& config);

// The configured target against the database, before anything is run on
// it: throws config::ConfigError at target.table when the table does not
// exist, at target.key_column (version_column, owner_column) when it lacks
// that column. Reads in a transaction of its own on `conn`, which must have
// none open.
void CheckTarget(pqxx::connection_base& conn, const config::Config& config);

}  // namespace coexist::batch
