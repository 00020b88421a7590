#pragma once

#include <nlohmann/json_fwd.hpp>
#include <ostream>

#include "db/server.h"
#include "schema/status.h"

namespace coexist::cli {

// The human report of `db status` and the demo.
void PrintStatus(std::ostream& out, const db::Status& status, const db::Server& server);
nlohmann::json StatusJson(const db::Status& status, const db::Server& server);

}  // namespace coexist::cli
