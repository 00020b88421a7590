#include "policies/time_window.h"

#include <date/tz.h>

namespace coexist::policies {
namespace {

using std::chrono::system_clock;

// The window starting on local day `day` (a local midnight), if its weekday
// is listed: [start, end) in system time.
std::optional<std::pair<system_clock::time_point, system_clock::time_point>> WindowOn(
    const config::WindowConfig& window, const date::time_zone* zone, date::local_days day) {
  unsigned iso = date::weekday(day).iso_encoding();
  bool listed = false;
  for (int d : window.weekdays) listed = listed || static_cast<unsigned>(d) == iso;
  if (!listed) return std::nullopt;
  auto length = window.end > window.start ? window.end - window.start
                                          : window.end - window.start + std::chrono::hours(24);
  auto start_local = day + window.start;
  // choose::latest/earliest keep DST gaps and folds from throwing.
  auto start = zone->to_sys(start_local, date::choose::earliest);
  auto end = zone->to_sys(start_local + length, date::choose::earliest);
  return std::make_pair(system_clock::time_point(start), system_clock::time_point(end));
}

}  // namespace

WindowState EvaluateWindows(const std::vector<config::WindowConfig>& windows,
                            system_clock::time_point now) {
  WindowState state;
  for (const auto& window : windows) {
    const date::time_zone* zone = date::locate_zone(window.time_zone);
    auto local = zone->to_local(now);
    auto today = date::floor<date::days>(local);
    // A window that started yesterday may still run (22:00-02:00).
    for (auto day : {today - date::days(1), today}) {
      auto span = WindowOn(window, zone, day);
      if (span && span->first <= now && now < span->second) {
        state.active = true;
        state.ends_at = std::max(state.ends_at, span->second);
      }
    }
  }
  return state;
}

ClaimGate TimeWindow::MayClaim(system_clock::time_point now) const {
  WindowState state = EvaluateWindows(config_.windows, now);
  ClaimGate gate;
  if (!state.active) {
    gate.allowed = false;
    gate.reason = "outside_window";
    return gate;
  }
  gate.stop_at = state.ends_at - config_.drain_margin;
  if (now >= gate.stop_at) {
    gate.allowed = false;
    gate.reason = "drain_margin";
  }
  return gate;
}

Decision TimeWindow::Decide(const RecordFacts& facts) const {
  if (facts.edit_locked) return {Action::kDefer, "edit_locked"};
  if (!facts.row_locked) return {Action::kApply};
  if (facts.waited >= config_.max_wait) return {Action::kDefer, "max_wait"};
  return {Action::kWaitRowLock, "", NextStep(config_, facts.waited)};
}

}  // namespace coexist::policies
