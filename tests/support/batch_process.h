#pragma once

// `coexist batch run` as a child process, for the tests that stop, kill -9
// or race it (batch_crash_test, range_job_test).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "common/subprocess.h"

namespace coexist::testing {

// The exit status of `pid`, or nullopt when it is still running after `timeout`.
inline std::optional<int> WaitForExitWithin(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return 255;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

// `coexist batch run` of `config` against `conninfo`, its output to
// `log_path`; killed with the test process.
inline pid_t StartBatchRun(const std::string& conninfo, const std::string& config,
                           const std::string& log_path) {
  SpawnOptions options;
  options.argv = {COEXIST_BINARY, "--database-url", conninfo, "--config", config, "batch", "run"};
  options.output_path = log_path;
  options.parent_death_signal = SIGKILL;
  return Spawn(options);
}

// Until `done()` (at most `timeout`): a condition, never a fixed sleep.
inline bool WaitUntil(const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

inline void KillNine(pid_t pid) {
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  EXPECT_EQ(WaitForExit(pid), 128 + SIGKILL);
}

}  // namespace coexist::testing
