#pragma once

// The prioritize extension (Debian package postgresql-15-prioritize):
// whether a database has it, and a backend lowering its own CPU priority
// through it (`set_backend_priority(pg_backend_pid(), n)`). A role that is
// not superuser may renice only its own backends, and no role may raise a
// backend's priority again (PostgreSQL runs as an unprivileged user), so
// coexist only ever renices the backend of the connection it holds, down.
//
// Thread safety: uses the given connection or transaction only.

#include <optional>
#include <string>

namespace pqxx {
class connection_base;
class transaction_base;
}  // namespace pqxx

namespace coexist::db {

struct Prioritize {
  bool available = false;             // the server has the extension's files
  std::optional<std::string> schema;  // installed in this database, in this schema
};

// Reads pg_available_extensions and pg_extension. Throws pqxx errors.
Prioritize ReadPrioritize(pqxx::transaction_base& tx);

// How to get the extension, for a hint: the package when the server lacks
// it, then CREATE EXTENSION.
std::string PrioritizeFix(const Prioritize& state);

// The simulator's scratch database: creates the extension when the server
// has its files and the database lacks it, so that a cell's
// pacing.cpu_priority is measured as it would run where the operator
// installed it. Returns the state afterwards; a refusal (not a superuser)
// is the caller's to report: pqxx::sql_error.
Prioritize CreatePrioritizeIfAvailable(pqxx::connection_base& conn);

// Sets the connection's own backend to nice `nice` (1..19) through the
// extension installed in `schema`, in a transaction of its own (`conn` must
// have none open); a backend already at `nice` or lower priority is left
// alone. Returns the backend's nice value afterwards. Throws pqxx errors
// (42501: the role may not use the extension's schema or function).
int LowerOwnBackendPriority(pqxx::connection_base& conn, const std::string& schema, int nice);

}  // namespace coexist::db
