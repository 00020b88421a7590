#pragma once

// The statements coexist's C++ runs on coexist.edit_locks and
// coexist.takeovers: operators' list, release and sweep (admin/edit_locks.h),
// the batch's look-up of live locks and its takeovers (status_partition).
// The API that online applications call is SQL (schema/functions/, e.g.
// acquire_edit_lock.sql; docs/database-api.md).
//
// Each runs in the caller's transaction; the batch's after
// PrepareBatchStatements on its connection. Errors are libpqxx's, uncaught
// (42P01 when coexist is not installed, 42501 when the role lacks a right).
//
// Thread safety: plain functions; a transaction is used by one thread.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace pqxx {
class connection_base;
class transaction_base;
}  // namespace pqxx

namespace coexist::db {

// One edit lock, as `coexist locks list` shows it.
struct EditLockRow {
  std::string target;      // the table as regclass text: "products", "sales.orders"
  std::string record_key;  // canonical text form of the key
  std::string owner;
  // "YYYY-MM-DD HH:MI:SS+TZ" in the session's time zone.
  std::string acquired_at;
  std::string expires_at;
  // Since acquired_at, which a re-acquire by the owner of a live lock keeps.
  double held_seconds = 0;
  bool expired = false;  // expired locks count as free already
};

// The live edit locks, or every lock with `include_expired`, oldest first
// (acquired_at, then target and key).
std::vector<EditLockRow> ReadEditLocks(pqxx::transaction_base& tx, bool include_expired);

// Releases the locks that match any of the selectors set, through
// coexist.admin_release_edit_locks (the one audited release); returns them,
// oldest first.
std::vector<EditLockRow> ReleaseEditLocks(pqxx::transaction_base& tx,
                                          const std::optional<std::string>& target,
                                          const std::optional<std::string>& record_key,
                                          const std::optional<std::string>& owner,
                                          std::optional<std::chrono::milliseconds> older_than,
                                          const std::string& actor);

// Deletes every expired lock with one edit_lock_expired event each (actor
// `actor`, subject the owner); returns how many.
long long DeleteExpiredEditLocks(pqxx::transaction_base& tx, const std::string& actor);

// Prepares on `conn` the statements ReadLiveEditLocks, InsertTakeovers and
// DeleteTakeovers run (a batch worker's connection runs them every chunk).
void PrepareBatchStatements(pqxx::connection_base& conn);

// A live edit lock on one of the batch's records.
struct LiveEditLock {
  std::string record_key;
  std::string owner;
  std::chrono::milliseconds expires_in{0};
};

// The live locks on `keys` (canonical text) of `target` (a regclass literal).
std::vector<LiveEditLock> ReadLiveEditLocks(pqxx::transaction_base& tx, const std::string& target,
                                            const std::vector<std::string>& keys);

// status_partition's record of the rows a run took over: one takeovers row
// per (item, key) pair, and their removal when the items' rows go back.
void InsertTakeovers(pqxx::transaction_base& tx, long long run_id,
                     const std::vector<long long>& item_ids, const std::vector<std::string>& keys,
                     const std::string& target);
void DeleteTakeovers(pqxx::transaction_base& tx, const std::vector<long long>& item_ids);

// Whether a run that ended abnormally still holds rows of `target` (a
// regclass literal) taken over.
bool HasTakeovers(pqxx::transaction_base& tx, const std::string& target);

}  // namespace coexist::db
