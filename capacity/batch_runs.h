#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "batch/runner.h"
#include "capacity/cell_result.h"
#include "config/config.h"

namespace coexist::capacity {

// A cell's batch: `processes` runs of the job (scenario.batch_processes)
// started at once, each batch::Run on a thread of its own. Each call has
// its own connections, stop flag, pacer and runs row, as separate `batch
// run` processes would; with more than one, the config's batch.runs is
// shared (config/scenario.cpp sees to it) and a control socket gets the
// run's number appended, as shards' runs get their name.
//
// Thread safety: construct, Stop() and Finish() from one thread;
// `on_all_done` is called once, on the thread of the run that returned last.
class BatchRuns {
 public:
  using Clock = std::chrono::steady_clock;

  BatchRuns(const std::string& conninfo, const config::Config& config, int processes,
            Clock::time_point cell_start, std::function<void()> on_all_done);
  ~BatchRuns() { Stop(); }
  BatchRuns(const BatchRuns&) = delete;
  BatchRuns& operator=(const BatchRuns&) = delete;

  // Every run stops claiming; chunks in flight finish.
  void Stop() { stop_ = true; }

  // Waits for every run, then writes their figures into the cell: the
  // shares, the batch's seconds (one run's own, or from the first start to
  // the last end), finished (every run drained) and finished in `window`,
  // the revocations, the latency objective (the first run's). Rethrows the
  // first run's error, after all of them have ended.
  void Finish(CellResult& cell, double window_seconds);

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> running_;
  std::function<void()> on_all_done_;
  std::vector<batch::RunSummary> summaries_;
  std::vector<double> start_seconds_;  // since the cell's start
  std::vector<std::exception_ptr> errors_;
  std::vector<std::jthread> threads_;  // last: joined before the rest goes
};

}  // namespace coexist::capacity
