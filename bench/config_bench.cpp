// Configuration loading benchmark (not a test): the time to check a map of
// N keys, for 10,000 and 80,000 keys, and their ratio. Linear checking gives
// a ratio near 8; a scan of the earlier keys per key (how duplicate keys
// were once found) gives one near 64, and lets a large file stall the check.
//
//   build/bench/config_bench [--small 10000] [--large 80000] [--rounds 3]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "bench/bench_cli.h"
#include "config/config.h"
#include "config_core/config_error.h"

namespace {

using namespace coexist;

// A `batch:` map of `keys` distinct keys; none is known, so the load ends
// with "unknown key" after every key was indexed and checked.
std::string Yaml(int keys) {
  std::string yaml = "batch:\n";
  for (int i = 0; i < keys; ++i) yaml += "  k" + std::to_string(i) + ": 1\n";
  return yaml;
}

// The best of `rounds` loads, in seconds.
double Seconds(const std::string& yaml, int rounds) {
  double best = 1e9;
  for (int r = 0; r < rounds; ++r) {
    auto started = std::chrono::steady_clock::now();
    try {
      config::LoadString(yaml, "bench.yaml");
    } catch (const config::ConfigError&) {
      // expected: the keys are unknown
    }
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int small = 10'000;
  int large = 80'000;
  int rounds = 3;
  CLI::App app{
      "Configuration loading benchmark: the time to check a map of --small against "
      "--large keys (docs/configuration.md)."};
  app.add_option("--small", small, "keys of the small map (default 10000)")
      ->check(CLI::Range(1, 100'000'000));
  app.add_option("--large", large, "keys of the large map (default 80000)")
      ->check(CLI::Range(1, 100'000'000));
  app.add_option("--rounds", rounds, "loads of each map, the best kept (default 3)")
      ->check(CLI::Range(1, 1000));
  bench::ParseOrExit(app, argc, argv);
  double t_small = Seconds(Yaml(small), rounds);
  double t_large = Seconds(Yaml(large), rounds);
  std::printf("keys %7d: %8.3f s\n", small, t_small);
  std::printf("keys %7d: %8.3f s\n", large, t_large);
  std::printf("ratio %.1f for %.0fx the keys (linear: about %.0f)\n", t_large / t_small,
              static_cast<double>(large) / small, static_cast<double>(large) / small);
  return 0;
}
