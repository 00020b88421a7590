#include "policies/time_window.h"

#include <date/tz.h>

#include <sstream>

#include "config_core/yaml_reader.h"

namespace coexist::policies {
namespace {

using std::chrono::hours;
using std::chrono::system_clock;

// "01:00" -> 60 minutes; 00:00 to 24:00.
std::chrono::minutes ParseClock(config::Section& s, const YAML::Node& node, std::string_view key) {
  std::string text = s.ScalarText(node, key);
  int h = -1;
  int m = -1;
  char colon = 0;
  std::istringstream in(text);
  bool ok = static_cast<bool>(in >> h >> colon >> m) && colon == ':' && in.peek() == EOF;
  if (!ok || h < 0 || h > 24 || m < 0 || m > 59 || (h == 24 && m != 0)) {
    s.Fail(node, key, "'" + text + "' is not a time of day", "write HH:MM, e.g. 01:30.");
  }
  return std::chrono::minutes(h * 60 + m);
}

int ParseWeekday(config::Section& s, const YAML::Node& node, std::string_view key) {
  static const char* const kNames[] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};
  std::string text = s.ScalarText(node, key);
  for (int i = 0; i < 7; ++i) {
    if (text == kNames[i] || text == std::to_string(i + 1)) return i + 1;
  }
  s.Fail(node, key, "'" + text + "' is not a weekday", "write mon, tue, ... sun (or 1..7).");
}

void ReadWindow(config::Section& w, const YAML::Node& node, Window& out) {
  w.String("time_zone", out.time_zone);
  if (node["time_zone"].IsDefined()) {
    try {
      date::locate_zone(out.time_zone);
    } catch (const std::exception&) {
      w.Fail(node["time_zone"], "time_zone", "unknown time zone '" + out.time_zone + "'",
             "use an IANA name such as Asia/Tokyo or UTC.");
    }
  }
  std::string unused;
  w.String("start", unused);  // marks the keys known; parsed with their marks below
  w.String("end", unused);
  if (node["start"].IsDefined()) out.start = ParseClock(w, node["start"], "start");
  if (node["end"].IsDefined()) out.end = ParseClock(w, node["end"], "end");
  if (auto days = w.Sequence("weekdays")) {
    out.weekdays.clear();
    for (const auto& day : *days) out.weekdays.push_back(ParseWeekday(w, day, "weekdays"));
    if (out.weekdays.empty()) {
      w.Fail(*days, "weekdays", "the list is empty", "name at least one day.");
    }
  }
  w.Finish();
}

// The window starting on local day `day` (a local midnight), if its weekday
// is listed: [start, end) in system time.
std::optional<std::pair<system_clock::time_point, system_clock::time_point>> WindowOn(
    const Window& window, const date::time_zone* zone, date::local_days day) {
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

TimeWindow::Options TimeWindow::ReadOptions(config::Section& s, const ReadContext& /*context*/) {
  Options out;
  if (auto list = s.Sequence("windows")) {
    int index = 0;
    for (const auto& item : *list) {
      std::string path = s.KeyPath("windows") + "[" + std::to_string(index++) + "]";
      if (!item.IsMap())
        s.Fail(item, "windows", "each window must be a map (time_zone, start, end)");
      config::Section w(item, path, s.file());
      out.windows.emplace_back();
      ReadWindow(w, item, out.windows.back());
    }
  }
  if (out.windows.empty()) {
    s.Fail(s.node(), "windows", "time_window needs at least one window",
           "add windows: [{time_zone: UTC, start: \"01:00\", end: \"05:00\"}].");
  }
  s.Duration("drain_margin", out.drain_margin, milliseconds(0), hours(24));
  WindowMode mode = WindowMode::kReadOnly;
  s.Enum("mode", mode, {{"read_only", WindowMode::kReadOnly}, {"allow", WindowMode::kAllow}});
  bool between_runs = false;
  s.Bool("read_only_between_runs", between_runs);
  for (auto& window : out.windows) {
    window.mode = mode;
    window.between_runs = between_runs;
  }
  s.Duration("max_wait", out.max_wait, milliseconds(0), hours(24));
  s.Bool("release_when_done", out.release_when_done);
  return out;
}

WindowState EvaluateWindows(const std::vector<Window>& windows, system_clock::time_point now) {
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
  WindowState state = EvaluateWindows(options_.windows, now);
  ClaimGate gate;
  if (!state.active) {
    gate.allowed = false;
    gate.reason = StopReason::kOutsideWindow;
    return gate;
  }
  gate.stop_at = state.ends_at - options_.drain_margin;
  if (now >= gate.stop_at) {
    gate.allowed = false;
    gate.reason = StopReason::kDrainMargin;
  }
  return gate;
}

Decision TimeWindow::Decide(const RecordFacts& facts) const {
  if (facts.edit_locked) return {Action::kDefer, "edit_locked"};
  if (!facts.row_locked) return {Action::kApply};
  if (facts.waited >= options_.max_wait) return {Action::kDefer, "max_wait"};
  return {Action::kWaitRowLock, "", NextStep(config_, facts.waited)};
}

}  // namespace coexist::policies
