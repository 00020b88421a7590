#pragma once

#include <atomic>
#include <ostream>
#include <vector>

#include "capacity/cell_result.h"
#include "config/scenario.h"

namespace coexist::capacity {

struct SimulateOptions {
  // Progress lines ("cell 2 of 10 ... ETA") go here; null: nowhere.
  std::ostream* progress = nullptr;
  // Set from a signal handler: the cell in flight stops early (its batch
  // drains its chunk) and no further cell starts.
  const std::atomic<bool>* stop = nullptr;
  // The online users log in as this role (created when missing, granted
  // what docs/operations.md grants the online application, in every cell)
  // instead of as the connection string's user. Set on a throwaway cluster,
  // whose user is a superuser: batch_priority never signals a superuser's
  // session, so the simulated users would never be forced out of the way.
  // `conninfo` must then be in keyword form (a throwaway cluster's is).
  std::string online_role;
};

// Runs every cell of the scenario on the server, one after another, each on
// fresh data: the demo target public.products reseeded with
// scenario.records rows (stock for the online edits, `settled` for the
// batch), the coexist tables emptied, scenario.queue_items items queued.
// Per cell: online load alone for `warmup`, then the batch with the cell's
// policy while the load goes on (until the batch ends or `window` passes),
// then `cooldown`. The batch's operation is the cell's `operation:` when
// given, else "add 1 to settled and write a ledger row" — the ledger
// (public.batch_ledger) checks that every done item was applied once.
//
// Each measured cell is appended to `results` as soon as it ends, so that
// after an exception (TempFailError, UnavailableError, ConfigError from the
// batch or the simulator) or a stop the cells measured so far can still be
// reported.
void RunScenario(const std::string& conninfo, const config::Scenario& scenario,
                 const SimulateOptions& options, std::vector<CellResult>& results);

ScenarioSummary Summarize(const config::Scenario& scenario);

}  // namespace coexist::capacity
