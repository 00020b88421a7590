#include "dashboard/history.h"

namespace coexist::dashboard {

void History::Add(Clock::time_point at, const std::vector<Sample>& samples) {
  std::lock_guard lock(mutex_);
  for (const auto& s : samples) {
    if (!s.latency_ratio && !s.items_per_second) continue;
    points_[s.job].push_back({at, s.latency_ratio, s.items_per_second});
  }
  for (auto job = points_.begin(); job != points_.end();) {
    auto& points = job->second;
    while (!points.empty() && at - points.front().at > span_) points.pop_front();
    job = points.empty() ? points_.erase(job) : std::next(job);
  }
}

nlohmann::json History::Json(Clock::time_point now) const {
  std::lock_guard lock(mutex_);
  auto out = nlohmann::json::object();
  auto value = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nullptr; };
  for (const auto& [job, points] : points_) {
    auto& series = out[job] = nlohmann::json::array();
    for (const auto& p : points) {
      double ago = std::chrono::duration<double>(now - p.at).count();
      series.push_back({ago, value(p.latency_ratio), value(p.items_per_second)});
    }
  }
  return out;
}

}  // namespace coexist::dashboard
