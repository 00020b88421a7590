#pragma once

// Helpers shared by the operations tests (ops_test.cpp, daemon_test.cpp):
// the coexist executable as a subprocess with its own environment, polling
// for a condition with a deadline, and a time_window policy relative to the
// current hour. The Prometheus parser is tests/support/exposition.h.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "tests/support/exposition.h"

namespace coexist::ops_test {

using testing::ParseExposition;

using namespace std::chrono_literals;

inline std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Starts `coexist args...` with `env` (NAME=value) added to the environment;
// stdout and stderr go to `log`. The child dies with the test (SIGKILL).
inline pid_t StartCoexist(const std::vector<std::string>& env, const std::vector<std::string>& args,
                          const std::filesystem::path& log) {
  SpawnOptions options;
  options.argv = {"/usr/bin/env"};
  options.argv.insert(options.argv.end(), env.begin(), env.end());
  options.argv.push_back(COEXIST_BINARY);
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.output_path = log.string();
  options.parent_death_signal = SIGKILL;
  return Spawn(options);
}

// Polls `done` every 20 ms until it holds or `timeout` passes.
inline bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// A time_window policy whose window starts `from_now` hours from now and
// lasts `hours` (UTC, every day, no drain margin).
inline std::string WindowPolicy(int from_now, int hours) {
  auto now = std::chrono::system_clock::now();
  int hour = static_cast<int>(
      std::chrono::duration_cast<std::chrono::hours>(now.time_since_epoch()).count() % 24);
  auto clock = [](int h) {
    char text[8];
    std::snprintf(text, sizeof(text), "%02d:00", ((h % 24) + 24) % 24);
    return std::string(text);
  };
  return "policy:\n  name: time_window\n  drain_margin: 0s\n  windows:\n    - {time_zone: UTC, "
         "start: \"" +
         clock(hour + from_now) + "\", end: \"" + clock(hour + from_now + hours) + "\"}\n";
}

}  // namespace coexist::ops_test
