#pragma once

// A plain record with no dependencies (the queue store reads it; the run's
// summary and its metrics carry it).

#include <chrono>

namespace coexist::db {

// The runs of a job that worked alongside one run: every run of the job
// whose span overlaps the run's own (a running run's span lasts until now,
// an abandoned one's until its last heartbeat), the run included. Read from
// the runs table as the run ends. An exclusive run is alone; shared runs
// (batch.runs: shared) report the job's figures this way: the summary, its
// JSON and the metrics textfile (docs/operations.md, "Metrics").
struct RunsTogether {
  long long runs = 0;
  long long running = 0;  // still running when the run ended
  long long failed = 0;   // failed or abandoned
  // As their runs rows say: a running run's counts are its last heartbeat's.
  long long done = 0;
  long long deferred = 0;
  long long dead = 0;
  double seconds = 0;  // from the first start to the last end (or now)
  // When they were read, by the database's clock: the job's runs end one
  // at a time (0024), so this orders their ends on every host alike.
  std::chrono::system_clock::time_point read_at;
};

}  // namespace coexist::db
