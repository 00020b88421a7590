#pragma once

// Installs the database side of the coexistence rules for a configuration's
// target: the version trigger, the guard trigger (CX003/CX004/CX005, see
// docs/database-api.md) and, for time_window, the job's windows. Called by
// `coexist db install` and by every batch run on start. Idempotent.
// Throws pqxx::sql_error when the target or its columns are missing.

#include "config/config.h"

namespace pqxx {
class connection_base;
}

namespace coexist::batch {

void InstallGuard(pqxx::connection_base& conn, const config::Config& config);

}  // namespace coexist::batch
