#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "config_core/target.h"

namespace pqxx {
class connection_base;
class transaction_base;
}  // namespace pqxx

namespace coexist::db {

// What coexist asks about the target, in one place: the status, the
// installers and the simulator read the same answers.

// Whether the target table exists (a plain regclass lookup in `tx`).
bool TargetExists(pqxx::transaction_base& tx, const config::TargetTable& target);

// What the catalog says about the target, for the start-up check
// (batch/check.h): read in `tx`, nothing written. Columns the table lacks
// read as empty types; everything else is false or empty when the table
// does not exist.
struct TargetFacts {
  bool exists = false;
  // pg_class.relkind: 'r' table, 'p' partitioned table, 'v' view, 'm'
  // materialized view, 'f' foreign table, ...
  char kind = 0;
  // schema.table as PostgreSQL writes it (quote_ident: quoted only when
  // needed), for messages and the SQL of hints.
  std::string qualified;
  std::string key_sql, version_sql;  // the key and version column names, likewise
  std::string owner_sql;             // the owner column's (empty when none is configured)
  std::string role;                  // current_user
  // format_type of the configured columns; empty when the table lacks one
  // (or none is configured, for the owner).
  std::string key_type, version_type, owner_type;
  // A primary key or a unique index (no predicate, no expression) on the
  // key column alone; on a partitioned table, the parent's.
  bool key_unique = false;
  bool has_primary_key = false;  // on any columns
  // The key column is one column of a unique index of several (a composite
  // key such as (film_id, store_id)).
  bool key_in_composite_unique = false;
  // A partitioned table's partition key columns, quoted; empty for one
  // partitioned by an expression, and for other tables. A unique index on
  // a partitioned table must include them all.
  std::vector<std::string> partition_key;
  int partitions = 0;             // a partitioned table's partitions, at every level
  bool may_select = false;        // SELECT on the key and version columns
  bool may_update = false;        // UPDATE on some column: row locks, the operation
  bool may_update_owner = false;  // UPDATE on the owner column (when configured)
  bool may_signal = false;        // a superuser or a member of pg_signal_backend
  // The target's own triggers that are not coexist's (coexist_bump_version,
  // coexist_guard) nor internal (foreign keys): "name (BEFORE UPDATE)".
  std::vector<std::string> user_triggers;
};

TargetFacts ReadTargetFacts(pqxx::transaction_base& tx, const config::TargetTable& target);

// `ALTER TABLE <qualified> ADD COLUMN <version> bigint NOT NULL DEFAULT 0`:
// instant on PostgreSQL 11+ (no table rewrite), but it takes an ACCESS
// EXCLUSIVE lock, briefly.
std::string AddVersionColumnSql(const std::string& qualified, const std::string& version_column);

// `ALTER TABLE <qualified> ADD COLUMN <owner> text NOT NULL DEFAULT
// 'online'`: the owner column a policy that takes rows over needs
// (docs/configuration.md), instant like the version column's.
std::string AddOwnerColumnSql(const std::string& qualified, const std::string& owner_column);

// How DDL on an application's table waits for its lock: never longer than
// lock_timeout at a time, so online writes that queue behind the waiting
// lock wait at most that long; then again after a doubling backoff.
struct LockAttempts {
  std::chrono::milliseconds lock_timeout{2000};  // of each attempt
  int attempts = 4;
  std::chrono::milliseconds first_backoff{250};  // doubling between attempts
};
using AddColumnAttempts = LockAttempts;

// Runs `statements` in a transaction of its own under `how.lock_timeout`,
// again after a backoff while it fails on a lock (55P03) or is a deadlock's
// victim (40P01). Throws
// TempFailError (75) after the last attempt, naming `what` and `table` and
// how to find the holder, with nothing changed; other errors as they come.
// `conn` must have no transaction open.
void WithLockAttempts(pqxx::connection_base& conn, const std::string& what,
                      const std::string& table, const LockAttempts& how,
                      const std::function<void(pqxx::transaction_base&)>& statements);

// Adds the version column (AddVersionColumnSql) when the target lacks it;
// false when it was already there. Each attempt runs under `lock_timeout`,
// so a long online transaction makes it give up instead of queueing an
// ACCESS EXCLUSIVE lock that would block every other session behind it;
// it tries again after a doubling backoff. Throws TempFailError (75) when
// every attempt timed out, with nothing changed; pqxx errors for the rest.
// `conn` must have no transaction open.
bool AddVersionColumn(pqxx::connection_base& conn, const config::TargetTable& target,
                      const AddColumnAttempts& how = {});

// The key column's type as format_type spells it ("bigint", "uuid",
// "text", "character varying"), for casts in statements; throws
// ConfigurationError naming the table and column when either is missing.
// Adds the configured owner column (AddOwnerColumnSql) when the target has
// one configured and lacks it, as AddVersionColumn does.
bool AddOwnerColumn(pqxx::connection_base& conn, const config::TargetTable& target,
                    const LockAttempts& how = {});

std::string KeyTypeOf(pqxx::transaction_base& tx, const config::TargetTable& target);

// Type names as format_type spells them: the integer types (a key that
// enqueue checks as an integer; the version column's), and every type a
// key may have (coexist keeps it as text in the type's canonical form, 0017).
bool IsIntegerType(const std::string& type);
bool IsSupportedKeyType(const std::string& type);

enum class VersionTrigger {
  kMissing,   // no trigger named coexist_bump_version on the target (or no target)
  kOutdated,  // one is there, calling a function of the naming before 0009
  kCurrent,   // one is there, calling this schema's bump function for the target
};

// The target's version trigger, read in `tx`. Needs the coexist schema for
// kCurrent (before migration 0009 every trigger reads as kOutdated).
VersionTrigger VersionTriggerOf(pqxx::transaction_base& tx, const config::TargetTable& target);

// Installs (or re-installs) the version trigger on the target: every UPDATE
// bumps the version column, whoever writes. Needs the coexist schema.
// Creating the trigger locks the table (SHARE ROW EXCLUSIVE): taken under
// `how` (WithLockAttempts). Throws pqxx::sql_error when the table or
// column is missing or the version column is not an integer.
void InstallVersionTrigger(pqxx::connection_base& conn, const config::TargetTable& target,
                           const LockAttempts& how = {});

}  // namespace coexist::db
