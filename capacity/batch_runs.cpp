#include "capacity/batch_runs.h"

#include <algorithm>

namespace coexist::capacity {
namespace {

double Since(BatchRuns::Clock::time_point start) {
  return std::chrono::duration<double>(BatchRuns::Clock::now() - start).count();
}

// Run `number`'s configuration: its own control socket when there are several.
config::Config ConfigOfRun(const config::Config& config, int number, int processes) {
  config::Config own = config;
  if (processes > 1 && !own.pacing.control_socket.empty())
    own.pacing.control_socket += "." + std::to_string(number);
  return own;
}

}  // namespace

BatchRuns::BatchRuns(const std::string& conninfo, const config::Config& config, int processes,
                     Clock::time_point cell_start, std::function<void()> on_all_done)
    : running_(processes),
      on_all_done_(std::move(on_all_done)),
      summaries_(static_cast<size_t>(processes)),
      start_seconds_(static_cast<size_t>(processes)),
      errors_(static_cast<size_t>(processes)) {
  for (int i = 0; i < processes; ++i) {
    threads_.emplace_back(
        [this, conninfo, cell_start, i, own = ConfigOfRun(config, i + 1, processes)] {
          auto at = static_cast<size_t>(i);
          start_seconds_[at] = Since(cell_start);
          try {
            summaries_[at] = batch::Run(conninfo, own, {.install = true, .stop = &stop_});
          } catch (...) {
            errors_[at] = std::current_exception();
          }
          if (--running_ == 0) on_all_done_();
        });
  }
}

void BatchRuns::Finish(CellResult& cell, double window_seconds) {
  for (auto& thread : threads_) thread.join();
  for (const auto& error : errors_) {
    if (error) std::rethrow_exception(error);
  }
  cell.batch_processes = static_cast<int>(summaries_.size());
  double first_start = start_seconds_.front(), last_end = 0, longest_run = 0;
  bool drained = true;
  long long revoked = 0;
  for (size_t i = 0; i < summaries_.size(); ++i) {
    const auto& s = summaries_[i];
    cell.runs.push_back({.run_id = s.run_id,
                         .done = s.counts.done,
                         .deferred = s.counts.deferred,
                         .dead = s.counts.dead,
                         .start_seconds = start_seconds_[i],
                         .seconds = s.seconds,
                         .stop_reason = s.stop_reason});
    first_start = std::min(first_start, start_seconds_[i]);
    last_end = std::max(last_end, start_seconds_[i] + s.seconds);
    longest_run = std::max(longest_run, s.seconds);
    drained = drained && s.stop_reason == StopReason::kDrained;
    revoked += s.counts.revoked;
  }
  // One run: its own measure, as `batch run` prints it. Several: from the
  // first start to the last end, never shorter than the longest run
  // ((start + s) - start can round below s).
  cell.batch_seconds = summaries_.size() == 1 ? summaries_.front().seconds
                                              : std::max(last_end - first_start, longest_run);
  cell.revocations = std::max(cell.revocations, revoked);
  cell.batch_finished = drained;
  cell.latency = summaries_.front().latency;
  cell.finished_in_window = drained && cell.batch_seconds <= window_seconds;
}

}  // namespace coexist::capacity
