#pragma once

// The edit-lock commands of operators: `coexist locks list`, `locks release`,
// `locks sweep` (docs/operations.md, "Repair without SQL"). The API that
// online applications call is SQL (schema/migrations/0002, 0003, 0010;
// docs/database-api.md).
//
// Every function that takes a connection runs its own transaction on it and
// commits it before returning, so `conn` must have no transaction open
// (libpqxx throws pqxx::usage_error otherwise). Errors are libpqxx's,
// uncaught: pqxx::broken_connection when the server goes away,
// pqxx::sql_error when the database refuses a statement (42P01 when the
// coexist schema is not installed, 42501 when the role lacks a right on
// coexist.edit_locks or coexist.events), pqxx::in_doubt_error when the
// connection breaks during a commit. A statement that fails changes nothing.
//
// Thread safety: plain functions; a connection is used by one thread at a
// time, as libpqxx requires.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "schema/edit_locks.h"

namespace pqxx {
class connection_base;
}

namespace coexist::admin {

// One edit lock, as `coexist locks list` shows it.
using EditLockRow = db::EditLockRow;

// The live edit locks, or every lock (expired ones too) with
// `include_expired`, oldest first (acquired_at, then target and key), in one
// read-only transaction. An empty vector: no such locks.
std::vector<EditLockRow> ListEditLocks(pqxx::connection_base& conn, bool include_expired);

// What `coexist locks release` releases. Set exactly one selector (the CLI
// checks that): target with record_key (one record's lock), owner (every
// lock of an owner: session timeout), or older_than (locks acquired longer
// ago than this). Selectors are alternatives: with several set, a lock that
// matches any of them goes; with none set (or a target without its
// record_key), nothing does.
struct ReleaseSelector {
  // A table name resolved like a regclass in SQL (search_path applies): a
  // table that does not exist makes the statement fail (42P01).
  std::optional<std::string> target;
  std::optional<std::string> record_key;  // any spelling of the key's type
  std::optional<std::string> owner;
  std::optional<std::chrono::milliseconds> older_than;
};

// Releases the matching locks, live or expired, in one transaction of its
// own, through coexist.admin_release_edit_locks (the one audited release,
// which admin_release_edit_lock calls too): it deletes them, writes one
// coexist.events row
// per released lock (kind edit_lock_released_by_admin, actor = `actor`,
// subject = the lock's owner, details.token and details.acquired_at), and
// NOTIFYs coexist_edit_lock_released 'TARGET:KEY' for each, delivered at
// commit, so a batch waiting for the lock (online_priority) moves on. The
// owner's next renew_edit_lock or check_edit_lock then fails with CX002.
// Returns the released locks, oldest first; empty when none matched
// (nothing is written then).
std::vector<EditLockRow> ReleaseEditLocks(pqxx::connection_base& conn,
                                          const ReleaseSelector& selector,
                                          const std::string& actor);

// Deletes every expired lock in one transaction of its own, auditing each
// (kind edit_lock_expired, actor = `actor`, subject = the owner,
// details.token and details.expires_at). Expired locks count as free
// already, so this only keeps the table small and the audit complete; it
// sends no NOTIFY. Returns how many were swept (0: none had expired).
long long SweepExpiredEditLocks(pqxx::connection_base& conn, const std::string& actor);

// "admin:<user>@<host>", the actor recorded for commands a person runs: the
// effective user's name (its uid when it has no passwd entry) and this
// host's name. Touches no database.
std::string CurrentActor();

}  // namespace coexist::admin
