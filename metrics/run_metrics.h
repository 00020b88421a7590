#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "batch/run_counts.h"
#include "common/stop_reason.h"
#include "pacing/latency_summary.h"
#include "schema/runs_together.h"

namespace coexist::metrics {

// What one batch run reports to Prometheus (docs/operations.md lists the
// metric names). Filled by the batch runner at the end of every run.
struct RunMetrics {
  std::string job;
  std::string policy;
  bool succeeded = false;  // the run worked (items may still be deferred or dead)
  std::chrono::system_clock::time_point finished_at = std::chrono::system_clock::now();
  double seconds = 0;
  batch::RunCounts counts;
  long long queued_left = 0;
  // Why the run stopped claiming; absent when it failed or is not one run
  // (a sharded run's shards each have theirs).
  std::optional<StopReason> stop_reason;
  // pacing.online_latency; absent when it is not configured.
  std::optional<pacing::LatencySummary> latency;
  // The job's runs that worked alongside this one (shared runs); absent when
  // the run could not read them (it failed).
  std::optional<db::RunsTogether> together;
};

// The exposition text (Prometheus text format 0.0.4) for one run.
// `last_success` is the time of the newest successful run of the job,
// which a failed run carries over from the previous file.
std::string Exposition(const RunMetrics& run, std::chrono::system_clock::time_point last_success);

// Writes the run's metrics for node_exporter's textfile collector, in one
// step (metrics/textfile.h: ReplaceFile). When this run failed, the
// last-success timestamp of the previous file is kept. Processes on one host that write one
// file (shared runs of a job) take turns (flock on the folder), and a file whose run ended later
// is left alone: returns false then, true when written. Throws coexist::Error (EX_CANTCREAT) when
// the file cannot be written.
bool WriteTextfile(const std::filesystem::path& path, const RunMetrics& run);

}  // namespace coexist::metrics
