#include "daemon/run_report.h"

#include <spdlog/spdlog.h>

#include "common/log.h"

namespace coexist::daemon {

metrics::RunMetrics MetricsOf(const batch::RunSummary& summary) {
  metrics::RunMetrics run;
  run.job = summary.job;
  run.policy = summary.policy;
  run.succeeded = summary.outcome != "failed";
  run.finished_at = std::chrono::system_clock::now();
  run.seconds = summary.seconds;
  run.counts = summary.counts;
  run.queued_left = summary.queued_left;
  run.stop_reason = summary.stop_reason;
  run.latency = summary.latency;
  run.together = summary.together;
  // The database's clock orders the ends of a job's shared runs on every
  // host alike; the textfile keeps the newest (metrics/run_metrics.h).
  if (summary.together) run.finished_at = summary.together->read_at;
  return run;
}

metrics::RunMetrics FailedRunMetrics(const config::Config& config, double seconds) {
  metrics::RunMetrics run;
  run.job = config.batch.job;
  run.policy = config.policy.name;
  run.succeeded = false;
  run.finished_at = std::chrono::system_clock::now();
  run.seconds = seconds;
  return run;
}

void WriteRunTextfile(const config::Config& config, const metrics::RunMetrics& run) {
  if (config.metrics.textfile.empty()) return;
  if (!metrics::WriteTextfile(config.metrics.textfile, run)) {
    spdlog::info("metrics textfile left alone: a run of the job that ended later wrote it path={}",
                 config.metrics.textfile);
  }
}

void WriteRunTextfileOrWarn(const config::Config& config, const metrics::RunMetrics& run) {
  try {
    WriteRunTextfile(config, run);
  } catch (const std::exception& e) {
    spdlog::warn("metrics textfile not written path={} error={}", config.metrics.textfile,
                 log::Value(e.what()));
  }
}

}  // namespace coexist::daemon
