#pragma once

// `coexist batch run --dry-run`: what a run started now would claim and the
// policy decision each item would get (apply, wait_row_lock, defer, ...),
// changing nothing: no queue, runs or events rows are written, no attempts
// or deferrals bumped, no migration installed.
//
// How the facts are gathered: the queue, the edit locks, the owner column
// and pg_locks (is the job busy?) are read in a READ ONLY transaction. Row
// locks leave no trace a plain read can see, so the target's rows are probed
// with `SELECT ... FOR UPDATE SKIP LOCKED` in a second transaction that is
// always rolled back: it never waits, and for the few milliseconds of that
// statement an online write to one of those rows would wait for it (the
// same as a run's claim, far shorter). Rolled back, it leaves no row
// version and no row change behind.
//
// Thread safety: DryRun opens its own connection; call it from one thread.

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.h"

namespace coexist::batch {

struct DryRunItem {
  long long item_id = 0;
  std::string key;  // canonical text form (db::RecordKey)
  int attempts = 0;
  int deferrals = 0;
  // policies::ToString(Action): apply, wait_row_lock, wait_edit_lock,
  // revoke_edit_lock, cancel_blocker, terminate_blocker, defer; or
  // not_claimed when the policy refuses claiming now.
  std::string decision;
  // The policy's reason for a deferral, else the fact behind the decision
  // (row_locked, edit_locked, batch_owned, outside_window), else "".
  std::string reason;
  bool escalated = false;  // skip_locked's max_deferrals reached
};

struct DryRunReport {
  std::string job;
  std::string policy;
  // Whether the policy lets a run claim now (time_window); why not.
  bool may_claim = true;
  std::string refused_reason;
  // The run holding the job's lock ("run 7 on host h ..."), "" when free:
  // a real run now would exit with status 4.
  std::string busy;
  std::vector<DryRunItem> items;                 // every claimable item, in claim order
  std::map<std::string, long long> by_decision;  // decision -> items
  // Queued or deferred items a run cannot claim yet, so not in `items`:
  // behind an earlier pending item of one of their keys (a run takes them
  // after it, in the same run when that one is done), or deferred until
  // policy.defer_delay has passed.
  long long not_claimable_yet = 0;
};

// Gathers the report. Throws TempFailError when the server cannot be
// reached, UnavailableError when coexist is not installed in the database,
// pqxx errors for the rest.
DryRunReport DryRun(const std::string& conninfo, const config::Config& config);

// A table (item_id, key, attempts, deferrals, decision, reason) of at most
// `max_rows` items, then the totals per decision.
void PrintDryRun(std::ostream& out, const DryRunReport& report, size_t max_rows);

// Every item and the totals as JSON.
std::string DryRunJson(const DryRunReport& report);

}  // namespace coexist::batch
