#pragma once

// Why a run stopped claiming: the runs row's summary (`stop_reason`), `batch
// run`'s output and exit status, the daemon's and the capacity report's
// reading of a run. One list, so a reason is never misspelt in a comparison.

#include <optional>
#include <string_view>

namespace coexist {

enum class StopReason {
  kDrained,         // nothing left that the run could claim
  kStopped,         // SIGTERM/SIGINT (the caller's stop flag)
  kFailuresInARow,  // batch.max_consecutive_failures chunks failed in a row
  kOutsideWindow,   // the policy's window is closed (time_window)
  kDrainMargin,     // the window closes within its drain margin (time_window)
  kOperator,        // the control socket's `stop`
  kJobStop,         // `coexist ctl --job J stop`, through the database
  kStopFile,        // pacing.stop_file exists
  kCriticalLoad,    // pacing.critical_load tripped with critical_action: stop
  kMaxDuration,     // the run has claimed for batch.max_duration
  kMaxItems,        // the run has taken batch.max_items items in hand
};

inline constexpr StopReason kEveryStopReason[] = {
    StopReason::kDrained,       StopReason::kStopped,     StopReason::kFailuresInARow,
    StopReason::kOutsideWindow, StopReason::kDrainMargin, StopReason::kOperator,
    StopReason::kJobStop,       StopReason::kStopFile,    StopReason::kCriticalLoad,
    StopReason::kMaxDuration,   StopReason::kMaxItems};

// The name the runs row, the JSON summaries and the docs use.
constexpr std::string_view ToString(StopReason reason) {
  switch (reason) {
    case StopReason::kDrained:
      return "drained";
    case StopReason::kStopped:
      return "stopped";
    case StopReason::kFailuresInARow:
      return "failures_in_a_row";
    case StopReason::kOutsideWindow:
      return "outside_window";
    case StopReason::kDrainMargin:
      return "drain_margin";
    case StopReason::kOperator:
      return "operator";
    case StopReason::kJobStop:
      return "job_stop";
    case StopReason::kStopFile:
      return "stop_file";
    case StopReason::kCriticalLoad:
      return "critical_load";
    case StopReason::kMaxDuration:
      return "max_duration";
    case StopReason::kMaxItems:
      return "max_items";
  }
  return "unknown";
}

// The reason a name stands for (a summary read back from the runs row).
constexpr std::optional<StopReason> ParseStopReason(std::string_view name) {
  for (StopReason reason : kEveryStopReason) {
    if (ToString(reason) == name) return reason;
  }
  return std::nullopt;
}

}  // namespace coexist
