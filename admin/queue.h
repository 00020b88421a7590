#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pqxx {
class connection_base;
}

namespace coexist::admin {

struct JobQueueStatus {
  std::string job;
  std::map<std::string, long long> by_state;    // queued, deferred, done, dead (zeros included)
  std::optional<double> oldest_queued_seconds;  // age of the oldest queued or deferred item
  std::map<std::string, long long> defer_reasons;
};

struct DeadError {
  std::string job;
  std::string error;
  long long items = 0;
};

struct QueueStatus {
  std::vector<JobQueueStatus> jobs;
  std::vector<DeadError> top_dead_errors;  // most frequent first, at most 10
};

// `coexist queue status`: for one job, or all jobs when `job` is empty.
QueueStatus ReadQueueStatus(pqxx::connection_base& conn, const std::string& job);

// `coexist queue retry --dead`: dead items of the job (all jobs when empty)
// go back to queued with attempts reset and their last error kept, one
// events row (kind items_retried) recording how many and who. Returns how many.
long long RetryDeadItems(pqxx::connection_base& conn, const std::string& job,
                         const std::string& actor);

struct RunRow {
  long long run_id = 0;
  std::string job, policy, host;
  int pid = 0;
  std::string started_at, ended_at, outcome;
  long long claimed = 0, done = 0, deferred = 0, dead = 0;
  double seconds = 0;
};

// `coexist runs list`: newest first.
std::vector<RunRow> ListRuns(pqxx::connection_base& conn, const std::string& job, int limit);

struct RunDetail {
  RunRow run;
  std::string details_json;
  std::map<std::string, long long> events_by_kind;
};

// `coexist runs show ID`; nullopt when there is no such run.
std::optional<RunDetail> ShowRun(pqxx::connection_base& conn, long long run_id);

}  // namespace coexist::admin
