#include "schema/jobs.h"

#include <algorithm>
#include <pqxx/pqxx>
#include <unordered_map>

namespace coexist::db {

std::optional<double> JobRow::Rate() const {
  if (running_runs == 0 || running_done == 0 || running_seconds <= 0) return std::nullopt;
  return static_cast<double>(running_done) / running_seconds;
}

std::optional<double> JobRow::EtaSeconds() const {
  auto rate = Rate();
  if (!rate) return std::nullopt;
  long long range_left =
      range_finished < range_segments ? std::max(0LL, range_expected - range_walked) : 0;
  return static_cast<double>(queued + deferred + range_left) / *rate;
}

bool JobKnown(pqxx::transaction_base& tx, const std::string& job) {
  return tx
      .exec_params1(
          "SELECT EXISTS (SELECT 1 FROM coexist.queue WHERE job = $1)"
          "    OR EXISTS (SELECT 1 FROM coexist.done_chunks WHERE job = $1)"
          "    OR EXISTS (SELECT 1 FROM coexist.runs WHERE job = $1)"
          "    OR EXISTS (SELECT 1 FROM coexist.range_checkpoints WHERE job = $1)"
          "    OR EXISTS (SELECT 1 FROM coexist.job_pauses WHERE job = $1)",
          job)[0]
      .as<bool>();
}

std::vector<JobRow> ListJobs(pqxx::connection_base& conn) {
  pqxx::read_transaction tx(conn);
  std::vector<JobRow> out;
  for (const auto& r : tx.exec(R"sql(
      WITH jobs AS (
        SELECT DISTINCT job FROM coexist.queue
        UNION SELECT job FROM coexist.runs
        UNION SELECT job FROM coexist.range_checkpoints
        UNION SELECT job FROM coexist.job_pauses
        UNION SELECT job FROM coexist.done_chunks),
      -- A done item leaves the queue for its chunk's row (0029).
      items AS (
        SELECT job, sum(queued) AS queued, sum(deferred) AS deferred, sum(done) AS done,
               sum(dead) AS dead, sum(cancelled) AS cancelled
          FROM (SELECT job, count(*) FILTER (WHERE state = 'queued') AS queued,
                       count(*) FILTER (WHERE state = 'deferred') AS deferred,
                       count(*) FILTER (WHERE state = 'done') AS done,
                       count(*) FILTER (WHERE state = 'dead') AS dead,
                       count(*) FILTER (WHERE state = 'cancelled') AS cancelled
                  FROM coexist.queue GROUP BY job
                UNION ALL
                SELECT job, 0, 0, sum(cardinality(item_ids)), 0, 0
                  FROM coexist.done_chunks GROUP BY job) counts
         GROUP BY job),
      running AS (
        SELECT job, count(*) AS runs, sum(done) AS done,
               extract(epoch FROM clock_timestamp() - min(started_at))::float8 AS seconds,
               max((details->>'online_latency_ratio')::float8) AS latency_ratio,
               min((details->>'online_latency_objective')::float8) AS latency_objective,
               min((details->'pacing'->'online_latency'->>'duty')::float8) AS duty
          FROM coexist.runs WHERE outcome = 'running' GROUP BY job),
      segments AS (
        SELECT job, count(*) AS segments, count(*) FILTER (WHERE finished) AS finished,
               sum(applied) AS applied, sum(expected) AS expected,
               sum(applied + exceptions) AS walked
          FROM coexist.range_checkpoints GROUP BY job)
      SELECT j.job, coalesce(ru.runs, 0), coalesce(i.queued, 0)::bigint,
             coalesce(i.deferred, 0)::bigint, coalesce(i.done, 0)::bigint,
             coalesce(i.dead, 0)::bigint, coalesce(ru.done, 0)::bigint,
             coalesce(ru.seconds, 0), coalesce(s.segments, 0), coalesce(s.finished, 0),
             coalesce(s.applied, 0)::bigint, ru.latency_ratio, coalesce(i.cancelled, 0)::bigint,
             ru.latency_objective, ru.duty, coalesce(s.expected, 0)::bigint,
             coalesce(s.walked, 0)::bigint,
             )sql" + std::string(kJobPauseColumns) +
                               R"sql(
        FROM jobs j
        LEFT JOIN items i ON i.job = j.job
        LEFT JOIN running ru ON ru.job = j.job
        LEFT JOIN segments s ON s.job = j.job
        LEFT JOIN coexist.job_pauses p ON p.job = j.job
       ORDER BY j.job)sql")) {
    out.push_back({.job = r[0].as<std::string>(),
                   .running_runs = r[1].as<long long>(),
                   .queued = r[2].as<long long>(),
                   .deferred = r[3].as<long long>(),
                   .done = r[4].as<long long>(),
                   .dead = r[5].as<long long>(),
                   .running_done = r[6].as<long long>(),
                   .running_seconds = r[7].as<double>(),
                   .range_segments = r[8].as<long long>(),
                   .range_finished = r[9].as<long long>(),
                   .range_applied = r[10].as<long long>(),
                   .pause = PauseFrom(r, 17)});
    out.back().cancelled = r[12].as<long long>();
    if (!r[11].is_null()) out.back().online_latency_ratio = r[11].as<double>();
    if (!r[13].is_null()) out.back().online_latency_objective = r[13].as<double>();
    if (!r[14].is_null()) out.back().pacing_duty = r[14].as<double>();
    out.back().range_expected = r[15].as<long long>();
    out.back().range_walked = r[16].as<long long>();
  }
  // The running runs by their pacers' states (the heartbeat's details.pacing).
  // `out` is in the database's collation order: found by name, not bisected.
  std::unordered_map<std::string, JobRow*> by_name;
  for (auto& job : out) by_name[job.job] = &job;
  for (const auto& r : tx.exec(R"sql(
      SELECT job, coalesce(details->'pacing'->>'state', 'starting'), count(*)
        FROM coexist.runs WHERE outcome = 'running' GROUP BY 1, 2)sql")) {
    if (auto job = by_name.find(r[0].as<std::string>()); job != by_name.end()) {
      job->second->runs_by_pacing_state[r[1].as<std::string>()] = r[2].as<long long>();
    }
  }
  tx.commit();
  return out;
}

}  // namespace coexist::db
