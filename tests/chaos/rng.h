#pragma once

// The chaos suite's random choices. Every iteration has its own generator,
// derived from the run's --seed, the fault's name and the iteration number,
// so `--seed S --faults F` replays F's choices whatever other faults run.

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace coexist::chaos {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  static std::uint64_t Derive(std::uint64_t seed, const std::string& fault, int iteration) {
    // splitmix64 over the three parts: nearby seeds give unrelated streams.
    std::uint64_t x = seed ^ (std::hash<std::string>{}(fault)*0x9e3779b97f4a7c15ull) ^
                      (static_cast<std::uint64_t>(iteration) << 32);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }

  // Uniform in [lo, hi].
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(engine_); }
  double Real(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(engine_);
  }
  bool Chance(double p) { return Real(0, 1) < p; }
  std::chrono::milliseconds Ms(int lo, int hi) { return std::chrono::milliseconds(Int(lo, hi)); }
  template <class T>
  const T& Pick(const std::vector<T>& from) {
    return from[static_cast<std::size_t>(Int(0, static_cast<int>(from.size()) - 1))];
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace coexist::chaos
