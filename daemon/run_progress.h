#pragma once

// Live counts of the run this process has in progress, for systemd's
// STATUS= while batch::Run blocks the daemon's main thread: a thread reads
// the run's `runs` row (its heartbeat refreshes the counts once a second)
// every `interval` on a connection of its own and hands them to `publish`.
// A failed read is skipped (the run itself reports a lost database).
//
// Thread safety: `publish` runs on the object's thread; the destructor
// stops and joins it.

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace coexist::daemon {

struct RunCounts {
  long long run_id = 0;
  long long done = 0;
  long long deferred = 0;
  long long dead = 0;
};

class RunProgress {
 public:
  RunProgress(std::string conninfo, std::string job, std::chrono::milliseconds interval,
              std::function<void(const RunCounts&)> publish);
  ~RunProgress();
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;

 private:
  void Watch(std::stop_token stop);

  std::string conninfo_;
  std::string job_;
  std::chrono::milliseconds interval_;
  std::function<void(const RunCounts&)> publish_;
  std::jthread thread_;
};

}  // namespace coexist::daemon
