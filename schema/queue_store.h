#pragma once

// The queue store: every statement coexist's C++ runs on coexist.queue and
// coexist.runs is in this module, so the queue's rules (claim order per
// key, who may charge an attempt, how a run is fenced) are read in one
// place. This header holds what a run, enqueue, the dry run and the daemon
// do; queue_store_ops.h what operators and reports read and repair. A ctest
// (schema_fence_test) fails when SQL outside schema/ names those tables.
//
// Statements of a run are prepared once per connection under verb_noun
// names; data is always bound. Errors are libpqxx's, uncaught:
// pqxx::broken_connection when the server goes away, pqxx::sql_error when
// the database refuses a statement (42P01 when coexist is not installed,
// 42501 when the role lacks a right), pqxx::transaction_rollback (40001,
// 40P01) when the server rolls the transaction back.
//
// Thread safety: one QueueStore per connection, used by one thread; the
// free functions use only the transaction they are given.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "schema/event_kind.h"
#include "schema/job_pauses.h"
#include "schema/runs_together.h"

namespace pqxx {
class connection_base;
class transaction_base;
}  // namespace pqxx

namespace coexist::db {

// A target record's key, of whatever type the key column has, in that
// type's canonical text form (what `key::text` prints): statements cast it
// back with the column's type (db::KeyTypeOf).
using RecordKey = std::string;

// One claimed queue item.
struct Item {
  long long item_id = 0;
  RecordKey key;        // its lead record: keys[0]
  std::string payload;  // jsonb as text; "" where only the ids were read
  int attempts = 0;
  int deferrals = 0;
  // Every record the item names, distinct, in the key column's order (the
  // order the batch locks them in); {key} for an item of one key.
  std::vector<RecordKey> keys;
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
  // Held longer than busy_timeout: a foreign session connected that long,
  // or a run whose heartbeat is that old.
  bool stuck = false;
};

// The job a QueueStore works for, from its configuration.
struct QueueJob {
  std::string job;
  int max_attempts = 1;                       // an item at this many attempts is dead
  std::chrono::milliseconds defer_delay{0};   // a deferred item's not_before, from now
  std::chrono::milliseconds busy_timeout{0};  // JobHolder::stuck beyond it
  std::string target;                         // the target as a regclass literal, for events
  int max_timeouts = 1;      // an item deferred for a timeout this many times is dead
  bool shared_runs = false;  // batch.runs: shared: the job's lock is taken shared
};

// A run's statements on the queue and the runs table, for one job.
class QueueStore {
 public:
  // Prepares every statement on `conn`, which must outlive this object.
  QueueStore(pqxx::connection_base& conn, QueueJob job);

  // --- runs --------------------------------------------------------------
  // A 'running' row for this process; returns its run_id.
  long long StartRun(pqxx::transaction_base& tx, const std::string& policy,
                     const std::string& details_json);
  // The run's lock, session-level: held by the control connection until it
  // closes. Tried, never waited for: false when another session holds the
  // key (nothing of coexist does before the run's row commits: a squatter).
  bool TryLockRun(pqxx::transaction_base& tx, long long run_id);
  // The session holding the run's key, as FindJobHolder describes one that
  // is not a run (nullopt: it let go since).
  std::optional<JobHolder> FindRunLockHolder(pqxx::transaction_base& tx, long long run_id);
  // The job's lock for this session (0004_job_lock.sql), taken shared under
  // QueueJob::shared_runs (0021: shared runs hold it side by side, never
  // beside an exclusive holder); false when another session's hold excludes
  // it. Then FindJobHolder names one (nullopt: it let go since).
  bool TryLockJob(pqxx::transaction_base& tx);
  std::optional<JobHolder> FindJobHolder(pqxx::transaction_base& tx);
  // Holds the run's row for the rest of `tx`; false when the run is no
  // longer 'running' (marked abandoned: its control connection died). Every
  // chunk transaction starts with it (0008_run_fencing.sql).
  bool HoldRun(pqxx::transaction_base& tx, long long run_id);
  // Marks the job's running runs whose lock is free as abandoned, waiting for
  // their chunks in flight to end first. Call it holding the job's lock.
  std::vector<long long> AbandonStaleRuns(pqxx::transaction_base& tx);
  // What a heartbeat reads back for the run.
  struct Heartbeat {
    // Who asked the job's runs to stop (`coexist ctl --job J stop`, 0022:
    // the actor, "unknown" when the request names none) once the run's row
    // holds such a request; nullopt until then.
    std::optional<std::string> stop_by;
    // The job's pause (`coexist jobs pause J`, 0032); nullopt: not paused.
    std::optional<JobPause> pause;
  };
  // Refreshes the run's heartbeat and counts, and reads its stop request and
  // its job's pause. `online_latency_ratio` (pacing.online_latency's
  // percentile over its baseline, nullopt while none is measured) and
  // `pacing_json` (Pacer::PacingJson; "" for none) are kept in the runs
  // row's details for `coexist jobs` and the dashboard; FinishRun drops the
  // pacing state, which describes a live run only.
  Heartbeat HeartbeatRun(pqxx::transaction_base& tx, long long run_id, long long claimed,
                         long long done, long long deferred, long long dead,
                         std::optional<double> online_latency_ratio = std::nullopt,
                         const std::string& pacing_json = "");
  void FinishRun(pqxx::transaction_base& tx, long long run_id, const std::string& outcome,
                 long long claimed, long long done, long long deferred, long long dead,
                 const std::string& details_json);
  // The job's runs whose span overlaps the (finished) run's own, the run
  // included (schema/runs_together.h).
  RunsTogether ReadRunsTogether(pqxx::transaction_base& tx, long long run_id);
  void AddEvent(pqxx::transaction_base& tx, EventKind kind, long long run_id,
                const std::string& details_json);
  long long CountQueued(pqxx::transaction_base& tx);
  // Deletes the target's takeovers that no running run holds any more (their
  // run was abandoned, failed or finished without handing back); returns
  // their record keys, for the caller to hand back.
  std::vector<RecordKey> DeleteOrphanedTakeovers(pqxx::transaction_base& tx);

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
  // Which of `ids` run `run_id` completed (kept in the queue, marked done,
  // or gone to its done chunks), in id order: after a COMMIT whose outcome
  // is unknown, whether the chunk that completed them committed.
  std::vector<long long> DoneByRun(pqxx::transaction_base& tx, long long run_id,
                                   const std::vector<long long>& ids);
  // Deletes the items' rows: not how a run settles items (their rows stay,
  // done), but batch_bench's measure of a completion that keeps no row per
  // item (docs/batch.md, "One worker against a set-based UPDATE").
  void DeleteItems(pqxx::transaction_base& tx, const std::vector<long long>& ids);
  // Attempts grow; an item at max_attempts becomes dead (with an item_dead
  // event), at once with `dead_now`. Only for failures that are the item's
  // own. Returns dead count.
  long long FailItems(pqxx::transaction_base& tx, long long run_id,
                      const std::vector<Failure>& failures, bool dead_now = false);
  // Deferred until now + defer_delay, with item_deferred (and
  // item_escalated) events; attempts unchanged. A deferral for reason
  // "timeout" adds one to the item's timeouts; at max_timeouts the item is
  // dead instead (last_error says so, an item_dead event). Returns the ids
  // of the items that died.
  std::vector<long long> DeferItems(pqxx::transaction_base& tx, long long run_id,
                                    const std::vector<Deferral>& deferrals);

 private:
  QueueJob job_;
};

// Whether coexist's queue is installed in this database.
bool QueueInstalled(pqxx::transaction_base& tx);

// Whether some session holds `job`'s lock (0004_job_lock.sql), read from
// pg_locks without trying it: trying would make a run starting at this
// moment exit as busy. `exclusive_only`: only an exclusive hold counts (the
// one that stops a shared run, 0021). False while 0004 is not installed.
bool JobLockHeld(pqxx::transaction_base& tx, const std::string& job, bool exclusive_only = false);

// Up to `limit` items of `job` a run could claim now, with item_id > after,
// in claim order (as ClaimItems, without locking or skipping anything);
// payloads are not read. For the dry run.
std::vector<Item> ClaimableItems(pqxx::transaction_base& tx, const std::string& job,
                                 long long after, int limit);

// Items of `job` a run could claim now, by state (the daemon's wake-up test).
struct ClaimableCounts {
  long long queued = 0;
  long long deferred = 0;
};
ClaimableCounts CountClaimable(pqxx::transaction_base& tx, const std::string& job);

// What an enqueue statement did: the rows it was given, how many it added
// and, with a `missing_sql` predicate, how many of the added items it
// holds for (with the first few of their keys, "k" or "k1,k2").
struct Inserted {
  long long rows = 0;
  long long added = 0;
  long long missing = 0;
  std::vector<std::string> missing_keys;
};

// Enqueues one item per element of `keys`, each cast to `key_type` (the
// target key column's type, from KeyTypeOf; 22P02 when one is not a value
// of it) and stored in its canonical text form (`payloads` and `idempotency_keys` as
// long as `keys`; a missing payload is {}); an item whose idempotency key
// the job already has is skipped. An element of `keys` with more than one
// key is an item of several records (Item::keys): its keys are made
// distinct and sorted in the key type's order. `missing_sql`: "" or a
// boolean SQL expression over an added item's canonical keys `ks` (text[]),
// counted in Inserted::missing (the caller's test for keys with no row).
Inserted InsertItems(pqxx::transaction_base& tx, const std::string& job,
                     const std::string& key_type, const std::vector<std::vector<RecordKey>>& keys,
                     const std::vector<std::optional<std::string>>& payloads,
                     const std::vector<std::optional<std::string>>& idempotency_keys,
                     const std::string& missing_sql = "");

// The SQL expression of the distinct, sorted canonical keys of `keys_expr`
// (an array expression of any element type) as text[]: an item's keys.
std::string SortedKeysSql(const std::string& keys_expr, const std::string& key_type);

// Whether the job's queue holds a pending (queued or deferred) item: a
// pass then leaves those items' keys to the queue (db::PendingKeys).
bool HasPendingItems(pqxx::transaction_base& tx, const std::string& job);

// Those of `keys` (one-key items) that the job's queue holds a pending
// (queued or deferred) item of: a range job's walk leaves them to the queue.
std::vector<RecordKey> PendingKeys(pqxx::transaction_base& tx, const std::string& job,
                                   const std::vector<RecordKey>& keys);

// Enqueues the rows of `source`, a SELECT returning the columns ks (text[],
// SortedKeysSql's), p (jsonb) and ik (text), as InsertItems does.
using SelectedInsert = Inserted;
Inserted InsertSelected(pqxx::transaction_base& tx, const std::string& job,
                        const std::string& source, const std::string& missing_sql = "");

}  // namespace coexist::db
