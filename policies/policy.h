#pragma once

// The coexistence policies (docs/policies.md) behind one interface.
// A policy only DECIDES, from what the batch knows about a record (locked,
// edit-locked, waited so long, deferred so often), what to do with it; the
// batch runner (batch/) carries the decision out in SQL. Deciding is pure and
// takes microseconds, so tests/policies_decision_test.cpp covers every row of
// every policy's decision table without a database.
//
// A policy is a class here with its own options and their reader, and one
// line in registry.cpp (policies/registry.h); nothing outside policies/
// knows the names.
//
// Thread safety: a Policy is immutable after Create(); share it freely.

#include <any>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/stop_reason.h"
#include "config_core/policy_config.h"

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
  // When not allowed: why (kOutsideWindow, kDrainMargin), which becomes the
  // run's stop reason.
  StopReason reason = StopReason::kOutsideWindow;
};

// What the database does to online writes while a window is active.
enum class WindowMode {
  kReadOnly,  // refuses them (CX003)
  kAllow,     // lets them pass
};
// "read_only", "allow": the YAML value and coexist.windows.mode.
const char* ToString(WindowMode mode);

// A batch window, e.g. 01:00-05:00 Asia/Tokyo on weekdays. The window belongs
// to the day it starts on; end <= start means it ends the next day, end ==
// start means 24 hours.
struct Window {
  std::string time_zone = "UTC";                      // IANA name, validated at load
  std::vector<int> weekdays = {1, 2, 3, 4, 5, 6, 7};  // ISO: 1 = Monday .. 7 = Sunday
  std::chrono::minutes start{60};                     // "01:00"
  std::chrono::minutes end{5 * 60};                   // "05:00"
  WindowMode mode = WindowMode::kReadOnly;
  // read_only only: online writes are refused inside the window also while
  // no run of the job works (the operator's opt-in; by default a window
  // refuses them only while a run is alive, coexist.live_run).
  bool between_runs = false;
};

// A policy: its decisions, and what the runner must prepare for them (the
// capability queries below, each false or empty by default). The runner
// asks these and never a policy's name.
class Policy {
 public:
  virtual ~Policy() = default;
  // The stable name: the YAML `policy.name` and what runs.policy records.
  virtual const char* Name() const = 0;
  // What to do with a record, given the facts.
  virtual Decision Decide(const RecordFacts& facts) const = 0;
  // Whether claiming may go on at `now`. Default: always.
  virtual ClaimGate MayClaim(std::chrono::system_clock::time_point now) const;
  // Whether records are taken over through the target's owner column in
  // their own transaction, processed in a second and handed back
  // (status_partition). A run refuses a target without an owner column.
  virtual bool TakesOver() const { return false; }
  // Whether row locks are waited for inside the chunk's transaction until a
  // final decision (batch_priority), rather than one step per chunk.
  virtual bool WaitsInTransaction() const { return false; }
  // Whether Decide answers every row-locked record with kDefer, never a
  // wait (status_partition; skip_locked reporting when exhausted): a chunk
  // then keeps the row locks it took without waiting, in no savepoint, as
  // it will never have to let them go to wait in key order.
  virtual bool DefersEveryRowLock() const { return false; }
  // Whether a wait step should look up the backends blocking it.
  virtual bool WantsBlockers() const { return false; }
  // The application_name LIKE pattern of the blocking backends it may cancel
  // or terminate (online_application_name); empty when it signals none.
  virtual std::string SignalPattern() const { return {}; }
  // Whether Decide may answer kWaitEditLock: the worker then LISTENs for
  // edit-lock releases on a second connection.
  virtual bool WaitsForEditLocks() const { return false; }
  // How long it waits for one record before deferring it (max_wait): an
  // edit-lock wait wakes up by then. Default: no bound of its own.
  virtual milliseconds MaxWait() const { return milliseconds::max(); }
  // The windows the database enforces while they are active (coexist.windows,
  // written when a run starts). Default: none.
  virtual std::vector<Window> Windows() const { return {}; }
  // Whether a run that drained its queue lifts its read_only windows for
  // online users (until the next run starts) instead of keeping them to
  // their clock end. Default: no.
  virtual bool ReleasesWindowsWhenDone() const { return false; }
};

// The policy named by config.name (policies/registry.h), the default one
// when it names none. Throws
// std::invalid_argument for a name no policy has (the loader accepts only
// registered names, so this means a bug).
std::unique_ptr<Policy> Create(const config::PolicyConfig& config);
// Every registered name, sorted.
std::vector<std::string> Names();

// A policy's own options held by `config`: its defaults when it holds none.
// Throws std::invalid_argument when they are of another type (a bug).
template <typename Options>
Options OptionsOf(const config::PolicyConfig& config) {
  if (!config.options.has_value()) return Options{};
  if (const auto* options = std::any_cast<Options>(&config.options)) return *options;
  throw std::invalid_argument("policy " + config.name + " was given another policy's options");
}

// `config` holding `options` instead of its own (a policy that decides as
// another one, as skip_locked escalates).
inline config::PolicyConfig WithOptions(config::PolicyConfig config, std::any options) {
  config.options = std::move(options);
  return config;
}

// The doubling lock_timeout schedule shared by the waiting policies: the step
// after having waited `waited`: lock_wait_initial, doubling, capped at
// lock_wait_max (pg_repack's way of never queueing for long).
milliseconds NextStep(const config::PolicyConfig& config, milliseconds waited);

}  // namespace coexist::policies
