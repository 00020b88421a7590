#pragma once

// What the dashboard shows, as JSON: the shapes `coexist jobs --json`,
// `runs list --json` and `events --json` print, so the page and the CLI
// never disagree. Read in one go by DashboardState for GET /api/state.

#include <nlohmann/json.hpp>

#include "schema/events.h"
#include "schema/jobs.h"
#include "schema/queue_store_ops.h"

namespace coexist::dashboard {

nlohmann::json JobJson(const db::JobRow& job);
nlohmann::json RunJson(const db::RunRow& run);
nlohmann::json EventJson(const db::EventRow& event);

// Every job (db::ListJobs), the `runs` newest runs and the `events` newest
// events, and the database's clock when it was read ("read_at"). Errors are
// libpqxx's. `conn` must have no transaction open.
nlohmann::json DashboardState(pqxx::connection_base& conn, int runs = 20, int events = 30);

}  // namespace coexist::dashboard
