#pragma once

// A job-wide pause kept in the database (coexist.job_pauses, 0032):
// `coexist jobs pause J` / `jobs resume J`, and `coexist jobs`. Every
// running run of the job reads the pause in its heartbeat
// (QueueStore::HeartbeatRun) and holds its workers after the chunk in hand
// (pacing's throttle reason job_paused); a run that starts while its job is
// paused holds from its start. `coexist jobs` lists them (schema/jobs.h).
//
// Each function uses `conn` for one transaction of its own, so `conn` must
// have none open. Errors are libpqxx's, uncaught: pqxx::sql_error when the
// database refuses a statement (42P01 when the coexist schema is older than
// 0032, 42501 when the role lacks a right on coexist.job_pauses or events).
//
// Thread safety: plain functions; a connection is used by one thread at a
// time, as libpqxx requires.

#include <optional>
#include <string>
#include <vector>

namespace pqxx {
class connection_base;
class row;
}  // namespace pqxx

namespace coexist::db {

// A paused job's row.
struct JobPause {
  std::string by;      // the actor who paused it (OS user and host)
  std::string reason;  // why, as the operator gave it
  std::string db_user;
  std::string since;  // paused_at, "YYYY-MM-DD HH:MI:SS+TZ"
};

// The columns a JobPause is read from, for a LEFT JOIN of
// coexist.job_pauses as `p`: the heartbeat and `coexist jobs` read it with
// their own rows. PauseFrom reads them back from `first` on.
inline constexpr const char* kJobPauseColumns =
    "p.job IS NOT NULL, p.paused_by, p.reason, p.db_user, "
    "to_char(p.paused_at, 'YYYY-MM-DD HH24:MI:SSOF')";
std::optional<JobPause> PauseFrom(const pqxx::row& row, int first);

enum class PauseChange {
  kChanged,     // paused (resumed) now, with its event
  kUnchanged,   // it was paused (not paused) already: nothing written
  kUnknownJob,  // no queue item, run, range checkpoint or pause names the job: nothing written
};

// `coexist jobs pause`: pauses `job` with one job_paused event (actor,
// details: reason, db_user), in one transaction (0032's pause_job).
// `reason` must not be empty (the table refuses it: 23514).
PauseChange PauseJob(pqxx::connection_base& conn, const std::string& job, const std::string& actor,
                     const std::string& reason);

// `coexist jobs resume`: deletes the job's pause with one job_resumed event
// (0032's resume_job). Every run of the job goes on within a heartbeat.
PauseChange ResumeJob(pqxx::connection_base& conn, const std::string& job,
                      const std::string& actor);

}  // namespace coexist::db
