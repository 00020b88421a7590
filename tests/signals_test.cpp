// common/signals: the watcher thread and the handlers' lifetimes. Its own
// binary, because Install() blocks the signals for the whole process.

#include "common/signals.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

namespace coexist::signals {
namespace {

using namespace std::chrono_literals;

bool WaitFor(const std::atomic<bool>& flag, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!flag && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  return flag;
}

// A daemon's handler wakes the daemon's main loop; when the loop ends, the
// daemon (and what the callback touches) is destroyed right after the
// Handler. A callback still running then would use freed state.
TEST(Handler, DestructorWaitsForItsRunningCallback) {
  Install();
  std::atomic<bool> entered{false};
  std::atomic<bool> release{false};
  std::atomic<bool> finished{false};
  auto handler = std::make_unique<Handler>([&](int) {
    entered = true;
    WaitFor(release, 5000ms);
    finished = true;
  });
  ASSERT_EQ(kill(getpid(), SIGHUP), 0);
  ASSERT_TRUE(WaitFor(entered, 5000ms)) << "the watcher never called the handler";
  std::jthread releaser([&release] {
    std::this_thread::sleep_for(100ms);
    release = true;
  });
  handler.reset();
  EXPECT_TRUE(finished) << "~Handler returned while its callback was still running";
}

// A throwaway cluster's cleanup kills the server and removes the folder on
// the watcher thread, while the main thread, whose connection just broke,
// unwinds and destroys the cluster. ~Cleanup must not return (and free what
// the cleanup uses) before the process exits.
TEST(Cleanup, DestructorDoesNotReturnWhileCleanupsRun) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Install();
        std::atomic<bool> entered{false};
        auto cleanup = std::make_unique<Cleanup>([&entered] {
          entered = true;
          std::this_thread::sleep_for(200ms);
          fputs("cleanup finished\n", stderr);
        });
        kill(getpid(), SIGTERM);
        WaitFor(entered, 5000ms);
        cleanup.reset();
        fputs("~Cleanup returned\n", stderr);
        std::_Exit(1);
      },
      testing::ExitedWithCode(128 + SIGTERM), "^cleanup finished\n$");
}

}  // namespace
}  // namespace coexist::signals
