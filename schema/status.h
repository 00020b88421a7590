#pragma once

// `coexist db status` (and the demo's closing report): what is installed,
// the target, the queue. Reads only: installs nothing, writes nothing.
//
// Thread safety: a plain function; a connection is used by one thread at a
// time, as libpqxx requires.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/target_table.h"
#include "schema/migrations.h"

namespace pqxx {
class connection_base;
}

namespace coexist::db {

// What `coexist db status` reports: the schema, the target, the queue.
struct Status {
  std::string server_version;  // the server's `SHOW server_version`
  // The highest migration recorded in coexist.schema_migrations; 0: coexist
  // is not installed (then `migrations` and `queue_by_state` are empty and
  // the counts below 0).
  int installed_version = 0;
  int latest_version = 0;                    // the newest migration this binary carries
  std::vector<AppliedMigration> migrations;  // in version order
  std::string target;                        // "schema.table", for display
  // count(*) of the target; nullopt: the table does not exist.
  std::optional<long long> target_rows;
  // A trigger named coexist_bump_version is on the target (whichever
  // function it calls); false when the table does not exist.
  bool version_trigger = false;
  // Items of every job by state: queued, deferred, done, dead (zeros
  // included) once coexist is installed.
  std::map<std::string, long long> queue_by_state;
  long long live_edit_locks = 0;     // all targets; expired ones count as free
  long long expired_edit_locks = 0;  // not yet swept (`coexist locks sweep`)
  long long runs = 0;                // runs recorded, of every job
};

// Reads the status through `conn` in read-only transactions of its own, one
// after the other (the migrations first, then the rest), so `conn` must
// have no transaction open (libpqxx throws pqxx::usage_error otherwise).
// `target` may name a table that does not exist. Counting the target's rows
// reads the whole table, which takes a while on a large one (it blocks no
// writer). Throws pqxx::broken_connection when the server goes away and
// pqxx::sql_error when the database refuses a read (42501: the role may not
// read the target or coexist's tables).
Status ReadStatus(pqxx::connection_base& conn, const config::TargetTable& target);

}  // namespace coexist::db
