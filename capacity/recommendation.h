#pragma once

#include <string>
#include <vector>

#include "capacity/cell_result.h"

namespace coexist::capacity {

// One objective (config::Objectives, or the window) a cell missed.
struct Miss {
  // The objective's key: max_p99_ratio, max_error_rate, min_done_share,
  // max_deferred_share, or window (scenario.window).
  std::string objective;
  double limit = 0;     // the objective: a ratio, a percent, or seconds
  double measured = 0;  // in the same unit
  double by = 0;        // how far past the limit, always positive
  std::string text;     // "online p99 3.10x of the warm-up's, objective at most 2x (by 1.10x)"
  std::string remedy;   // what would make the policy meet it
};

// How one policy fared at one load level (the best cell when a level has
// several cells of the same policy), against the scenario's objectives.
struct PolicyOutcome {
  std::string policy;
  bool finished_in_window = false;
  double batch_seconds = 0;
  double p99_ratio = 0;         // online p99 during the batch / during the warm-up
  double error_percent = 0;     // online transactions that failed during the batch
  double done_percent = 0;      // of the items queued
  double deferred_percent = 0;  // of the items queued
  std::vector<Miss> misses;     // empty: meets every objective
  bool Qualifies() const { return misses.empty(); }
};

// The answer for one load level: how each policy fared against the
// objectives, and which one to use.
//
// Rule (docs/capacity.md): only a policy that meets every objective
// (scenario.objectives and the window) qualifies; among those, the lowest
// online p99 ratio; within 5% of each other, the lower online error rate
// wins, then the faster batch. When none qualifies, recommend nothing, and
// name the closest policy, what it missed and what would make it qualify.
struct Recommendation {
  std::string load_level;
  std::vector<PolicyOutcome> outcomes;  // sorted by policy name
  std::string recommended;              // "" when no policy qualifies
  std::string reason;                   // one or two sentences, for the report
};

// Judges one cell against the objectives and the window.
PolicyOutcome Judge(const CellResult& cell, const ScenarioSummary& scenario);

// Projection check cells (check_of != 0) are left out: they measure the
// model, not the policies.
std::vector<Recommendation> Recommend(const std::vector<CellResult>& cells,
                                      const ScenarioSummary& scenario);

}  // namespace coexist::capacity
