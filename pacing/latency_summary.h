#pragma once

// A plain record with no dependencies, so that the run's summary and the
// capacity report carry it without including the Pacer.

#include <string>

namespace coexist::pacing {

// What the online latency objective did over a run, for the run's summary,
// its metrics and the capacity report.
struct LatencySummary {
  bool on = true;          // false: the objective could not run; off_reason says why
  std::string off_reason;  // empty while on
  double objective = 0;
  // The signal it was held to at the end: "sessions" or "probe" (the
  // configured one, or the probe after sessions fell back).
  std::string signal;
  double baseline_ms = 0;   // the last baseline; 0 when none was learned
  long long slowdowns = 0;  // latency_slowdown events (each halved the duty cycle)
  double seconds_over = 0;  // wall time the probe was over the objective
};

}  // namespace coexist::pacing
