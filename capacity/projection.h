#pragma once

// The batch-duration model of a cell, and projections from it (docs/capacity.md,
// "Projection"). Pure logic: no database, no clock.

#include <optional>
#include <string>
#include <vector>

#include "capacity/cell_result.h"

namespace coexist::capacity {

// A batch's duration as measured, split into what scales with the queue and
// what does not:
//   seconds(N) = fixed_seconds + N * done_share / steady_rate
// steady_rate is the items per second between the first and the last tenth
// of the items (after the first chunks: connections, pacing's first chunk
// sizes, cold caches); fixed_seconds is what the run took beyond that rate:
// setup, the first chunks, and the tail (waits up to max_wait, deferred
// items retried after their delay, the last chunk's stragglers).
struct DurationModel {
  bool trusted = false;
  std::string untrusted_reason;  // why no number is given, when !trusted
  double steady_rate = 0;        // items per second
  double fixed_seconds = 0;      // can be negative when the first chunks ran faster
  double done_share = 0;         // done / queued in the measured cell
  int steady_chunks = 0;         // chunks the rate was measured over
  double steady_seconds = 0;     // and the time they took
  // Queued items per row of the target in the measured cell; 0 when its
  // rows are unknown. The rate holds for this many: items of one key wait
  // for each other and find each other in the claim, so more items per row
  // run slower (docs/capacity.md, "The projection model").
  double items_per_row = 0;

  // The projected batch duration for `items` queued items.
  double SecondsFor(long long items) const;
};

// Below these a cell's model is not trusted: too few chunks to tell the
// steady rate from the first chunks and the tail, or a run too short for
// its fixed costs to be told apart from noise.
inline constexpr int kMinModelChunks = 10;
inline constexpr double kMinModelBatchSeconds = 3;

DurationModel ModelOf(const CellResult& cell);

// The production projection of one of the sweep's cells:
// scenario.production_queue_items through the cell's model or, when the
// cell was measured several times (scenario.repeat), through the median of
// its repeats' models, with the range their own models give: how far to
// trust the figure.
struct Projection {
  int cell = 0;  // the first measurement of the sweep cell
  std::string policy;
  std::string load_level;
  // "range" for a range job's cell, whose items are the rows it walks (the
  // projection's items: rows of the range); "queued" otherwise.
  std::string job = "queued";
  DurationModel model;
  int repeats = 1;               // the measurements `model` is made of
  double projected_seconds = 0;  // when model.trusted
  double low_seconds = 0;        // the lowest and highest of the repeats' own
  double high_seconds = 0;       // projections (= projected_seconds for one)
  bool fits_window = false;      // projected_seconds <= production_window
  // The mix the model was measured on: "10000 queued items, 10.00 per row,
  // online.users=30". The model holds for that mix (docs/capacity.md).
  std::string mix;
};

// One per cell of the sweep (check cells and later repeats left out); empty
// when the scenario names no production queue size. Assumes what the model
// assumes: the same online load, hardware, items per row and settings.
std::vector<Projection> Project(const std::vector<CellResult>& cells,
                                const ScenarioSummary& scenario);

// A projection check: the model of a measured cell projected to the items
// of its check cell, against the check cell's measured duration. The check
// cell seeds its rows in proportion to its items (items per row as in the
// measured cell); when it could not (the user's own tables, the 100,000,000
// rows limit) there is no error figure: the model does not hold across
// items per row.
struct ProjectionCheck {
  int cell = 0;  // the measured cell
  int check_cell = 0;
  std::string policy;
  std::string load_level;
  long long measured_items = 0;
  long long check_items = 0;
  long long measured_records = 0;  // the target's rows in each cell; 0: unknown
  long long check_records = 0;
  // The measured cell's model or, with scenario.repeat, the median of its
  // repeats' models (steady rate, fixed seconds and done share each).
  DurationModel model;
  int repeats = 1;               // the measurements `model` is made of
  bool trusted = false;          // the model was trusted and the check cell finished
  std::string untrusted_reason;  // why there is no error figure
  double projected_seconds = 0;
  // The lowest and highest of the repeats' own projections to the check's
  // items (= projected_seconds for one measurement): the range the report
  // states around a projection, tried against a measurement.
  double low_seconds = 0;
  double high_seconds = 0;
  double measured_seconds = 0;
  double error_percent = 0;  // (projected - measured) / measured
  bool WithinRange() const {
    return trusted && measured_seconds >= low_seconds && measured_seconds <= high_seconds;
  }
};

// Items per row may differ this much (relatively) between the measured and
// the check cell: the check's rows are rounded up to a whole number.
inline constexpr double kItemsPerRowTolerance = 0.02;

std::vector<ProjectionCheck> CheckProjections(const std::vector<CellResult>& cells);

}  // namespace coexist::capacity
