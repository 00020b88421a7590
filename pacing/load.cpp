#include "pacing/load.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "config_core/duration.h"

namespace coexist::pacing {
namespace {

using std::chrono::milliseconds;

void Check(std::vector<Trip>& out, const char* name, double value, double threshold) {
  if (threshold > 0 && value >= threshold) out.push_back({name, value, threshold});
}

std::optional<int> ParseCount(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > 100000) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

std::vector<Trip> Evaluate(const Signals& s, const config::LoadThresholds& t,
                           bool with_throttle_query) {
  std::vector<Trip> trips;
  Check(trips, "lock_waiters", s.lock_waiters, t.lock_waiters);
  Check(trips, "active_sessions", s.active_sessions, t.active_sessions);
  Check(trips, "replication_lag", s.replication_lag.count(), t.replication_lag.count());
  Check(trips, "vacuum", s.vacuum, t.vacuum);
  Check(trips, "batch_lock_wait", s.batch_lock_wait.count(), t.batch_lock_wait.count());
  Check(trips, "statement_latency", s.statement_latency.count(), t.statement_latency.count());
  if (with_throttle_query && s.throttle_query && *s.throttle_query > 0) {
    trips.push_back({"throttle_query", *s.throttle_query, 0});
  }
  return trips;
}

std::string ReasonOf(const std::vector<Trip>& trips) {
  std::string reason;
  for (const auto& trip : trips) {
    if (!reason.empty()) reason += ',';
    reason += trip.signal;
  }
  return reason;
}

nlohmann::json SignalsToJson(const Signals& s) {
  nlohmann::json j = {{"lock_waiters", s.lock_waiters},
                      {"active_sessions", s.active_sessions},
                      {"replicas", s.replicas},
                      {"replication_lag_ms", s.replication_lag.count()},
                      {"vacuum", s.vacuum},
                      {"batch_lock_wait_ms", s.batch_lock_wait.count()},
                      {"statement_latency_ms", s.statement_latency.count()}};
  if (s.throttle_query) j["throttle_query"] = *s.throttle_query;
  return j;
}

nlohmann::json ThresholdsToJson(const config::LoadThresholds& t) {
  return {{"lock_waiters", t.lock_waiters},
          {"active_sessions", t.active_sessions},
          {"replication_lag_ms", t.replication_lag.count()},
          {"vacuum", t.vacuum},
          {"batch_lock_wait_ms", t.batch_lock_wait.count()},
          {"statement_latency_ms", t.statement_latency.count()}};
}

std::string ApplyThresholdSetting(std::string_view setting, config::LoadThresholds& t) {
  std::string_view name = "lock_waiters";
  std::string_view value = setting;
  if (auto eq = setting.find('='); eq != std::string_view::npos) {
    name = setting.substr(0, eq);
    value = setting.substr(eq + 1);
  }
  // Appended, not "'" + std::string(value) + ...: GCC 12 at -O3 reports a
  // false -Wrestrict inside that concatenation.
  std::string bad = "'";
  bad.append(value).append("' is not a valid value for ").append(name);
  if (name == "lock_waiters" || name == "active_sessions" || name == "vacuum") {
    auto count = ParseCount(value);
    if (!count) return bad + " (a count 0..100000)";
    (name == "lock_waiters" ? t.lock_waiters
     : name == "vacuum"     ? t.vacuum
                            : t.active_sessions) = *count;
    return "";
  }
  if (name == "replication_lag" || name == "batch_lock_wait" || name == "statement_latency") {
    auto parsed = config::ParseDuration(value);
    if (!parsed || *parsed > std::chrono::hours(24)) return bad + " (a duration such as 5s)";
    auto ms = std::chrono::duration_cast<milliseconds>(*parsed);
    (name == "replication_lag"   ? t.replication_lag
     : name == "batch_lock_wait" ? t.batch_lock_wait
                                 : t.statement_latency) = ms;
    return "";
  }
  return "unknown signal '" + std::string(name) +
         "' (lock_waiters, active_sessions, replication_lag, vacuum, batch_lock_wait, "
         "statement_latency)";
}

}  // namespace coexist::pacing
