#pragma once

// Random choices of the simulator: which record, how long a user thinks.
// Pure logic, deterministic for a given generator state. Not thread-safe.

#include <chrono>
#include <cstdint>
#include <random>

#include "config/config.h"

namespace coexist::online_sim {

using Random = std::mt19937_64;

// Picks a record index in [0, count).
//  uniform: every record alike;
//  zipf: index i with probability proportional to 1/(i+1)^s (rejection-
//    inversion sampling, no table, so any count works);
//  hot_set: `hot_traffic` of the picks go to the first `hot_keys` share of
//    the records (at least one), the rest to the others.
// Low indexes are the hot ones: the first keys of the target in key order.
class KeyChooser {
 public:
  // Throws std::invalid_argument when count is 0.
  KeyChooser(const config::OnlineConfig& config, uint64_t count);
  uint64_t Next(Random& random) const;

 private:
  double H(double x) const;
  double HIntegral(double x) const;
  double HIntegralInverse(double x) const;
  uint64_t NextZipf(Random& random) const;

  config::KeyDistribution shape_;
  uint64_t count_;
  double s_ = 1;
  double hot_traffic_ = 0;
  uint64_t hot_count_ = 0;
  // Zipf sampler constants.
  double h_integral_x1_ = 0;
  double h_integral_n_ = 0;
  double squeeze_ = 0;
};

// A closed-model user's think time: fixed, exponential or lognormal with the
// configured mean (lognormal's sigma from think_sigma).
class ThinkTime {
 public:
  explicit ThinkTime(const config::OnlineConfig& config)
      : ThinkTime(config.think_distribution, config.think_time, config.think_sigma) {}
  ThinkTime(config::ThinkDistribution shape, std::chrono::milliseconds mean, double sigma);
  std::chrono::microseconds Next(Random& random) const;

 private:
  config::ThinkDistribution shape_;
  double mean_us_;
  double sigma_;
};

// Capped exponential backoff with full jitter (AWS architecture blog):
// uniform in [0, min(cap, base * 2^retry)].
std::chrono::microseconds Backoff(std::chrono::milliseconds base, std::chrono::milliseconds cap,
                                  int retry, Random& random);

}  // namespace coexist::online_sim
