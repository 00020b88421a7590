#include "schema/job_pauses.h"

#include <pqxx/pqxx>

namespace coexist::db {

namespace {

// A job is known when anything of coexist names it; pausing a misspelt job
// would hold nothing and leave a row no run ever reads.
bool JobKnown(pqxx::transaction_base& tx, const std::string& job) {
  return tx
      .exec_params1(
          "SELECT EXISTS (SELECT 1 FROM coexist.queue WHERE job = $1)"
          "    OR EXISTS (SELECT 1 FROM coexist.runs WHERE job = $1)"
          "    OR EXISTS (SELECT 1 FROM coexist.range_checkpoints WHERE job = $1)"
          "    OR EXISTS (SELECT 1 FROM coexist.job_pauses WHERE job = $1)",
          job)[0]
      .as<bool>();
}

}  // namespace

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

std::vector<JobRow> ListJobs(pqxx::connection_base& conn) {
  pqxx::read_transaction tx(conn);
  std::vector<JobRow> out;
  for (const auto& r : tx.exec(R"sql(
      WITH jobs AS (
        SELECT DISTINCT job FROM coexist.queue
        UNION SELECT job FROM coexist.runs
        UNION SELECT job FROM coexist.range_checkpoints
        UNION SELECT job FROM coexist.job_pauses)
      SELECT j.job,
             (SELECT count(*) FROM coexist.runs r WHERE r.job = j.job AND r.outcome = 'running'),
             p.job IS NOT NULL, p.paused_by, p.reason, p.db_user,
             to_char(p.paused_at, 'YYYY-MM-DD HH24:MI:SSOF')
        FROM jobs j LEFT JOIN coexist.job_pauses p ON p.job = j.job
       ORDER BY j.job)sql")) {
    JobRow row{.job = r[0].as<std::string>(), .running_runs = r[1].as<long long>()};
    if (r[2].as<bool>()) {
      row.pause = JobPause{.by = r[3].as<std::string>(),
                           .reason = r[4].as<std::string>(),
                           .db_user = r[5].as<std::string>(),
                           .since = r[6].as<std::string>()};
    }
    out.push_back(std::move(row));
  }
  tx.commit();
  return out;
}

}  // namespace coexist::db
