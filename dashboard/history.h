#pragma once

// The dashboard's charts over the last minutes: each job's online latency
// (the ratio its paced runs measure) and its rate, sampled by the server
// every few seconds whether a page is open or not, so that a page opened now
// draws the last ten minutes at once instead of starting empty (its own
// polls begin when it opens).
//
// Pure: the caller gives the time of each sample and of each read (the
// server: its steady clock). The page gets ages ("seconds ago"), never
// timestamps, so the server's and the browser's clocks need not agree.
//
// Thread safety: Add and Json may be called from any threads.

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace coexist::dashboard {

class History {
 public:
  using Clock = std::chrono::steady_clock;

  // One job's figures at one sample; a job with neither is not kept.
  struct Sample {
    std::string job;
    std::optional<double> latency_ratio;     // db::JobRow::online_latency_ratio
    std::optional<double> items_per_second;  // db::JobRow::Rate()
  };

  explicit History(std::chrono::seconds span = std::chrono::minutes(10)) : span_(span) {}

  // Keeps `samples` as taken at `at`; points older than the span before
  // `at` go, and a job without points goes with them.
  void Add(Clock::time_point at, const std::vector<Sample>& samples);

  // {"job": [[seconds_ago, latency_ratio|null, items_per_second|null], ...]},
  // oldest first, ages from `now`.
  nlohmann::json Json(Clock::time_point now) const;

 private:
  struct Point {
    Clock::time_point at;
    std::optional<double> latency_ratio;
    std::optional<double> items_per_second;
  };
  const std::chrono::seconds span_;
  mutable std::mutex mutex_;
  std::map<std::string, std::deque<Point>> points_;
};

}  // namespace coexist::dashboard
