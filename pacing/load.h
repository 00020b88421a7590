#pragma once

// The load definition: the health signals pacing reads, and how they are
// compared with `pacing.max_load` / `pacing.critical_load`.
//
// Each signal is compared with its own threshold; a signal "trips" when its
// value reaches (>=) its threshold, and a threshold of 0 turns the check off.
// The load is too high when any signal trips; the throttle's reason names
// every signal that tripped ("lock_waiters,replication_lag"). The user's
// throttle_query is the exception: it trips max_load when it returns a number
// > 0 (it has no threshold and never counts as critical).

#include <chrono>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace coexist::pacing {

struct Signals {
  // Sessions of the target database (other than the monitor) waiting on a
  // heavyweight lock: pg_stat_activity.wait_event_type = 'Lock'.
  int lock_waiters = 0;
  // Sessions of the target database (other than the monitor) with state
  // 'active', i.e. running a statement now.
  int active_sessions = 0;
  // Replicas attached (pg_stat_replication rows) and their largest
  // replay_lag; lag 0 when there is no replica or all are caught up.
  int replicas = 0;
  std::chrono::milliseconds replication_lag{0};
  // VACUUM or autovacuum processes working on the target table
  // (pg_stat_progress_vacuum.relid = the target's oid).
  int vacuum = 0;
  // Reported by the batch runner after each chunk: the time its chunk waited
  // for row locks, and its statement latency.
  std::chrono::milliseconds batch_lock_wait{0};
  std::chrono::milliseconds statement_latency{0};
  // The throttle_query's value (nullopt when none is configured). A failing
  // query reads as 1: the batch holds off until someone fixes it.
  std::optional<double> throttle_query;
};

struct Trip {
  std::string signal;  // "lock_waiters", "replication_lag", "throttle_query", ...
  double value = 0;    // counts, or milliseconds for durations
  double threshold = 0;
};

// Every signal of `signals` that reaches its threshold in `thresholds`, in a
// fixed order. `with_throttle_query`: include the throttle_query rule (for
// max_load, not for critical_load).
std::vector<Trip> Evaluate(const Signals& signals, const config::LoadThresholds& thresholds,
                           bool with_throttle_query);

// "lock_waiters,vacuum": the names of the tripped signals, "" for none.
std::string ReasonOf(const std::vector<Trip>& trips);

// {"lock_waiters": 3, "active_sessions": 5, "replicas": 0,
//  "replication_lag_ms": 0, "vacuum": 0, "batch_lock_wait_ms": 0,
//  "statement_latency_ms": 12, "throttle_query": 0.0 (only when set)}.
nlohmann::json SignalsToJson(const Signals& signals);
nlohmann::json ThresholdsToJson(const config::LoadThresholds& thresholds);

// The operator's `max-load=` value: "N" sets lock_waiters to N; "NAME=VALUE"
// sets one signal (counts as integers, durations as "5s"). Returns an error
// message, or "" when `thresholds` was updated.
std::string ApplyThresholdSetting(std::string_view setting, config::LoadThresholds& thresholds);

}  // namespace coexist::pacing
