#pragma once

#include <string>
#include <vector>

#include "capacity/cell_result.h"

namespace coexist::capacity {

// How one policy fared at one load level (the best cell when a level has
// several cells of the same policy).
struct PolicyOutcome {
  std::string policy;
  bool finished_in_window = false;
  bool complete = false;  // nothing deferred, dead or left queued
  double batch_seconds = 0;
  double p99_ratio = 0;               // online p99 during the batch / before it
  double online_errors_per_1000 = 0;  // refusals + revocations + gave-ups + lock timeouts
};

// The answer for one load level: which policies finish inside the window,
// at what online cost, and which one to use.
//
// Rule (docs/capacity.md): among policies that finished inside the window
// with every item done, pick the lowest online p99 ratio; within 5% of each
// other, fewer online errors win, then the faster batch. When none
// qualifies, recommend nothing and say why.
struct Recommendation {
  std::string load_level;
  std::vector<PolicyOutcome> outcomes;  // sorted by policy name
  std::string recommended;              // "" when no policy qualifies
  std::string reason;                   // one sentence, for the report
};

std::vector<Recommendation> Recommend(const std::vector<CellResult>& cells,
                                      const ScenarioSummary& scenario);

// Batch duration for the production queue size, from a cell's measured rate.
struct Projection {
  std::string policy;
  std::string load_level;
  double items_per_second = 0;
  double projected_seconds = 0;
  bool fits_window = false;
};

// One projection per cell whose batch moved items; empty when the scenario
// names no production queue size. Assumes the rate stays what it was
// (linear in items, same online load, same hardware and data sizes).
std::vector<Projection> Project(const std::vector<CellResult>& cells,
                                const ScenarioSummary& scenario);

}  // namespace coexist::capacity
