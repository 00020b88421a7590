#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace pqxx {
class connection_base;
}

namespace coexist::admin {

// One row of `coexist locks list`.
struct EditLockRow {
  std::string target;
  long long record_key = 0;
  std::string owner;
  std::string acquired_at;
  std::string expires_at;
  double held_seconds = 0;
  bool expired = false;
};

std::vector<EditLockRow> ListEditLocks(pqxx::connection_base& conn, bool include_expired);

// What `coexist locks release` releases: exactly one selector is set.
struct ReleaseSelector {
  std::optional<std::string> target;  // with record_key
  std::optional<long long> record_key;
  std::optional<std::string> owner;
  std::optional<std::chrono::milliseconds> older_than;  // held (since acquired) longer than this
};

// Releases the matching locks in one statement, and writes one events row
// (kind edit_lock_released_by_admin, actor = `actor`, subject = the owner,
// details.token) per released lock, in the same transaction; NOTIFYs
// coexist_edit_lock_released for each so waiting batches move on.
// Returns the released locks.
std::vector<EditLockRow> ReleaseEditLocks(pqxx::connection_base& conn,
                                          const ReleaseSelector& selector,
                                          const std::string& actor);

// Deletes expired locks (they count as free already; this keeps the table
// small and the audit complete), auditing each as edit_lock_expired.
// Returns how many were swept.
long long SweepExpiredEditLocks(pqxx::connection_base& conn, const std::string& actor);

// "admin:<user>@<host>", the actor recorded for commands run by a person.
std::string CurrentActor();

}  // namespace coexist::admin
