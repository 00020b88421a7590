#pragma once

// A batch worker's session: what its connection says to the server before
// the first chunk (the guard trigger's actor, statement_timeout,
// pacing.synchronous_commit) and its CPU priority (pacing.cpu_priority:
// the worker's own thread and its backend, through the prioritize
// extension). Only the batch's worker sessions: the run's control
// connection, the pacer's sampler and the daemon's control plane keep their
// priority, and the online sessions are never touched. docs/pacing.md,
// "Giving online the machine first".
//
// Thread safety: each function uses its own arguments only; SetUpWorkerSession
// runs on the worker's thread (it renices the calling thread).

#include <string>

#include "config/config.h"

namespace pqxx {
class connection_base;
}

namespace coexist::db {
class QueueStore;
}

namespace coexist::batch {

// The session settings of a worker's main connection, then
// LowerBackendPriority and the calling thread's nice value (Linux nice
// values are per thread). Throws pqxx errors from the settings only: a
// priority that cannot be lowered is logged and the run goes on.
void SetUpWorkerSession(pqxx::connection_base& conn, const config::Config& config, int worker);

// Lowers the backend of `conn` to pacing.cpu_priority when the prioritize
// extension is installed; without it (batch::CheckDatabase warned, and
// RecordPriorityUnavailable recorded it) or with cpu_priority normal, does
// nothing. Never throws for the priority itself (a refusal is logged);
// throws pqxx::broken_connection when the connection is gone.
void LowerBackendPriority(pqxx::connection_base& conn, const config::Config& config, int worker);

// Once per run, on the control connection (with none open): when
// pacing.cpu_priority is set and this database lacks the prioritize
// extension, records a cpu_priority_unavailable event with the fix. The
// warning itself is CheckDatabase's, logged when the run checks its
// configuration.
void RecordPriorityUnavailable(pqxx::connection_base& conn, db::QueueStore& queue,
                               const config::Config& config, long long run_id);

// One line for `db install` and `config check --database`: whether the
// prioritize extension is installed (or available, and how to install it).
std::string DescribePrioritize(pqxx::connection_base& conn, const config::Config& config);

}  // namespace coexist::batch
