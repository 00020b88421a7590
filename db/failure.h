#pragma once

// How coexist judges a statement the database refused: the item's fault
// (its data), a timeout, the deployment's fault (no statement of this
// shape can run: a right revoked, an object missing) or the server's (out
// of resources, shutting down). Only the item's fault may charge an item an
// attempt: a systemic failure charged to items would kill every item of the
// queue in a few chunks (the chaos suite's privileges_revoked fault).

#include <string>

namespace pqxx {
class sql_error;
}

namespace coexist::db {

enum class StatementFault {
  kItem,        // data or constraint errors, RAISE, anything not below
  kTimeout,     // statement_timeout, lock_timeout, NOWAIT, a cancel (57014, 55P03)
  kDeployment,  // classes 42 (privileges, missing tables/columns/functions, syntax),
                // 3D, 3F (missing database, schema), 28 (authorization), 0L, 0P
  kServer,      // classes 53 (resources), 57 but 57014 (shutdown, terminated),
                // 58 (system), XX (internal)
};

// The SQLSTATE of `e`. libpqxx 6.4 drops it for some of its subclasses
// (insufficient_privilege, too_many_connections); it is recovered from
// their type. (Its transaction_rollback family is not an sql_error.)
std::string SqlStateOf(const pqxx::sql_error& e);

StatementFault JudgeStatement(const std::string& sqlstate);

}  // namespace coexist::db
