#include "capacity/recommendation.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace coexist::capacity {
namespace {

PolicyOutcome OutcomeOf(const CellResult& cell) {
  PolicyOutcome out;
  out.policy = cell.policy;
  out.finished_in_window = cell.finished_in_window;
  out.complete = cell.deferred == 0 && cell.dead == 0 && cell.queued_left == 0;
  out.batch_seconds = cell.batch_seconds;
  out.p99_ratio = cell.before.p99_ms > 0 ? cell.during.p99_ms / cell.before.p99_ms : 0;
  long long errors = cell.refusals + cell.revocations + cell.gave_up + cell.lock_timeouts;
  out.online_errors_per_1000 =
      cell.during.transactions > 0 ? 1000.0 * errors / cell.during.transactions : 0;
  return out;
}

bool Qualifies(const PolicyOutcome& o) { return o.finished_in_window && o.complete; }

// True when a is the better choice than b (both qualify).
bool Better(const PolicyOutcome& a, const PolicyOutcome& b) {
  double low = std::min(a.p99_ratio, b.p99_ratio);
  if (std::abs(a.p99_ratio - b.p99_ratio) > 0.05 * low) return a.p99_ratio < b.p99_ratio;
  if (a.online_errors_per_1000 != b.online_errors_per_1000) {
    return a.online_errors_per_1000 < b.online_errors_per_1000;
  }
  return a.batch_seconds < b.batch_seconds;
}

}  // namespace

std::vector<Recommendation> Recommend(const std::vector<CellResult>& cells,
                                      const ScenarioSummary& scenario) {
  std::map<std::string, std::map<std::string, PolicyOutcome>> by_level;
  for (const auto& cell : cells) {
    PolicyOutcome outcome = OutcomeOf(cell);
    auto& slot = by_level[cell.load_level];
    auto it = slot.find(cell.policy);
    if (it == slot.end() ||
        (Qualifies(outcome) && (!Qualifies(it->second) || Better(outcome, it->second)))) {
      slot[cell.policy] = outcome;
    }
  }
  std::vector<Recommendation> out;
  for (auto& [level, policies] : by_level) {
    Recommendation rec;
    rec.load_level = level;
    const PolicyOutcome* best = nullptr;
    for (auto& [name, outcome] : policies) {
      rec.outcomes.push_back(outcome);
      if (Qualifies(outcome) && (best == nullptr || Better(outcome, *best))) best = &outcome;
    }
    if (best != nullptr) {
      rec.recommended = best->policy;
      rec.reason = fmt::format(
          "{} finished all items in {:.1f} s (window {:.0f} s) with online p99 at {:.2f}x of "
          "before the batch and {:.1f} online errors per 1000 transactions.",
          best->policy, best->batch_seconds, scenario.window_seconds, best->p99_ratio,
          best->online_errors_per_1000);
    } else {
      rec.reason = fmt::format(
          "No policy finished every item inside the {:.0f} s window at this load: widen the "
          "window, add workers, or lower the online load during the batch.",
          scenario.window_seconds);
    }
    out.push_back(std::move(rec));
  }
  return out;
}

std::vector<Projection> Project(const std::vector<CellResult>& cells,
                                const ScenarioSummary& scenario) {
  std::vector<Projection> out;
  if (scenario.production_queue_items <= 0) return out;
  for (const auto& cell : cells) {
    if (cell.items_per_second <= 0) continue;
    Projection p;
    p.policy = cell.policy;
    p.load_level = cell.load_level;
    p.items_per_second = cell.items_per_second;
    p.projected_seconds =
        static_cast<double>(scenario.production_queue_items) / cell.items_per_second;
    p.fits_window = scenario.production_window_seconds > 0 &&
                    p.projected_seconds <= scenario.production_window_seconds;
    out.push_back(p);
  }
  return out;
}

}  // namespace coexist::capacity
