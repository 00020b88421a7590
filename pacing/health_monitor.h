#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "config_core/target.h"
#include "pacing/load.h"
#include "schema/event_kind.h"

namespace coexist::pacing {

struct HealthMonitorOptions {
  std::string conninfo;  // never logged
  std::string application_name = "coexist-pacing";
  config::TargetTable target;  // vacuum signal; events.target
  std::string throttle_query;  // empty: none
  // Bounds every monitoring statement, so a stuck catalog read cannot hang
  // the batch between chunks.
  std::chrono::milliseconds statement_timeout{5000};
};

// Reads the health signals (load.h) from PostgreSQL on its own connection
// and records pacing events in coexist.events. The batch's own lock wait and
// statement latency are reported into it by the caller.
//
// Not thread-safe: one connection, used by one thread at a time (Pacer
// guards it). A lost connection is reopened on the next call.
class HealthMonitor {
 public:
  // Connects. Throws TempFailError when the server cannot be reached.
  explicit HealthMonitor(HealthMonitorOptions options);
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // Queries pg_stat_activity, pg_stat_replication, pg_stat_progress_vacuum
  // and the throttle_query now. Throws pqxx errors (and TempFailError when
  // reconnecting fails); a failing throttle_query is logged and reads as 1.
  Signals Read();

  // The batch's own figures from its last chunk; they show in the next Read().
  void ReportBatch(std::chrono::milliseconds lock_wait, std::chrono::milliseconds latency);

  // Inserts a row into coexist.events: kind, job, run_id (when known), the
  // target, actor 'pacing', details (a JSON object as text). Throws pqxx
  // errors.
  void RecordEvent(EventKind kind, const std::string& job, std::optional<long long> run_id,
                   const std::string& details_json);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace coexist::pacing
