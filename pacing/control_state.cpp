#include "pacing/control_state.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "config_core/duration.h"
#include "pacing/chunk_sizer.h"
#include "pacing/load.h"

namespace coexist::pacing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr const char* kCommands =
    "commands: status, pause, resume, stop, chunk-time=DURATION (e.g. 250ms), chunk-size=N, "
    "max-load=N or max-load=SIGNAL=VALUE";

std::string Error(const std::string& message, const std::string& hint = kCommands) {
  return json{{"ok", false}, {"error", message}, {"hint", hint}}.dump();
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

std::string ControlState::Handle(std::string_view raw) {
  std::string_view line = Trim(raw);
  std::string_view name = line;
  std::string_view value;
  bool has_value = false;
  if (auto eq = line.find('='); eq != std::string_view::npos) {
    name = line.substr(0, eq);
    value = line.substr(eq + 1);
    has_value = true;
  }
  std::lock_guard lock(mutex_);
  if (!has_value && line == "status") return StatusJson();
  if (!has_value && (line == "pause" || line == "resume")) {
    paused_ = line == "pause";
    spdlog::info("operator command command={}", line);
    Changed();
    return json{{"ok", true}, {"paused", paused_}}.dump();
  }
  if (!has_value && line == "stop") {
    if (!stop_) stop_reason_ = StopReason::kOperator;
    stop_ = true;
    spdlog::info("operator command command=stop");
    Changed();
    return json{{"ok", true}, {"stopping", true}}.dump();
  }
  if (has_value && name == "chunk-time") {
    auto parsed = config::ParseDuration(value);
    if (!parsed || *parsed < milliseconds(1) || *parsed > std::chrono::hours(1)) {
      // fmt, not "'" + std::string(value) + ...: GCC 12 at -O3 reports a false
      // -Wrestrict inside that concatenation.
      return Error(fmt::format("'{}' is not a chunk time", value),
                   "write a duration from 1ms to 1h, e.g. chunk-time=250ms.");
    }
    auto target = std::chrono::duration_cast<milliseconds>(*parsed);
    sizing_ = SizingOverride{.chunk_time = target};
    spdlog::info("operator command command=chunk-time value={}ms", target.count());
    Changed();
    return json{{"ok", true}, {"adaptive", true}, {"chunk_time_ms", target.count()}}.dump();
  }
  if (has_value && name == "chunk-size") {
    int size = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), size);
    if (ec != std::errc() || end != value.data() + value.size() || size < 1 ||
        size > kMaxChunkSize) {
      return Error(fmt::format("'{}' is not a chunk size", value),
                   "write a whole number from 1 to " + std::to_string(kMaxChunkSize) + ".");
    }
    sizing_ = SizingOverride{.chunk_size = size};
    spdlog::info("operator command command=chunk-size value={}", size);
    Changed();
    return json{{"ok", true}, {"adaptive", false}, {"chunk_size", size}}.dump();
  }
  if (has_value && name == "max-load") {
    config::LoadThresholds updated = max_load_;
    std::string problem = ApplyThresholdSetting(value, updated);
    if (!problem.empty()) return Error(problem, "e.g. max-load=20 or max-load=replication_lag=5s.");
    max_load_ = updated;
    spdlog::info("operator command command=max-load value={}", log::Value(value));
    Changed();
    return json{{"ok", true}, {"max_load", ThresholdsToJson(max_load_)}}.dump();
  }
  std::string shown(line.substr(0, 80));
  return Error(shown.empty() ? "empty command" : "unknown command '" + shown + "'");
}

std::string ControlState::StatusJson() const {
  const auto& s = status_;
  json j = {{"ok", true},
            {"state", stop_                                             ? "stopping"
                      : (paused_ || job_pause_) && s.state == "running" ? "pausing"
                                                                        : s.state},
            {"reason", s.reason},
            {"paused", paused_},
            {"job_paused", job_pause_.has_value()},
            {"stop_requested", stop_},
            {"done", s.done},
            {"total", s.total ? json(*s.total) : json(nullptr)},
            {"rate", s.rate},
            {"adaptive", s.adaptive},
            {"chunk_size", s.chunk_size},
            {"chunk_time_ms", s.chunk_time.count()},
            {"max_load", ThresholdsToJson(max_load_)},
            {"signals", json::parse(s.signals_json, nullptr, false)}};
  if (!s.latency_json.empty()) j["online_latency"] = json::parse(s.latency_json, nullptr, false);
  if (s.total && s.rate > 0) {
    j["eta_seconds"] = std::max<double>(0, (*s.total - s.done) / s.rate);
  } else {
    j["eta_seconds"] = nullptr;
  }
  return j.dump();
}

void ControlState::Changed() {
  ++generation_;
  changed_.notify_all();
}

void ControlState::RequestPause(bool paused) {
  std::lock_guard lock(mutex_);
  paused_ = paused;
  Changed();
}

void ControlState::RequestStop(StopReason reason) {
  std::lock_guard lock(mutex_);
  if (!stop_) stop_reason_ = reason;
  stop_ = true;
  Changed();
}

bool ControlState::paused() const {
  std::lock_guard lock(mutex_);
  return paused_;
}

void ControlState::SetJobPause(std::optional<db::JobPause> pause) {
  std::lock_guard lock(mutex_);
  bool changed = !job_pause_read_ || pause.has_value() != job_pause_.has_value();
  job_pause_ = std::move(pause);
  job_pause_read_ = true;
  if (changed) Changed();
}

ControlState::JobPauseState ControlState::job_pause() const {
  std::lock_guard lock(mutex_);
  return {.read = job_pause_read_, .pause = job_pause_};
}

bool ControlState::stop_requested() const {
  std::lock_guard lock(mutex_);
  return stop_;
}

std::optional<StopReason> ControlState::stop_reason() const {
  std::lock_guard lock(mutex_);
  return stop_reason_;
}

config::LoadThresholds ControlState::max_load() const {
  std::lock_guard lock(mutex_);
  return max_load_;
}

std::optional<SizingOverride> ControlState::TakeSizingOverride() {
  std::lock_guard lock(mutex_);
  return std::exchange(sizing_, std::nullopt);
}

void ControlState::Publish(const StatusSnapshot& status) {
  std::lock_guard lock(mutex_);
  // Progress belongs to the runner (PublishProgress); keep it.
  long long done = status_.done;
  auto total = status_.total;
  double rate = status_.rate;
  status_ = status;
  status_.done = done;
  status_.total = total;
  status_.rate = rate;
}

StatusSnapshot ControlState::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

void ControlState::PublishProgress(long long done, std::optional<long long> total, double rate) {
  std::lock_guard lock(mutex_);
  status_.done = done;
  status_.total = total;
  status_.rate = rate;
}

unsigned long long ControlState::generation() const {
  std::lock_guard lock(mutex_);
  return generation_;
}

void ControlState::WaitForChange(unsigned long long seen, milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return generation_ != seen; });
}

}  // namespace coexist::pacing
