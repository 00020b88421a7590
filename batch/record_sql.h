#pragma once

// The batch's SQL on the target's records, edit locks, blockers and
// takeovers in one place (pgBackRest's rule: no general-purpose query
// function); the queue's and the runs' is the queue store's
// (schema/queue_store.h). Statements are prepared once per connection under
// verb_noun names (lock_records, find_edit_locks, ...); target-specific ones
// are built from validated, quote_name'd identifiers; data is always bound.
// Include only from batch/*.cpp: it brings in libpqxx.
//
// Thread safety: one RecordSql per connection, used by one thread.

#include <chrono>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "db/array_literal.h"
#include "policies/policy.h"
#include "schema/queue_store.h"

namespace coexist::batch {

// The queue's types, from the queue store (schema/queue_store.h).
using db::ArrayLiteral;
using db::Deferral;
using db::Failure;
using db::Item;
using db::JobHolder;
using db::RecordKey;

struct EditLock {
  RecordKey key;
  std::string owner;
  std::chrono::milliseconds expires_in{0};
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
  // Undoes what was done since, row locks taken included, now.
  void Rollback();

 private:
  pqxx::transaction_base& tx_;
  std::string name_;
  bool done_ = false;
};

// What a run knows about the target's rows of some keys before its policy
// decides: which it could lock now, which another transaction holds, which
// the batch owns (status_partition). The worker and the dry run both
// gather it here, so a dry run decides on the facts a run would see.
struct RowFacts {
  std::set<RecordKey> locked;          // locked by `lock_tx` (FOR UPDATE SKIP LOCKED)
  std::set<RecordKey> row_locked;      // existing rows another transaction holds
  std::set<RecordKey> owned_by_batch;  // of `locked`, those the owner column gives the batch
};

// What a policy is told about an item's records (Item::keys), an item
// being one unit: row-locked when another transaction holds any of them,
// the batch's when the owner column gives the batch every one of them.
policies::RecordFacts ItemFacts(const Item& item, const RowFacts& rows);

// The queue store's view of `config`'s job; `target` as RecordSql::target().
db::QueueJob QueueJobOf(const config::Config& config, const std::string& target);

class RecordSql {
 public:
  // Prepares every statement on `conn`, which must outlive this object.
  RecordSql(pqxx::connection_base& conn, const config::Config& config);

  // The target as a regclass literal ("public.products", quoted as needed).
  const std::string& target() const { return target_; }
  // Its key column's type ("bigint", "uuid", ...): db::KeyTypeOf.
  const std::string& key_type() const { return key_type_; }

  // --- target records ----------------------------------------------------
  // Locks what can be locked (FOR UPDATE SKIP LOCKED); returns locked keys.
  std::vector<RecordKey> LockRecords(pqxx::transaction_base& tx,
                                     const std::vector<RecordKey>& keys);
  // Keys that exist in the target, in the key column's order (a plain
  // read; row locks do not block it).
  std::vector<RecordKey> ExistingRecords(pqxx::transaction_base& tx,
                                         const std::vector<RecordKey>& keys);
  // Keys whose owner column says 'batch'.
  std::vector<RecordKey> BatchOwnedRecords(pqxx::transaction_base& tx,
                                           const std::vector<RecordKey>& keys);
  // One row lock, waiting at most `step` (a savepoint + SET LOCAL
  // lock_timeout). False when the step ran out (55P03), true when locked.
  bool LockRecordStep(pqxx::transaction_base& tx, const RecordKey& key,
                      std::chrono::milliseconds step);
  std::vector<EditLock> LiveEditLocks(pqxx::transaction_base& tx,
                                      const std::vector<RecordKey>& keys);
  // Revokes a live edit lock within a lock_timeout step. Returns the evicted
  // owner, "" when none was live, nullopt when an online save held the lock
  // row past the step.
  std::optional<std::string> RevokeEditLock(pqxx::transaction_base& tx, const RecordKey& key,
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
                           long long item_id, const RecordKey& key, int batch_pid);
  // status_partition: owner := 'batch' + takeovers rows; and back.
  void TakeOver(pqxx::transaction_base& tx, long long run_id, const std::vector<Item>& items);
  void HandBack(pqxx::transaction_base& tx, const std::vector<Item>& items);
  // --- range jobs (batch.range) ------------------------------------------
  // A range chunk's keys: at most `limit` keys above `after` (up to `upper`,
  // inclusive; nullopt: no bound) whose rows match batch.range.where, in key
  // order, read without locks; and those of them this transaction locked
  // (FOR UPDATE SKIP LOCKED, the condition checked again on the locked row
  // version). One statement.
  struct RangeChunk {
    std::vector<RecordKey> keys;
    std::vector<RecordKey> locked;
  };
  RangeChunk ReadRangeChunk(pqxx::transaction_base& tx, const std::optional<RecordKey>& after,
                            const std::optional<RecordKey>& upper, int limit);
  // The walk's fast path: the same keys, read and locked in one statement
  // (FOR UPDATE NOWAIT), when no other transaction holds any of their rows.
  // nullopt when one does (55P03): `tx` is then aborted, and the chunk is
  // read again with ReadRangeChunk in a new transaction.
  std::optional<std::vector<RecordKey>> LockFreeRangeChunk(pqxx::transaction_base& tx,
                                                           const std::optional<RecordKey>& after,
                                                           const std::optional<RecordKey>& upper,
                                                           int limit);
  // Those of `keys` whose rows match batch.range.where now (a plain read).
  std::vector<RecordKey> MatchingRecords(pqxx::transaction_base& tx,
                                         const std::vector<RecordKey>& keys);
  // At most `parts - 1` distinct keys, ascending, that split the matching
  // rows into `parts` runs of about equal size (one sort of their keys),
  // and how many rows match.
  struct RangeSplit {
    std::vector<RecordKey> bounds;
    long long rows = 0;
  };
  RangeSplit RangeBounds(pqxx::transaction_base& tx, int parts);

  // Hands back the records of orphaned takeovers (the keys
  // QueueStore::DeleteOrphanedTakeovers returned), whoever killed their run;
  // returns how many. Marks this transaction as the batch's.
  long long HandBackOrphaned(pqxx::transaction_base& tx, const std::vector<RecordKey>& keys);

 private:
  // The range statements, on a range job's connections only.
  void PrepareRange(pqxx::connection_base& conn, const std::string& table, const std::string& key);

  pqxx::connection_base& conn_;
  const config::Config& config_;
  std::string target_;
  std::string key_type_;  // the key column's type, for casting the text keys back
  bool has_owner_ = false;
};

// Locks what it can of `keys` in `lock_tx` (a run's chunk; the dry run's
// probe, rolled back), reads the rest in `read_tx` (may be `lock_tx`).
// `owner` only when the policy takes rows over. A key missing from the
// target is in no set: nobody locks it; the operation decides what it means.
RowFacts GatherFacts(RecordSql& lock_sql, pqxx::transaction_base& lock_tx, RecordSql& read_sql,
                     pqxx::transaction_base& read_tx, const std::vector<RecordKey>& keys,
                     bool owner);

}  // namespace coexist::batch
