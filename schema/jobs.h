#pragma once

// `coexist jobs`: every job the database knows, with its progress across
// its runs, hosts and shards of this database (the queue's items by state,
// the running runs' rate, an ETA, a range job's segments) and its pause.
//
// Errors are libpqxx's, uncaught (42P01 when the coexist schema is older
// than 0032, 42501 without SELECT on coexist's tables). Thread safety: a
// plain function; a connection is used by one thread at a time.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "schema/job_pauses.h"

namespace pqxx {
class connection_base;
class transaction_base;
}  // namespace pqxx

namespace coexist::db {

// One job the database knows.
struct JobRow {
  std::string job;
  long long running_runs = 0;
  // The job's items in coexist.queue by state (a range job's are its
  // exceptions). Done items leave after retention (docs/operations.md).
  long long queued = 0, deferred = 0, done = 0, dead = 0;
  // Cancelled by an operator (`coexist items cancel`): never run, not done,
  // and not among the items a job's progress counts.
  long long cancelled = 0;
  // The running runs together: items done since each started, and the
  // seconds since the first of them started.
  long long running_done = 0;
  double running_seconds = 0;
  // The highest online latency ratio a running run's objective measured
  // (pacing.online_latency); nullopt when none measures one.
  std::optional<double> online_latency_ratio;
  // The strictest pacing.online_latency.objective of the running runs;
  // nullopt when none has one.
  std::optional<double> online_latency_objective;
  // The running runs by their pacer's state as their heartbeats wrote it
  // (Pacer::PacingJson: running, throttled, paused, hibernating,
  // critical_pending, stopping; "starting" before the first heartbeat).
  std::map<std::string, long long> runs_by_pacing_state;
  // The lowest duty cycle a running run's latency objective has set
  // (1: full speed); nullopt when none runs paced.
  std::optional<double> pacing_duty;
  // A range job's segments (coexist.range_checkpoints) and the rows applied.
  long long range_segments = 0, range_finished = 0, range_applied = 0;
  // The rows its pass expected when it started (0035), and those walked
  // so far: applied or sent to the queue as exceptions.
  long long range_expected = 0, range_walked = 0;
  std::optional<JobPause> pause;  // nullopt: not paused

  // Items a second of the running runs together; nullopt when none runs or
  // none has done an item yet.
  std::optional<double> Rate() const;
  // Seconds until the queued and deferred items, and a range pass's rows
  // not walked yet (expected - walked), are done at Rate(); nullopt
  // without a rate.
  std::optional<double> EtaSeconds() const;
};

// Every job named by a queue item, a done chunk, a run, a range checkpoint
// or a pause,
// by name, in one read-only transaction.
std::vector<JobRow> ListJobs(pqxx::connection_base& conn);

// Whether anything of coexist names `job` (the tables ListJobs lists jobs
// from): pausing or acting on a misspelt job would change nothing and, for
// a pause, leave a row no run ever reads.
bool JobKnown(pqxx::transaction_base& tx, const std::string& job);

}  // namespace coexist::db
