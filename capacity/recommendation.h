#pragma once

#include <map>
#include <string>
#include <vector>

#include "capacity/cell_result.h"

namespace coexist::capacity {

// "30 refused by the read-only window, 11 timed out behind row locks":
// online failures by outcome (online_sim::OutcomeName), the most first;
// "none" when empty.
std::string FailuresText(const std::map<std::string, long long>& by_kind);

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

// A figure over the repeats of one cell (scenario.repeat): its median and
// its range. With one measurement all three are that measurement.
struct Spread {
  double median = 0;
  double min = 0;
  double max = 0;
  // True when the two ranges share a value: the difference between the
  // medians is within what repeating the same cell gave.
  bool Overlaps(const Spread& other) const { return min <= other.max && other.min <= max; }
};

Spread SpreadOf(std::vector<double> values);

// How one policy fared at one load level (the best cell when a level has
// several sweep cells of the same policy), against the scenario's
// objectives. With repeats, the figures are the medians over the cell's
// measurements, and the batch finished inside the window when most of them
// did.
struct PolicyOutcome {
  std::string policy;
  // The cell's other swept settings, beside the policy and the load level
  // ("pacing.online_latency={objective: 1.5x}"); "" when only those vary.
  std::string variant;
  // The policy, with its variant when it has one: what the report names.
  std::string Label() const { return variant.empty() ? policy : policy + " (" + variant + ")"; }
  int repeats = 1;  // measurements of the cell (scenario.repeat)
  bool finished_in_window = false;
  double window_seconds = 0;  // the window the batch had (scaled for a grown cell)
  double batch_seconds = 0;
  double p99_ratio = 0;         // online p99 during the batch / during the warm-up
  double error_percent = 0;     // online transactions that failed during the batch
  double done_percent = 0;      // of the items queued
  double deferred_percent = 0;  // of the items queued
  // The key figures' spread over the repeats (medians as above).
  Spread batch_seconds_spread, items_per_second, p99_ratio_spread, error_percent_spread;
  // The online failures behind error_percent, and what the users did to
  // each other (not counted), summed over the repeats, by outcome.
  std::map<std::string, long long> failed_by_kind, user_conflicts;
  std::vector<Miss> misses;  // empty: meets every objective
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
  std::string reason;                   // one to three sentences, for the report
  // With repeats: the policies whose online p99 ratio overlaps, over the
  // repeats, the recommended one's (among those that qualify) or, when none
  // qualifies, the closest one's (among all), in a sentence (also the end of
  // `reason`); "" when none does or each cell was measured once.
  std::string noise;
};

// Judges the repeats of one cell (one or more measurements of the same
// sweep cell) against the objectives and each measurement's window.
PolicyOutcome Judge(const std::vector<const CellResult*>& repeats, const ScenarioSummary& scenario);

// Projection check cells (check_of != 0) are left out: they measure the
// model, not the policies. Cells with the same sweep_cell (not 0) are
// repeats of one cell and judged together; a cell with sweep_cell 0 stands
// alone.
std::vector<Recommendation> Recommend(const std::vector<CellResult>& cells,
                                      const ScenarioSummary& scenario);

}  // namespace coexist::capacity
