#pragma once

// Private to batch/: one worker thread's chunk loop (claim -> decide ->
// lock/wait/revoke -> apply -> complete, one transaction per chunk). See
// runner.h for the public contract.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "batch/run_counts.h"
#include "common/error.h"
#include "common/stop_reason.h"
#include "config/config.h"
#include "policies/policy.h"

namespace pqxx {
class dbtransaction;
class failure;
class transaction_base;
}  // namespace pqxx

namespace coexist::pacing {
class Pacer;
}

namespace coexist::db {
struct Item;
class QueueStore;
using RecordKey = std::string;
}  // namespace coexist::db

namespace coexist::batch {

using db::Item;
struct EditLock;
struct Blocker;
struct RangeWalk;
class RunBudget;

// Shared by the workers of a run; the control thread reads a snapshot.
struct Counters {
  std::atomic<long long> claimed{0};
  std::atomic<long long> done{0};
  std::atomic<long long> deferred{0};
  std::atomic<long long> dead{0};
  std::atomic<long long> missing{0};
  std::atomic<long long> escalated{0};
  std::atomic<long long> revoked{0};
  std::atomic<long long> signalled{0};
  // Items failed on their first attempt since the last chunk that applied
  // one (batch.max_consecutive_failures).
  std::atomic<long long> failures_in_a_row{0};
  std::atomic<bool> failures_in_a_row_logged{false};

  void AddDeferral(const std::string& reason);
  // The newest failure's error, for the message when the run stops on them.
  void NoteFailure(const std::string& error);
  std::string LastFailure() const;
  RunCounts Snapshot() const;

 private:
  mutable std::mutex reasons_mutex_;
  std::map<std::string, long long> deferrals_by_reason_;
  std::string last_failure_;
};

// The target keys the run's workers hold in their open chunks. Two workers
// whose chunks share a key would otherwise see each other's row locks as an
// online user's and wait for (or defer) them; a key held by a sibling is
// instead left queued for a later chunk.
class KeysInFlight {
 public:
  // Takes the keys of `items` that no worker holds yet; returns the items
  // whose keys this worker now holds, at most one item per key.
  std::vector<Item> Take(int worker, const std::vector<Item>& items);
  void Release(int worker);
  // Blocks until some worker releases its keys, or `timeout`.
  void WaitForRelease(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable released_;
  std::map<db::RecordKey, int> holder_;  // key -> worker
  long long releases_ = 0;
};

// The run was marked abandoned by the next run while this one still worked
// (it had lost its control connection): nothing more may be completed.
// Exit status 75: the next run goes on with the items.
class RunFencedError : public TempFailError {
 public:
  explicit RunFencedError(const std::string& message)
      : TempFailError(message, "the next run picks up the items this one did not complete.") {}
};

// The database refuses the operation for a reason no item can help (a
// right revoked, a table or column gone: SQLSTATE classes 42, 3D, 3F, 28):
// the chunk rolls back, no item is charged an attempt, the run stops.
// Exit status 78: the deployment must be fixed.
class OperationRefusedError : public ConfigurationError {
 public:
  explicit OperationRefusedError(const std::string& database_error)
      : ConfigurationError(
            "the database refuses the operation for every item: " + database_error,
            "no item was charged an attempt. Grant the batch role what the operation needs "
            "(docs/operations.md, \"Database roles\") or restore what the error names, then run "
            "again.") {}
};

// What a chunk's COMMIT did when its outcome is unknown (db::FailureKind::
// kInDoubt), read back from the queue: committed when run `run_id`
// completed the chunk's `applied` items, rolled back when it completed none
// of them, unknown when the chunk applied nothing (its failures and
// deferrals leave no mark that tells). Throws std::logic_error when it
// completed some but not all: a chunk commits whole.
enum class ChunkCommit { kCommitted, kRolledBack, kUnknown };
ChunkCommit ReadChunkCommit(db::QueueStore& queue, pqxx::transaction_base& tx, long long run_id,
                            const std::vector<long long>& applied);

class Worker {
 public:
  // `pacer` sizes each chunk and holds the worker while the run is paused
  // or throttled (pacing/pacer.h); `budget` holds claims to the run's
  // budgets (batch/budget.h). Both are shared by the run's workers.
  Worker(int index, std::string conninfo, const config::Config& config,
         const policies::Policy& policy, long long run_id, Counters& counters,
         const std::atomic<bool>& stop, pacing::Pacer& pacer, KeysInFlight& keys,
         RunBudget& budget);
  ~Worker();

  // Runs until nothing is claimable, the policy stops claiming or `stop` is
  // set. Throws pqxx::broken_connection when the database goes away, and
  // whatever else it cannot handle; the chunk in flight then rolls back.
  void Run();
  // Why the worker stopped claiming: nullopt when the queue drained, else
  // kStopped (signal), kFailuresInARow, the policy's gate reason, pacing's
  // or a budget's (common/stop_reason.h).
  std::optional<StopReason> stop_reason() const { return stop_reason_; }
  // A range job's run: the worker first walks its share of `range`'s
  // segments, then, once every worker has, retries the exceptions through
  // the queue. Set before Run(); `range` outlives it.
  void SetRange(RangeWalk* range) { range_ = range; }

 private:
  struct Waiting {
    std::chrono::steady_clock::time_point first_seen;
    std::chrono::steady_clock::time_point due;
  };
  struct Outcome;  // what one chunk decided; worker.cpp

  // The next chunk's size, or nullopt with stop_reason_ set: stopped,
  // failing, refused by the policy's gate, stopped by pacing, or a budget
  // spent. Blocks while pacing or batch.max_rate holds claims back. A size
  // is the budget's: the chunk settles it (ChunkAllowance).
  std::optional<int> NextChunkSize();
  // The walk of range_'s segments; false when the run stops claiming.
  bool WalkRange();
  bool RunChunk(long long& after, int size);
  // batch.missing_rows: counts, reports and (skip, fail) settles the items
  // naming a key with no row in the target; returns the others.
  std::vector<Item> SettleMissing(pqxx::dbtransaction& tx, std::vector<Item> items, Outcome& out);
  // batch.max_consecutive_failures reached: true, logged once per run.
  bool TooManyFailuresInARow();
  // Every chunk transaction starts here: throws RunFencedError when the run
  // is no longer 'running' (0008_run_fencing.sql).
  void HoldRun(pqxx::dbtransaction& tx);
  [[noreturn]] void ThrowFenced() const;
  // What to do with each of a chunk's items: Outcome::apply, deferrals,
  // or waiting_ for a later chunk.
  void Decide(pqxx::dbtransaction& tx, const std::vector<Item>& items, Outcome& out);
  // First half: the items whose records no edit lock stops (none, or one
  // the policy revoked).
  std::vector<const Item*> DecideOnEditLocks(pqxx::dbtransaction& tx,
                                             const std::vector<Item>& items, Outcome& out);
  // Second half: the policy's decision from each record's row facts.
  void DecideOnRows(pqxx::dbtransaction& tx, const std::vector<const Item*>& candidates,
                    Outcome& out);
  // Edit locks taken while the chunk waited for rows, honoured too.
  void RecheckEditLocks(pqxx::dbtransaction& tx, Outcome& out);
  // What the policy does with `item`, whose records `locks` edit-lock (in
  // key order): true when it revoked them all and the item goes on;
  // otherwise the item waits (for a later chunk) or is deferred.
  bool OnEditLock(pqxx::dbtransaction& tx, const Item& item, const std::vector<EditLock>& locks,
                  Outcome& out);
  // Takes the rows of `going` again in key order, waiting for those held
  // elsewhere as `waits` (item id -> the policy's decision) says; the items
  // whose rows the chunk then holds go to Outcome::apply.
  void LockInKeyOrder(pqxx::dbtransaction& tx, const std::vector<const Item*>& going,
                      std::map<long long, policies::Decision>& waits,
                      const std::set<db::RecordKey>& held_elsewhere, Outcome& out);
  enum class RowWait { kLocked, kDeferred, kLater };
  RowWait WaitForRowLock(pqxx::dbtransaction& tx, const Item& item, const db::RecordKey& key,
                         policies::Decision& decision, Outcome& out);
  bool LockStep(pqxx::dbtransaction& tx, const db::RecordKey& key, std::chrono::milliseconds step,
                policies::RecordFacts& facts, std::vector<Blocker>& blockers);
  // Why a try of the operation failed: its error, and the reason an item
  // is deferred when the halves fail that way again ("" when the failure
  // is the items' own).
  struct ApplyFailure {
    std::string error;
    std::string transient;
  };
  // The whole chunk applied before any row is probed, when nothing is in
  // the way (docs/batch.md, "Nothing in the way"): true when it was; false
  // when the chunk takes the probing way instead, with `failed` set when
  // the try failed for a reason the probing way must not try again first.
  bool ApplyUnprobed(pqxx::dbtransaction& tx, const std::vector<Item>& items, Outcome& out,
                     std::optional<ApplyFailure>& failed);
  // Throws what stops the run; otherwise what the try's failure means.
  // Sets `timed_out` for a statement or lock timeout (the pacer shrinks
  // the next chunks).
  ApplyFailure JudgeFailure(const pqxx::failure& e, bool& timed_out) const;
  // `first_try`: the whole set's try already failed so (ApplyUnprobed).
  void ApplyScanning(pqxx::dbtransaction& tx, const std::vector<Item>& items, Outcome& out,
                     bool split_after_timeout = false,
                     const std::optional<ApplyFailure>& first_try = std::nullopt);
  void Finish(pqxx::dbtransaction& tx, Outcome& out);
  bool WaitForWaiting();
  std::chrono::milliseconds Waited(long long item_id) const;
  void StartWaiting(long long item_id, std::chrono::steady_clock::time_point due);
  void Publish(const Outcome& out);
  // The chunk's COMMIT failed in doubt (`error`): true when the queue shows
  // it committed, false when it rolled back or cannot tell (the chunk is then
  // not counted). Never applies anything again itself; rethrows `error` when
  // the worker's connection is gone or the queue cannot be read.
  bool CommittedInDoubt(const std::exception_ptr& error, const Outcome& out);

  int index_;
  std::string conninfo_;
  const config::Config& config_;
  const policies::Policy& policy_;
  long long run_id_;
  Counters& counters_;
  const std::atomic<bool>& stop_;
  pacing::Pacer& pacer_;
  KeysInFlight& keys_;
  RunBudget& budget_;
  RangeWalk* range_ = nullptr;
  std::optional<StopReason> stop_reason_;

  // Connections and what is prepared on them (libpqxx stays in worker.cpp).
  struct Db;
  std::unique_ptr<Db> db_;
  std::map<long long, Waiting> waiting_;
  // Chunks to go the probing way before the next unprobed try: set after a
  // row was in the way.
  int probe_first_chunks_ = 0;
};

}  // namespace coexist::batch
