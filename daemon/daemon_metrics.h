#pragma once

// The daemon's cumulative Prometheus metrics, across all its runs, served on
// GET /metrics (prometheus-cpp's civetweb Exposer) when metrics.listen is
// set. docs/operations.md lists the names. prometheus-cpp stays in the .cpp.
//
// Thread safety: the recording calls may come from any thread; the HTTP
// server reads the counters on its own threads.

#include <memory>
#include <string>

#include "batch/runner.h"
#include "config/config.h"

namespace coexist::daemon {

class DaemonMetrics {
 public:
  // Starts serving /metrics on `metrics.listen` (host:port, validated by
  // config/) when it is not empty; with metrics.dashboard, the live
  // dashboard of the database at `conninfo` on the same port
  // (dashboard/server.h). Throws coexist::Error (EX_UNAVAILABLE) when the
  // address cannot be bound, ConfigurationError (78) when the dashboard's
  // token file cannot be read.
  DaemonMetrics(const std::string& job, const config::MetricsConfig& metrics,
                const std::string& conninfo);
  ~DaemonMetrics();
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // The port the endpoint listens on (useful with port 0); 0 when off.
  int port() const;

  void RecordRun(const batch::RunSummary& summary);
  // outcome: failed (an error ended the run) or busy (another run held the job).
  void RecordRunWithoutSummary(const std::string& outcome);
  void SetConnected(bool connected);
  void SetQueued(long long queued);
  void RecordReload(bool ok);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace coexist::daemon
