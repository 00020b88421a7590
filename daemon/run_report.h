#pragma once

// What a finished (or failed) batch run reports to Prometheus: the bridge
// from batch::RunSummary to metrics::RunMetrics, shared by `batch run` and
// `batch daemon`.
//
// Thread safety: plain functions; WriteRunTextfile writes one file, so call
// it from one thread per path.

#include <chrono>

#include "batch/runner.h"
#include "config/config.h"
#include "metrics/run_metrics.h"

namespace coexist::daemon {

// The run's metrics; `succeeded` unless its outcome is "failed".
metrics::RunMetrics MetricsOf(const batch::RunSummary& summary);

// A run that ended with an error and no summary: job and policy from the
// configuration, succeeded = false, every count 0.
metrics::RunMetrics FailedRunMetrics(const config::Config& config, double seconds);

// Writes config.metrics.textfile when it is set (a no-op otherwise). Throws
// coexist::Error (EX_CANTCREAT) when the file cannot be written.
void WriteRunTextfile(const config::Config& config, const metrics::RunMetrics& run);

// The same, logging a failure instead of throwing: where the run's own
// error, or the daemon's next run, matters more than the file.
void WriteRunTextfileOrWarn(const config::Config& config, const metrics::RunMetrics& run);

}  // namespace coexist::daemon
