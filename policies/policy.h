#pragma once

// The five coexistence policies (docs/policies.md) behind one interface.
// A policy only DECIDES, from what the batch knows about a record (locked,
// edit-locked, waited so long, deferred so often), what to do with it; the
// batch runner (batch/) carries the decision out in SQL. Deciding is pure and
// takes microseconds, so tests/policies_decision_test.cpp covers every row of
// every policy's decision table without a database.
//
// Thread safety: a Policy is immutable after Create(); share it freely.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace coexist::policies {

using std::chrono::milliseconds;

// What the batch knows about one queued item's record when it decides.
struct RecordFacts {
  // Another transaction holds the record's row lock (our SKIP LOCKED or
  // lock_timeout attempt did not get it).
  bool row_locked = false;
  // Another owner holds a live (unexpired) edit lock on the record.
  bool edit_locked = false;
  // The record's owner column already says 'batch' (status_partition).
  bool owned_by_batch = false;
  // How often the item was deferred by earlier runs.
  int deferrals = 0;
  // How long the batch has waited for this record so far (0 at first sight).
  milliseconds waited{0};
  // The backends blocking our row lock, when a wait step saw them: whether
  // any was seen, and whether every one's application_name matches the
  // online pattern (batch_priority may only cancel those).
  bool blockers_seen = false;
  bool blockers_are_online = false;
};

enum class Action {
  kApply,             // the row is ours and nothing is in the way: apply it now
  kWaitRowLock,       // try the row lock again for one lock_timeout step
  kWaitEditLock,      // leave it queued; retry when the edit lock goes (NOTIFY or expiry)
  kRevokeEditLock,    // delete the edit lock (audited, owner notified), then go on
  kCancelBlocker,     // pg_cancel_backend the online backends blocking us, then wait a step
  kTerminateBlocker,  // pg_terminate_backend them, then wait a step
  kDefer,             // leave it for the next run, with a reason
};

const char* ToString(Action action);

struct Decision {
  Action action = Action::kApply;
  // Why, for kDefer (queue.defer_reason and the events row): row_locked,
  // edit_locked, max_wait, blocker_not_online, still_locked, batch_owned.
  std::string reason;
  // For wait actions: the lock_timeout of the next step.
  milliseconds step{0};
  // Taken because the item was deferred max_deferrals times (skip_locked's
  // on_exhausted); the runner writes an item_escalated event.
  bool escalated = false;

  bool operator==(const Decision&) const = default;
};

// Whether the batch may claim at a moment (time_window restricts it).
struct ClaimGate {
  bool allowed = true;
  // When allowed: when claiming must stop (drain margin before the window's
  // end); time_point::max() when never.
  std::chrono::system_clock::time_point stop_at = std::chrono::system_clock::time_point::max();
  std::string reason;  // when not allowed: "outside_window"
};

class Policy {
 public:
  virtual ~Policy() = default;
  // The stable name: the YAML `policy.name` and what runs.policy records.
  virtual const char* Name() const = 0;
  // What to do with a record, given the facts.
  virtual Decision Decide(const RecordFacts& facts) const = 0;
  // Whether claiming may go on at `now`. Default: always.
  virtual ClaimGate MayClaim(std::chrono::system_clock::time_point now) const;
  // status_partition: take rows over through the owner column in their own
  // transaction, process them in a second, hand them back.
  virtual bool TakesOver() const { return false; }
  // Whether row locks are waited for inside the chunk's transaction until a
  // final decision (batch_priority), rather than one step per chunk.
  virtual bool WaitsInTransaction() const { return false; }
  // Whether a wait step should look up the backends blocking it.
  virtual bool WantsBlockers() const { return false; }
};

using Factory = std::function<std::unique_ptr<Policy>(const config::PolicyConfig&)>;

// The policy named by config.name. Throws std::invalid_argument for a name
// no policy has (config/ validates names, so this means a bug).
std::unique_ptr<Policy> Create(const config::PolicyConfig& config);
// Every registered name, sorted.
std::vector<std::string> Names();

// The doubling lock_timeout schedule shared by the waiting policies: the step
// after having waited `waited`: lock_wait_initial, doubling, capped at
// lock_wait_max (pg_repack's way of never queueing for long).
milliseconds NextStep(const config::PolicyConfig& config, milliseconds waited);

}  // namespace coexist::policies
