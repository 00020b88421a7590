#pragma once

#include <atomic>
#include <chrono>
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

// How old a row must be to go: a done item since done_at, an event since
// `at`, a finished run since ended_at. Zero keeps that kind.
struct PurgeAges {
  std::chrono::milliseconds done_items{0};
  std::chrono::milliseconds events{0};
  std::chrono::milliseconds runs{0};
};

struct PurgeCounts {
  long long done_items = 0;
  long long events = 0;
  long long runs = 0;
};

// Rows one purge statement deletes at most.
inline constexpr int kPurgeBatchRows = 5000;

// `coexist queue purge` and the daemon's retention: deletes done items,
// events and finished runs older than their age, kPurgeBatchRows a
// statement, each statement its own transaction that skips rows another
// session has locked, so it never holds locks for long nor waits behind a
// batch. Never touches queued, deferred or dead items, nor a running run.
// When anything went, writes one events row (kind queue_purged, actor, the
// counts). Checks `stop` between statements. Returns what it deleted.
PurgeCounts PurgeOldRows(pqxx::connection_base& conn, const PurgeAges& ages,
                         const std::string& actor, const std::atomic<bool>* stop = nullptr);

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
