#pragma once

// Installs the database side of the coexistence rules for a configuration's
// target: the version trigger, the guard trigger (CX003/CX004/CX005, see
// docs/database-api.md) and, for time_window, the job's windows. Called by
// `coexist db install` and by every batch run on start. Idempotent.
// Throws config::ConfigError (78), located at the key, when the target is
// not fit for it (batch/check.h, checked first, so nothing is installed
// then); pqxx::sql_error when the database refuses the rest (42501 without
// the rights).

#include "config/config.h"

namespace pqxx {
class connection_base;
}

namespace coexist::batch {

void InstallGuard(pqxx::connection_base& conn, const config::Config& config);

}  // namespace coexist::batch
