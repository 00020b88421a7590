#pragma once

// The kinds of coexist.events rows: one list, so a kind is never misspelt
// where it is written or compared, and docs/schema.md lists exactly these
// (docs_test checks both ways; schema_fence_test checks that the SQL
// functions write only these). Pure: no libpqxx.

#include <optional>
#include <string>
#include <string_view>

namespace coexist {

enum class EventKind {
  // a run's
  kItemDeferred,
  kItemEscalated,
  kItemDead,
  kEditLockRevoked,
  kBackendCancelled,
  kBackendTerminated,
  kClaimRefused,
  kRunStoppedFailing,
  kItemsMissing,
  kWindowsReleased,
  kRunAbandoned,
  kCpuPriorityUnavailable,
  // operators' and the daemon's
  kEditLockReleasedByAdmin,
  kEditLockExpired,
  kItemsRetried,
  kQueuePurged,
  kJobStopRequested,
  kJobPaused,
  kJobResumed,
  kItemsCancelled,
  kItemsSkipped,
  kItemsRescheduled,
  // pacing's
  kThrottleStart,
  kThrottleStop,
  kHibernate,
  kCriticalStop,
  kLatencyBaseline,
  kLatencySlowdown,
  kLatencyRecovered,
  kLatencyChunkTime,
  kLatencySignalFallback,
  kLatencyObjectiveOff,
};

inline constexpr EventKind kEveryEventKind[] = {EventKind::kItemDeferred,
                                                EventKind::kItemEscalated,
                                                EventKind::kItemDead,
                                                EventKind::kEditLockRevoked,
                                                EventKind::kBackendCancelled,
                                                EventKind::kBackendTerminated,
                                                EventKind::kClaimRefused,
                                                EventKind::kRunStoppedFailing,
                                                EventKind::kItemsMissing,
                                                EventKind::kWindowsReleased,
                                                EventKind::kRunAbandoned,
                                                EventKind::kCpuPriorityUnavailable,
                                                EventKind::kEditLockReleasedByAdmin,
                                                EventKind::kEditLockExpired,
                                                EventKind::kItemsRetried,
                                                EventKind::kQueuePurged,
                                                EventKind::kJobStopRequested,
                                                EventKind::kJobPaused,
                                                EventKind::kJobResumed,
                                                EventKind::kItemsCancelled,
                                                EventKind::kItemsSkipped,
                                                EventKind::kItemsRescheduled,
                                                EventKind::kThrottleStart,
                                                EventKind::kThrottleStop,
                                                EventKind::kHibernate,
                                                EventKind::kCriticalStop,
                                                EventKind::kLatencyBaseline,
                                                EventKind::kLatencySlowdown,
                                                EventKind::kLatencyRecovered,
                                                EventKind::kLatencyChunkTime,
                                                EventKind::kLatencySignalFallback,
                                                EventKind::kLatencyObjectiveOff};

// The name coexist.events.kind holds.
constexpr std::string_view ToString(EventKind kind) {
  switch (kind) {
    case EventKind::kItemDeferred:
      return "item_deferred";
    case EventKind::kItemEscalated:
      return "item_escalated";
    case EventKind::kItemDead:
      return "item_dead";
    case EventKind::kEditLockRevoked:
      return "edit_lock_revoked";
    case EventKind::kBackendCancelled:
      return "backend_cancelled";
    case EventKind::kBackendTerminated:
      return "backend_terminated";
    case EventKind::kClaimRefused:
      return "claim_refused";
    case EventKind::kRunStoppedFailing:
      return "run_stopped_failing";
    case EventKind::kItemsMissing:
      return "items_missing";
    case EventKind::kWindowsReleased:
      return "windows_released";
    case EventKind::kRunAbandoned:
      return "run_abandoned";
    case EventKind::kCpuPriorityUnavailable:
      return "cpu_priority_unavailable";
    case EventKind::kEditLockReleasedByAdmin:
      return "edit_lock_released_by_admin";
    case EventKind::kEditLockExpired:
      return "edit_lock_expired";
    case EventKind::kItemsRetried:
      return "items_retried";
    case EventKind::kQueuePurged:
      return "queue_purged";
    case EventKind::kJobStopRequested:
      return "job_stop_requested";
    case EventKind::kJobPaused:
      return "job_paused";
    case EventKind::kJobResumed:
      return "job_resumed";
    case EventKind::kItemsCancelled:
      return "items_cancelled";
    case EventKind::kItemsSkipped:
      return "items_skipped";
    case EventKind::kItemsRescheduled:
      return "items_rescheduled";
    case EventKind::kThrottleStart:
      return "throttle_start";
    case EventKind::kThrottleStop:
      return "throttle_stop";
    case EventKind::kHibernate:
      return "hibernate";
    case EventKind::kCriticalStop:
      return "critical_stop";
    case EventKind::kLatencyBaseline:
      return "latency_baseline";
    case EventKind::kLatencySlowdown:
      return "latency_slowdown";
    case EventKind::kLatencyRecovered:
      return "latency_recovered";
    case EventKind::kLatencyChunkTime:
      return "latency_chunk_time";
    case EventKind::kLatencySignalFallback:
      return "latency_signal_fallback";
    case EventKind::kLatencyObjectiveOff:
      return "latency_objective_off";
  }
  return "unknown";
}

// The kind a name stands for (`coexist events --kind`).
constexpr std::optional<EventKind> ParseEventKind(std::string_view name) {
  for (EventKind kind : kEveryEventKind) {
    if (ToString(kind) == name) return kind;
  }
  return std::nullopt;
}

// The kind as a SQL string literal ('item_dead'), for the statements that
// write events with their change (the names need no escaping).
inline std::string SqlLiteral(EventKind kind) { return "'" + std::string(ToString(kind)) + "'"; }

}  // namespace coexist
