#include "schema/job_pauses.h"

#include <pqxx/pqxx>

#include "schema/jobs.h"

namespace coexist::db {

PauseChange PauseJob(pqxx::connection_base& conn, const std::string& job, const std::string& actor,
                     const std::string& reason) {
  pqxx::work tx(conn);
  if (!JobKnown(tx, job)) return PauseChange::kUnknownJob;
  bool paused =
      tx.exec_params1("SELECT coexist.pause_job($1, $2, $3)", job, actor, reason)[0].as<bool>();
  tx.commit();
  return paused ? PauseChange::kChanged : PauseChange::kUnchanged;
}

PauseChange ResumeJob(pqxx::connection_base& conn, const std::string& job,
                      const std::string& actor) {
  pqxx::work tx(conn);
  if (!JobKnown(tx, job)) return PauseChange::kUnknownJob;
  bool resumed = tx.exec_params1("SELECT coexist.resume_job($1, $2)", job, actor)[0].as<bool>();
  tx.commit();
  return resumed ? PauseChange::kChanged : PauseChange::kUnchanged;
}

std::optional<JobPause> PauseFrom(const pqxx::row& r, int first) {
  if (!r[first].as<bool>()) return std::nullopt;
  return JobPause{.by = r[first + 1].as<std::string>(),
                  .reason = r[first + 2].as<std::string>(),
                  .db_user = r[first + 3].as<std::string>(),
                  .since = r[first + 4].as<std::string>()};
}

}  // namespace coexist::db
