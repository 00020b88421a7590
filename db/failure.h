#pragma once

// How coexist judges a failure, in one place and in the order libpqxx's own
// perform() tests it: the connection lost, a commit in doubt, a transaction
// worth trying again, the server's trouble, the configuration's fault, the
// item's fault, a bug. The daemon (retry or not), the worker (charge an
// item or stop the run), the CLI's exit status and the latency probe all
// ask Classify. Only the item's fault may charge an item an attempt: a
// systemic failure charged to items would kill every item of the queue in
// a few chunks (the chaos suite's privileges_revoked fault).
//
// Thread safety: pure functions.

#include <exception>
#include <string>

#include "common/exit_codes.h"

namespace pqxx {
class sql_error;
}

namespace coexist::db {

enum class FailureKind {
  // pqxx::broken_connection, SQLSTATE class 08, 57P0x (the session was
  // terminated, the server is shutting down or starting): reconnect, try
  // again later. Also coexist's TempFailError (the server cannot be reached),
  // and libpqxx's too_many_connections (53300), which is a broken_connection.
  kConnectionLost,
  // pqxx::in_doubt_error (the connection broke during COMMIT) and
  // pqxx::statement_completion_unknown (40003, which libpqxx derives from
  // transaction_rollback): whether the work committed is unknown. Never
  // retried blindly: what committed is read back first (the batch worker
  // asks the queue store which of the chunk's items its run completed).
  kInDoubt,
  // pqxx::transaction_rollback (40001 serialization, 40P01 deadlock), 55P03
  // lock_not_available (NOWAIT, lock_timeout), 57014 query_canceled
  // (statement_timeout): the same work may pass when tried again, smaller or
  // later.
  kRetryable,
  // Classes 53 (out of disk, memory, connections), 57 (other than the
  // above), 58, XX, and 25006 (a read-only server: a standby, or a primary
  // during failover): the server's; passes later, nobody's data is at fault.
  kServer,
  // Classes 42 (undefined table 42P01 or column 42703, syntax 42601,
  // privileges 42501), 3D, 3F, 28, 0L, 0P; coexist's ConfigurationError and config::ConfigError (a
  // malformed URL, a missing target): the deployment must change.
  kConfiguration,
  // Any other SQLSTATE (data exceptions, constraint violations, RAISE): the
  // item's own data.
  kItem,
  // Anything else: a bug.
  kBug,
};

FailureKind Classify(const std::exception& e);

// The sysexits status of a failure that escapes a command: 75 (try again
// later) for the first four kinds, 78 for the configuration's, 70 otherwise.
ExitCode ExitCodeOf(FailureKind kind);

// The SQLSTATE of `e`. libpqxx 6.4 drops it for insufficient_privilege; it
// is recovered from the type. (Its transaction_rollback family and
// too_many_connections, a broken_connection, are not sql_errors.)
std::string SqlStateOf(const pqxx::sql_error& e);

}  // namespace coexist::db
