#include "capacity/projection.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

namespace coexist::capacity {
namespace {

// The first and the last tenth of the items are left out of the steady rate.
constexpr double kHeadShare = 0.1;
constexpr double kTailShare = 0.9;
// At least this many chunks before the steady part starts.
constexpr size_t kHeadChunks = 2;

double ItemsPerRow(const CellResult& cell) {
  return cell.records > 0 ? static_cast<double>(cell.items) / static_cast<double>(cell.records) : 0;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

double DurationModel::SecondsFor(long long items) const {
  if (steady_rate <= 0) return 0;
  return fixed_seconds + static_cast<double>(items) * done_share / steady_rate;
}

DurationModel ModelOf(const CellResult& cell) {
  DurationModel m;
  const auto& chunks = cell.chunks;
  m.done_share =
      cell.items > 0 ? static_cast<double>(cell.done) / static_cast<double>(cell.items) : 0;
  m.items_per_row = ItemsPerRow(cell);
  if (!cell.batch_finished) {
    m.untrusted_reason = "the batch did not finish, so its tail was not measured";
    return m;
  }
  if (chunks.size() < static_cast<size_t>(kMinModelChunks)) {
    m.untrusted_reason = fmt::format("{} chunks done, fewer than {}: queue more items",
                                     chunks.size(), kMinModelChunks);
    return m;
  }
  if (cell.batch_seconds < kMinModelBatchSeconds) {
    m.untrusted_reason = fmt::format("the batch ran {:.1f} s, less than {:.0f} s: queue more items",
                                     cell.batch_seconds, kMinModelBatchSeconds);
    return m;
  }
  long long done = 0;
  for (const auto& c : chunks) done += c.items;
  // head: the chunk where the first tenth of the items is done (not before
  // the kHeadChunks-th); tail: the chunk where nine tenths are.
  size_t head = 0, tail = 0;
  long long cum = 0, cum_head = 0, cum_tail = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    cum += chunks[i].items;
    if (cum_head == 0 && i >= kHeadChunks && cum >= kHeadShare * done) head = i, cum_head = cum;
    if (cum >= kTailShare * done) {
      tail = i, cum_tail = cum;
      break;
    }
  }
  double span = chunks[tail].at_seconds - chunks[head].at_seconds;
  m.steady_chunks = static_cast<int>(tail - head);
  m.steady_seconds = span;
  if (cum_head == 0 || tail <= head || span <= 0) {
    m.untrusted_reason = "no steady part between the first and the last tenth of the items";
    return m;
  }
  m.steady_rate = static_cast<double>(cum_tail - cum_head) / span;
  // Everything the run took beyond the steady rate: setup and the first
  // chunks, then the tail after nine tenths of the items.
  double head_cost = chunks[head].at_seconds - static_cast<double>(cum_head) / m.steady_rate;
  double tail_cost = (cell.batch_seconds - chunks[tail].at_seconds) -
                     static_cast<double>(done - cum_tail) / m.steady_rate;
  m.fixed_seconds = head_cost + tail_cost;
  m.trusted = true;
  return m;
}

namespace {

// The model a check is set against: the measured cell's or, when the cell
// was measured several times (scenario.repeat), the median of its repeats'
// steady rates, fixed seconds and done shares, so that what ran beside one
// short measurement weighs less. Every repeat's model must be trusted;
// otherwise the first untrusted one is returned, with its cell in `cell`.
// `c` is `base` or another measurement of its sweep cell (scenario.repeat).
bool IsRepeatOf(const CellResult& c, const CellResult& base) {
  return c.index == base.index || (base.sweep_cell != 0 && c.check_of == 0 &&
                                   c.sweep_cell == base.sweep_cell && c.items == base.items);
}

// `models`, when given, receives each repeat's own model.
DurationModel CheckModel(const std::vector<CellResult>& cells, const CellResult& base, int& cell,
                         int& repeats, std::vector<DurationModel>* each = nullptr) {
  std::vector<DurationModel> own;
  std::vector<DurationModel>& models = each ? *each : own;
  cell = base.index;
  for (const auto& c : cells) {
    if (!IsRepeatOf(c, base)) continue;
    models.push_back(ModelOf(c));
    if (!models.back().trusted) {
      cell = c.index;
      repeats = 1;
      return models.back();
    }
  }
  repeats = static_cast<int>(models.size());
  if (models.size() == 1) return models.front();
  DurationModel median = ModelOf(base);
  std::vector<double> rates, fixed, shares;
  for (const auto& m : models) {
    rates.push_back(m.steady_rate);
    fixed.push_back(m.fixed_seconds);
    shares.push_back(m.done_share);
  }
  median.steady_rate = Median(rates);
  median.fixed_seconds = Median(fixed);
  median.done_share = Median(shares);
  return median;
}

// The lowest and highest of the repeats' own projections to `items`, and
// `projected` (the median model's): the range stated around it. Every
// model in `each` is trusted (CheckModel returned a trusted one).
std::pair<double, double> RangeOf(const std::vector<DurationModel>& each, long long items,
                                  double projected) {
  double low = projected, high = projected;
  for (const auto& m : each) {
    low = std::min(low, m.SecondsFor(items));
    high = std::max(high, m.SecondsFor(items));
  }
  return {low, high};
}

}  // namespace

std::vector<Projection> Project(const std::vector<CellResult>& cells,
                                const ScenarioSummary& scenario) {
  std::vector<Projection> out;
  if (scenario.production_queue_items <= 0) return out;
  const long long items = scenario.production_queue_items;
  for (const auto& cell : cells) {
    if (cell.check_of != 0) continue;
    // A sweep cell's repeats give one projection, from the first of them.
    bool later_repeat = std::any_of(cells.begin(), cells.end(), [&](const CellResult& c) {
      return c.index < cell.index && IsRepeatOf(c, cell);
    });
    if (later_repeat) continue;
    Projection p{.cell = cell.index,
                 .policy = cell.policy,
                 .load_level = cell.load_level,
                 .job = cell.JobKind()};
    int model_cell = cell.index;
    std::vector<DurationModel> each;
    p.model = CheckModel(cells, cell, model_cell, p.repeats, &each);
    p.mix = fmt::format(
        "{} {}{}{}", cell.items, cell.Range() ? "rows of a range job" : "queued items",
        p.model.items_per_row > 0 ? fmt::format(", {:.2f} per row", p.model.items_per_row) : "",
        cell.load_level.empty() ? "" : ", " + cell.load_level);
    if (p.model.trusted) {
      p.projected_seconds = p.model.SecondsFor(items);
      std::tie(p.low_seconds, p.high_seconds) = RangeOf(each, items, p.projected_seconds);
      p.fits_window = scenario.production_window_seconds > 0 &&
                      p.projected_seconds <= scenario.production_window_seconds;
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<ProjectionCheck> CheckProjections(const std::vector<CellResult>& cells) {
  std::vector<ProjectionCheck> out;
  for (const auto& check : cells) {
    if (check.check_of == 0) continue;
    auto base = std::find_if(cells.begin(), cells.end(),
                             [&](const CellResult& c) { return c.index == check.check_of; });
    if (base == cells.end()) continue;
    ProjectionCheck c{.cell = base->index,
                      .check_cell = check.index,
                      .policy = base->policy,
                      .load_level = base->load_level,
                      .measured_items = base->items,
                      .check_items = check.items,
                      .measured_records = base->records,
                      .check_records = check.records,
                      .measured_seconds = check.batch_seconds};
    int model_cell = base->index;
    std::vector<DurationModel> each;
    c.model = CheckModel(cells, *base, model_cell, c.repeats, &each);
    double measured_per_row = ItemsPerRow(*base), check_per_row = ItemsPerRow(check);
    if (!c.model.trusted) {
      c.untrusted_reason = "the model of cell " + std::to_string(model_cell) +
                           " is not trusted: " + c.model.untrusted_reason;
    } else if (measured_per_row > 0 && check_per_row > 0 &&
               std::abs(check_per_row - measured_per_row) >
                   kItemsPerRowTolerance * measured_per_row) {
      c.untrusted_reason = fmt::format(
          "the check cell queued {:.2f} items per row ({} over {} rows), the measured cell {:.2f} "
          "({} over {}): the model holds for the items per row it measured",
          check_per_row, check.items, check.records, measured_per_row, base->items, base->records);
    } else if (!check.batch_finished) {
      c.untrusted_reason = "the check cell's batch did not finish";
    } else {
      c.trusted = true;
      c.projected_seconds = c.model.SecondsFor(check.items);
      std::tie(c.low_seconds, c.high_seconds) = RangeOf(each, check.items, c.projected_seconds);
      c.error_percent =
          c.measured_seconds > 0
              ? 100.0 * (c.projected_seconds - c.measured_seconds) / c.measured_seconds
              : 0;
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace coexist::capacity
