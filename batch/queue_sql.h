#pragma once

// All of the batch's SQL in one place (pgBackRest's rule: no general-purpose
// query function). Statements are prepared once per connection under
// verb_noun names (claim_items, complete_items, ...); target-specific ones
// are built from validated, quote_name'd identifiers; data is always bound.
// Include only from batch/*.cpp: it brings in libpqxx.
//
// Thread safety: one QueueSql per connection, used by one thread.

#include <chrono>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "config/config.h"

namespace coexist::batch {

// One claimed queue item.
struct Item {
  long long item_id = 0;
  long long key = 0;
  std::string payload;  // jsonb as text
  int attempts = 0;
  int deferrals = 0;
};

struct EditLock {
  long long key = 0;
  std::string owner;
  std::chrono::milliseconds expires_in{0};
};

struct Deferral {
  long long item_id = 0;
  std::string reason;
  bool escalated = false;
};

struct Failure {
  long long item_id = 0;
  std::string error;
};

// The session holding a job's lock.
struct JobHolder {
  int pid = 0;
  long long run_id = 0;     // 0: not a coexist run (someone else took the lock)
  std::string description;  // who and since when, for the operator
  // Held longer than batch.busy_timeout: a foreign session connected that
  // long, or a run whose heartbeat is that old.
  bool stuck = false;
};

// A backend holding a lock the batch waits for, as seen while it waited.
struct Blocker {
  int pid = 0;
  std::string application_name;
  // May be signalled: a client backend of this database, not a superuser's,
  // not one of coexist's own (application_name starting with the batch's),
  // whose application_name matches the policy's online pattern.
  bool online = false;
  // Its identity when seen (timestamptz as text), re-checked in the very
  // statement that signals it: a pid reused by another session, or the same
  // session in a later transaction, is left alone.
  std::optional<std::string> backend_start;
  std::optional<std::string> xact_start;
  std::string state;  // active, idle in transaction, ...
};

// What SignalBlockers did: pg_cancel_backend'ed or pg_terminate_backend'ed.
struct Signalled {
  int cancelled = 0;
  int terminated = 0;
};

// A savepoint: rolled back when it goes out of scope un-released (also
// during exception unwinding), so one failed statement does not abort the
// chunk's transaction. Plain SQL savepoints; names are fixed identifiers.
class Savepoint {
 public:
  Savepoint(pqxx::transaction_base& tx, const char* name);
  ~Savepoint();
  Savepoint(const Savepoint&) = delete;
  Savepoint& operator=(const Savepoint&) = delete;
  void Release();

 private:
  pqxx::transaction_base& tx_;
  std::string name_;
  bool done_ = false;
};

// Builds a PostgreSQL array literal: {1,2,3} or {"a","b\"c",NULL}.
std::string ArrayLiteral(const std::vector<long long>& values);
std::string ArrayLiteral(const std::vector<std::optional<std::string>>& values);

// Whether some session holds `job`'s lock (0004_job_lock.sql), read from
// pg_locks without trying it: trying would make a run starting at this
// moment exit as busy. False while 0004 is not installed.
bool JobLockHeld(pqxx::transaction_base& tx, const std::string& job);

class QueueSql {
 public:
  // Prepares every statement on `conn`, which must outlive this object.
  QueueSql(pqxx::connection_base& conn, const config::Config& config);

  // The target as a regclass literal ("public.products", quoted as needed).
  const std::string& target() const { return target_; }

  // --- runs --------------------------------------------------------------
  long long StartRun(pqxx::transaction_base& tx, const std::string& policy,
                     const std::string& details_json);
  // Session-level: held by the control connection until it closes.
  void LockRun(pqxx::transaction_base& tx, long long run_id);
  // The job's lock for this session (0004_job_lock.sql); false when another
  // session holds it. Then FindJobHolder names it (nullopt: it let go since).
  bool TryLockJob(pqxx::transaction_base& tx);
  std::optional<JobHolder> FindJobHolder(pqxx::transaction_base& tx);
  // Holds the run's row (FOR KEY SHARE) for the rest of `tx`; false when
  // the run is no longer 'running' (marked abandoned: its control connection
  // died). Every chunk transaction starts with it (0008_run_fencing.sql).
  bool HoldRun(pqxx::transaction_base& tx, long long run_id);
  // Marks the job's running runs whose lock is free as abandoned, waiting for
  // their chunks in flight to end first. Call it holding the job's lock.
  std::vector<long long> AbandonStaleRuns(pqxx::transaction_base& tx);
  void HeartbeatRun(pqxx::transaction_base& tx, long long run_id, long long claimed, long long done,
                    long long deferred, long long dead);
  void FinishRun(pqxx::transaction_base& tx, long long run_id, const std::string& outcome,
                 long long claimed, long long done, long long deferred, long long dead,
                 const std::string& details_json);
  void AddEvent(pqxx::transaction_base& tx, const std::string& kind, long long run_id,
                const std::string& details_json);
  long long CountQueued(pqxx::transaction_base& tx);

  // --- items -------------------------------------------------------------
  // Up to `limit` claimable items with item_id > after, skipping items other
  // transactions hold (SKIP LOCKED), items this run deferred, the ids in
  // `exclude`, (untaken_only) items another worker has taken over, and items
  // behind an earlier pending item of their key (one item per key at a time,
  // in item_id order: 0007_queue_key_order.sql).
  std::vector<Item> ClaimItems(pqxx::transaction_base& tx, long long run_id, int limit,
                               long long after, const std::vector<long long>& exclude,
                               bool untaken_only);
  // Re-locks items this worker took over (status_partition's second step).
  std::vector<Item> RelockItems(pqxx::transaction_base& tx, const std::vector<long long>& ids);
  // Which of `ids` may still be claimed (pruning a worker's waiting list).
  std::vector<long long> StillClaimable(pqxx::transaction_base& tx, long long run_id,
                                        const std::vector<long long>& ids);
  void CompleteItems(pqxx::transaction_base& tx, long long run_id,
                     const std::vector<long long>& ids);
  // Attempts grow; an item at max_attempts becomes dead. Returns dead count.
  long long FailItems(pqxx::transaction_base& tx, long long run_id,
                      const std::vector<Failure>& failures);
  void DeferItems(pqxx::transaction_base& tx, long long run_id,
                  const std::vector<Deferral>& deferrals);

  // --- target records ----------------------------------------------------
  // Locks what can be locked (FOR UPDATE SKIP LOCKED); returns locked keys.
  std::vector<long long> LockRecords(pqxx::transaction_base& tx,
                                     const std::vector<long long>& keys);
  // Keys that exist in the target (a plain read; row locks do not block it).
  std::vector<long long> ExistingRecords(pqxx::transaction_base& tx,
                                         const std::vector<long long>& keys);
  // Keys whose owner column says 'batch'.
  std::vector<long long> BatchOwnedRecords(pqxx::transaction_base& tx,
                                           const std::vector<long long>& keys);
  // One row lock, waiting at most `step` (a savepoint + SET LOCAL
  // lock_timeout). False when the step ran out (55P03), true when locked.
  bool LockRecordStep(pqxx::transaction_base& tx, long long key, std::chrono::milliseconds step);
  std::vector<EditLock> LiveEditLocks(pqxx::transaction_base& tx,
                                      const std::vector<long long>& keys);
  // Revokes a live edit lock within a lock_timeout step. Returns the evicted
  // owner, "" when none was live, nullopt when an online save held the lock
  // row past the step.
  std::optional<std::string> RevokeEditLock(pqxx::transaction_base& tx, long long key,
                                            long long run_id, long long item_id,
                                            std::chrono::milliseconds step);
  // The backends blocking `pid` (asked from another connection while it
  // waits); those matching `online_pattern` (the policy's SignalPattern())
  // may be signalled.
  std::vector<Blocker> Blockers(pqxx::transaction_base& tx, int pid,
                                const std::string& online_pattern);
  // Cancels (or terminates) those of `blockers` that are still the session
  // and transaction seen and still may be signalled (Blocker::online), in
  // one statement with their `events` rows. An idle-in-transaction blocker
  // has no query to cancel: it is terminated. `batch_pid` is the waiting
  // worker's backend, never signalled. Run it in its own transaction (the
  // aux connection), so the audit stays when the chunk rolls back.
  Signalled SignalBlockers(pqxx::transaction_base& tx, const std::vector<Blocker>& blockers,
                           const std::string& online_pattern, bool terminate, long long run_id,
                           long long item_id, long long key, int batch_pid);
  // status_partition: owner := 'batch' + takeovers rows; and back.
  void TakeOver(pqxx::transaction_base& tx, long long run_id, const std::vector<Item>& items);
  void HandBack(pqxx::transaction_base& tx, const std::vector<Item>& items);
  // Hands back the target's rows that no running run holds any more (their
  // run was abandoned, failed or finished without handing back), whoever
  // killed it; returns how many. Marks this transaction as the batch's.
  long long HandBackOrphaned(pqxx::transaction_base& tx);

 private:
  pqxx::connection_base& conn_;
  const config::Config& config_;
  std::string target_;
  bool has_owner_ = false;
};

}  // namespace coexist::batch
