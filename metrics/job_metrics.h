#pragma once

// Every job's progress as Prometheus metrics: what `coexist jobs` prints,
// as `coexist jobs --prometheus` (or `--textfile PATH`, for node_exporter's
// textfile collector, written every 30 s by deploy/systemd's
// coexist-jobs-metrics.timer). Read from the database, so one writer sees
// every run of a job on every host. docs/operations.md lists the names.

#include <chrono>
#include <string>
#include <vector>

#include "schema/jobs.h"

namespace coexist::metrics {

// The exposition text (Prometheus text format 0.0.4) for `jobs`, read at
// `read_at`:
//   coexist_job_items{job,state}            queued, deferred, done, dead, cancelled
//   coexist_job_running_runs{job}
//   coexist_job_paused{job}                 1 while `coexist jobs pause` holds it
//   coexist_job_items_per_second{job}       the running runs together; absent without a rate
//   coexist_job_eta_seconds{job}            queued and deferred at that rate; absent without
//   coexist_job_online_latency_ratio{job}   a paced running run's, absent when none measures
//   coexist_job_online_latency_objective{job}  the strictest objective of the running runs
//   coexist_job_runs_by_pacing_state{job,state}  running runs by their pacer's state
//   coexist_job_pacing_duty{job}            the lowest duty a latency objective set; absent unpaced
//   coexist_job_range_segments{job,state}   a range job's: finished, all
//   coexist_job_range_rows_applied{job}
//   coexist_job_range_rows{job,state}      the pass's rows: expected, walked
//   coexist_jobs_read_timestamp_seconds     when the database was read
std::string JobsExposition(const std::vector<db::JobRow>& jobs,
                           std::chrono::system_clock::time_point read_at);

}  // namespace coexist::metrics
