#include "capacity/recommendation.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace coexist::capacity {
namespace {

double Percent(long long part, long long whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0;
}

// What one online outcome means to an operator, counted.
std::string FailureText(const std::string& kind, long long n) {
  static const std::map<std::string, std::string> kWhat = {
      {"gave_up", "gave up after retries"},
      {"lock_timeout", "timed out behind row locks"},
      {"nowait", "found the row locked (NOWAIT)"},
      {"lock_revoked", "lost their edit lock to the batch"},
      {"refused_window", "refused by the read-only window"},
      {"refused_owner", "refused on rows the batch owns"},
      {"refused_edit_locked", "refused under another user's edit lock"},
      {"edit_lock_busy", "found the edit lock taken by another user"},
      {"conflict", "offline edits whose row changed meanwhile"},
      {"deadlock", "deadlocks"},
      {"serialization", "serialization failures"},
      {"canceled", "cancelled"},
      {"terminated", "terminated"},
      {"connection_lost", "lost their connection"},
      {"other", "other errors"}};
  auto it = kWhat.find(kind);
  return fmt::format("{} {}", n, it != kWhat.end() ? it->second : kind);
}

// The kind of online error that dominates, and what would avoid it.
std::string ErrorRemedy(const std::map<std::string, long long>& during_errors) {
  std::string top;
  long long most = 0;
  for (const auto& [kind, n] : during_errors) {
    if (n > most) most = n, top = kind;
  }
  if (top == "refused_window") {
    return "this policy refuses online writes while the batch runs: run it when users are away, "
           "or choose a policy that lets them write";
  }
  if (top == "refused_owner") {
    return "online writes are refused on the rows the batch holds: smaller chunks "
           "(pacing.chunk_time, batch.chunk_size) shorten the hold";
  }
  if (top == "lock_revoked" || top == "canceled" || top == "terminated") {
    return "the batch revokes or interrupts online work: give users more time "
           "(cancel_after, terminate_after), or choose a policy that yields to them";
  }
  if (top == "lock_timeout" || top == "nowait") {
    return "online writes time out behind the batch's row locks: smaller chunks or fewer workers "
           "(batch.workers)";
  }
  return "fewer workers (batch.workers) or smaller chunks put less load next to the users";
}

constexpr const char* kDeferredRemedy =
    "items were deferred, dead or left queued: more deferrals before giving up (max_deferrals), "
    "on_exhausted: wait, or a longer window so deferred items are retried";

void Check(PolicyOutcome& out, bool missed, Miss miss) {
  if (!missed) return;
  miss.by = std::abs(miss.measured - miss.limit);
  out.misses.push_back(std::move(miss));
}

// True when a is the better choice than b (both qualify).
bool Better(const PolicyOutcome& a, const PolicyOutcome& b) {
  double low = std::min(a.p99_ratio, b.p99_ratio);
  if (std::abs(a.p99_ratio - b.p99_ratio) > 0.05 * low) return a.p99_ratio < b.p99_ratio;
  if (a.error_percent != b.error_percent) return a.error_percent < b.error_percent;
  return a.batch_seconds < b.batch_seconds;
}

// How far a policy is from qualifying: fewer objectives missed, then the
// smaller sum of relative misses.
double Distance(const PolicyOutcome& o) {
  double sum = 0;
  for (const auto& m : o.misses) sum += m.by / std::max(std::abs(m.limit), 1.0);
  return 1000.0 * static_cast<double>(o.misses.size()) + sum;
}

// The cell's swept settings other than the policy and the load level.
// A range job's cell says so, swept or not ("range job where id <= 4000");
// a queued cell beside a swept batch.range says "queued job".
std::string VariantOf(const CellResult& cell) {
  std::string variant;
  std::string job = cell.Range() ? "range job where " + cell.range_where : "queued job";
  if (cell.Range() && !cell.parameters.count("batch.range")) variant = job;
  for (const auto& [key, value] : cell.parameters) {
    if (key == "policy.name" || cell.load_level == key + "=" + value) continue;
    variant += (variant.empty() ? "" : ", ") + (key == "batch.range" ? job : key + "=" + value);
  }
  return variant;
}

// True when a should stand for its policy rather than b.
bool Preferred(const PolicyOutcome& a, const PolicyOutcome& b) {
  if (a.Qualifies() != b.Qualifies()) return a.Qualifies();
  return a.Qualifies() ? Better(a, b) : Distance(a) < Distance(b);
}

}  // namespace

Spread SpreadOf(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  double median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {.median = median, .min = values.front(), .max = values.back()};
}

PolicyOutcome Judge(const std::vector<const CellResult*>& repeats,
                    const ScenarioSummary& scenario) {
  const config::Objectives& o = scenario.objectives;
  const CellResult& first = *repeats.front();
  PolicyOutcome out;
  out.policy = first.policy;
  out.repeats = static_cast<int>(repeats.size());
  std::vector<double> seconds, rates, ratios, errors, done, deferred, needed;
  int in_window = 0, finished = 0;
  std::map<std::string, long long>& during_errors = out.failed_by_kind;  // over the repeats
  for (const CellResult* cell : repeats) {
    for (const auto& [kind, n] : cell->during_user_conflicts) out.user_conflicts[kind] += n;
    seconds.push_back(cell->batch_seconds);
    rates.push_back(cell->items_per_second);
    ratios.push_back(cell->before.p99_ms > 0 ? cell->during.p99_ms / cell->before.p99_ms : 0);
    long long failed = 0;
    for (const auto& [kind, n] : cell->during_errors) failed += n, during_errors[kind] += n;
    errors.push_back(Percent(failed, cell->during.transactions));
    done.push_back(Percent(cell->done, cell->items));
    deferred.push_back(Percent(cell->deferred, cell->items));
    // At the measured rate, the window the whole queue would have needed.
    needed.push_back(cell->done > 0 ? cell->batch_seconds * static_cast<double>(cell->items) /
                                          static_cast<double>(cell->done)
                                    : 0);
    in_window += cell->finished_in_window;
    finished += cell->batch_finished;
  }
  out.batch_seconds_spread = SpreadOf(seconds);
  out.items_per_second = SpreadOf(rates);
  out.p99_ratio_spread = SpreadOf(ratios);
  out.error_percent_spread = SpreadOf(errors);
  out.batch_seconds = out.batch_seconds_spread.median;
  out.p99_ratio = out.p99_ratio_spread.median;
  out.error_percent = out.error_percent_spread.median;
  out.done_percent = SpreadOf(done).median;
  out.deferred_percent = SpreadOf(deferred).median;
  // Most measurements must have finished inside the window (with two, both).
  out.finished_in_window = 2 * in_window > out.repeats;
  const bool batch_finished = 2 * finished > out.repeats;
  const double need = SpreadOf(needed).median;
  // A grown or check cell had a window scaled with its queue; cells built
  // by hand (tests) may leave it 0 for the scenario's.
  const double window = first.window_seconds > 0 ? first.window_seconds : scenario.window_seconds;
  out.window_seconds = window;

  Check(out, !out.finished_in_window,
        {.objective = "window",
         .limit = window,
         .measured = batch_finished ? out.batch_seconds : std::max(need, out.batch_seconds),
         .text = batch_finished
                     ? fmt::format("the batch took {:.1f} s, window {:.0f} s", out.batch_seconds,
                                   window)
                     : fmt::format("the batch did not finish inside the {:.0f} s window ({:.1f}% "
                                   "done)",
                                   window, out.done_percent),
         .remedy = need > 0 ? fmt::format("a window of about {:.0f} s at the measured rate, or "
                                          "more workers if the online objectives leave room",
                                          need * 1.1)
                            : "a longer window, or more workers"});
  Check(out, out.p99_ratio > o.max_p99_ratio,
        {.objective = "max_p99_ratio",
         .limit = o.max_p99_ratio,
         .measured = out.p99_ratio,
         .text = fmt::format("online p99 {:.2f}x of the warm-up's, objective at most {:g}x (by "
                             "{:.2f}x)",
                             out.p99_ratio, o.max_p99_ratio, out.p99_ratio - o.max_p99_ratio),
         .remedy =
             first.latency
                 ? std::string("a lower pacing.online_latency.objective or min_duty, ") +
                       (first.cpu_nice < config::kLowCpuNice ? "pacing.cpu_priority: low, " : "") +
                       "or fewer workers (batch.workers) (docs/pacing.md)"
                 : "fewer workers (batch.workers) or smaller chunks, or pacing.online_latency "
                   "to hold online latency near the baseline (docs/pacing.md)"});
  // The share objectives read alike: "X% <what>, objective at most/least Y% (by Z points)".
  auto share = [&](const char* objective, double measured, double limit, bool at_most,
                   const char* what, std::string remedy) {
    double by = at_most ? measured - limit : limit - measured;
    Check(out, by > 0,
          {.objective = objective,
           .limit = limit,
           .measured = measured,
           .text = fmt::format("{:.2f}% {}, objective at {} {:g}% (by {:.2f} points)", measured,
                               what, at_most ? "most" : "least", limit, by),
           .remedy = std::move(remedy)});
  };
  const std::string failed_text =
      "of online transactions failed during the batch (" + FailuresText(during_errors) + ")";
  share("max_error_rate", out.error_percent, o.max_error_percent, true, failed_text.c_str(),
        ErrorRemedy(during_errors));
  share("min_done_share", out.done_percent, o.min_done_percent, false, "of the items done",
        kDeferredRemedy);
  share("max_deferred_share", out.deferred_percent, o.max_deferred_percent, true,
        "of the items left deferred", kDeferredRemedy);
  return out;
}

std::string FailuresText(const std::map<std::string, long long>& by_kind) {
  std::vector<std::pair<std::string, long long>> kinds(by_kind.begin(), by_kind.end());
  std::stable_sort(kinds.begin(), kinds.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string text;
  for (const auto& [kind, n] : kinds) {
    if (n > 0) text += (text.empty() ? "" : ", ") + FailureText(kind, n);
  }
  return text.empty() ? "none" : text;
}

namespace {

// The policies that repeating the cells does not tell apart from the chosen
// one (the recommended one, among those that qualify; else the closest,
// among all): their online p99 ratios, the deciding figure, overlap over
// the repeats.
std::string Noise(const std::vector<PolicyOutcome>& outcomes, const PolicyOutcome& best) {
  if (best.repeats < 2) return "";
  auto range = [](const Spread& s) { return fmt::format("{:.2f}-{:.2f}x", s.min, s.max); };
  std::string others;
  for (const auto& o : outcomes) {
    if (o.Label() == best.Label() || (best.Qualifies() && !o.Qualifies()) || o.repeats < 2 ||
        !o.p99_ratio_spread.Overlaps(best.p99_ratio_spread)) {
      continue;
    }
    others +=
        fmt::format("{}{} ({})", others.empty() ? "" : ", ", o.Label(), range(o.p99_ratio_spread));
  }
  if (others.empty()) return "";
  return fmt::format(
      "Within the noise: over {} measurements the online p99 ratio of {} overlaps {}'s ({}), so "
      "the repeats do not tell them apart.",
      best.repeats, others, best.Label(), range(best.p99_ratio_spread));
}

// One sentence: why the recommended configuration wins, and what it costs
// in batch time against the fastest one measured at its level.
std::string WhyAndCost(const std::vector<PolicyOutcome>& outcomes, const PolicyOutcome& best) {
  int qualifying = 0;
  const PolicyOutcome* fastest = &best;
  for (const auto& o : outcomes) {
    qualifying += o.Qualifies();
    if (o.batch_seconds > 0 && o.batch_seconds < fastest->batch_seconds) fastest = &o;
  }
  std::string why = qualifying == 1 ? "It wins as the only configuration that meets them all"
                                    : fmt::format(
                                          "It wins among the {} that meet them all by the lowest "
                                          "online p99 (then errors, then batch time)",
                                          qualifying);
  if (fastest == &best || fastest->batch_seconds <= 0) {
    return why + ", and its batch is also the fastest measured here.";
  }
  std::string missed =
      fastest->Qualifies()
          ? "which also qualifies"
          : fmt::format("which missed {}",
                        fastest->misses.size() == 1
                            ? fastest->misses.front().objective
                            : std::to_string(fastest->misses.size()) + " objectives");
  return fmt::format(
      "{}; what it costs: its batch ran {:.2f}x as long as the fastest, {} ({:.1f} s, {}).", why,
      best.batch_seconds / fastest->batch_seconds, fastest->Label(), fastest->batch_seconds,
      missed);
}

}  // namespace

std::vector<Recommendation> Recommend(const std::vector<CellResult>& cells,
                                      const ScenarioSummary& scenario) {
  // The measurements of each cell: its repeats share the sweep cell.
  std::map<std::tuple<std::string, std::string, int>, std::vector<const CellResult*>> measured;
  for (const auto& cell : cells) {
    if (cell.check_of != 0) continue;
    int key = cell.sweep_cell != 0 ? cell.sweep_cell : -cell.index;
    measured[{cell.load_level, cell.policy, key}].push_back(&cell);
  }
  // Each policy and variant at each level; cells alike but for settings
  // nobody swept (built by hand) are one outcome: the preferred one.
  std::map<std::string, std::map<std::string, PolicyOutcome>> by_level;
  for (const auto& [key, repeats] : measured) {
    const auto& [level, policy, sweep_cell] = key;
    PolicyOutcome outcome = Judge(repeats, scenario);
    outcome.variant = VariantOf(*repeats.front());
    auto& slot = by_level[level];
    auto it = slot.find(outcome.Label());
    if (it == slot.end() || Preferred(outcome, it->second)) slot[outcome.Label()] = outcome;
  }
  std::vector<Recommendation> out;
  for (auto& [level, policies] : by_level) {
    Recommendation rec;
    rec.load_level = level;
    const PolicyOutcome* best = nullptr;
    const PolicyOutcome* closest = nullptr;
    for (auto& [name, outcome] : policies) {
      rec.outcomes.push_back(outcome);
      if (outcome.Qualifies() && (best == nullptr || Better(outcome, *best))) best = &outcome;
      if (closest == nullptr || Distance(outcome) < Distance(*closest)) closest = &outcome;
    }
    if (best != nullptr) {
      rec.recommended = best->Label();
      rec.reason = fmt::format(
          "{} meets every objective{}: the batch took {:.1f} s (window {:.0f} s), {:.2f}% of "
          "the items done, online p99 at {:.2f}x of before the batch and {:.2f}% online errors. "
          "{}",
          best->Label(),
          best->repeats > 1 ? fmt::format(" (medians of {} measurements)", best->repeats) : "",
          best->batch_seconds, best->window_seconds, best->done_percent, best->p99_ratio,
          best->error_percent, WhyAndCost(rec.outcomes, *best));
      rec.noise = Noise(rec.outcomes, *best);
      if (!rec.noise.empty()) rec.reason += " " + rec.noise;
    } else if (closest != nullptr) {
      std::string missed, remedies;
      for (const auto& m : closest->misses) {
        missed += (missed.empty() ? "" : "; ") + m.text;
        if (remedies.find(m.remedy) == std::string::npos) {
          remedies += (remedies.empty() ? "" : "; ") + m.remedy;
        }
      }
      rec.reason = fmt::format(
          "No policy meets every objective at this load. Closest: {}, which missed {} "
          "objective{}: {}. To qualify: {}.",
          closest->Label(), closest->misses.size(), closest->misses.size() == 1 ? "" : "s", missed,
          remedies);
      rec.noise = Noise(rec.outcomes, *closest);
      if (!rec.noise.empty()) rec.reason += " " + rec.noise;
    }
    out.push_back(std::move(rec));
  }
  return out;
}

}  // namespace coexist::capacity
