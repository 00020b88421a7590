#pragma once

// The batch runner's one entry point into pacing.
//
// Runner contract (docs/pacing.md has the full loop):
//
//   pacing::Pacer pacer(pacing::PacerOptionsFrom(config, server.conninfo()));
//   pacer.SetRunId(run_id);                      // once the runs row exists
//   while (auto size = pacer.BeforeChunk()) {    // blocks while paused/throttled
//     auto items = Claim(*size);                 // claim at most *size items
//     if (items.empty()) break;                  // queue drained
//     auto start = steady_clock::now();
//     Outcome outcome = Apply(items);            // one transaction
//     pacer.AfterChunk({.items = n, .took = elapsed, .hit_timeout = outcome.timed_out,
//                       .lock_wait = outcome.lock_wait});
//     if (outcome.timed_out) {                   // 55P03 or 57014
//       int piece = pacing::SplitOnTimeout(n);   // retry once, in halves
//       for (each piece of `piece` items) {
//         Outcome again = Apply(piece_items);
//         pacer.AfterChunk({...});               // timed out again: defer or count
//       }                                        // an attempt, never split further
//     }
//     pacer.PublishStatus(done, total, rate);
//   }
//   // nullopt: stop requested (socket, stop file, critical load). The chunk
//   // that ran last has committed; nothing is claimed. End the run cleanly.
//
// BeforeChunk is the only place pacing decides, so a `pause` takes effect
// before the next chunk starts: within one chunk.

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/stop_reason.h"
#include "config/config.h"
#include "config_core/target.h"
#include "pacing/chunk_sizer.h"
#include "pacing/control_state.h"
#include "pacing/latency_summary.h"

namespace coexist::pacing {

struct PacerOptions {
  config::PacingConfig pacing;
  // batch.chunk_size: the first chunk's size, and every chunk's when
  // pacing.adaptive is false.
  int chunk_size = 500;
  std::string job = "default";      // events.job
  std::optional<long long> run_id;  // events.run_id, when known
  config::TargetTable target;       // the vacuum signal; events.target
  std::string conninfo;             // the monitor's own connection; never logged
  std::string application_name = "coexist-pacing";
  // The batch's own connections (database.application_name): never sampled
  // as online sessions by the latency objective's sessions signal.
  std::string batch_application_name = "coexist-batch";
  // Hold every chunk until the first SetJobPause says whether the job is
  // paused (the batch runner's first heartbeat, at once): a run that starts
  // while its job is paused claims nothing. PacerOptionsFrom sets it.
  bool await_job_pause = false;
};

// The options for `config`'s pacing:, batch: and target: sections.
PacerOptions PacerOptionsFrom(const config::Config& config, std::string conninfo);

// What the runner reports after each chunk.
struct ChunkReport {
  int items = 0;                           // items the chunk held
  std::chrono::milliseconds took{0};       // wall time of the chunk's transaction
  bool hit_timeout = false;                // cancelled by statement_timeout or lock_timeout
  std::chrono::milliseconds lock_wait{0};  // time the chunk waited for row locks
  // The chunk's statement latency; nullopt: `took` stands for it.
  std::optional<std::chrono::milliseconds> statement_latency;
};

class HealthMonitor;
class ControlServer;

// Chunk sizing, health throttling and operator control behind three calls.
// Thread-safe: several worker threads may call BeforeChunk/AfterChunk
// concurrently (each waits on its own; they share one sizer, one health
// monitor connection and one control state).
class Pacer {
 public:
  // Opens the monitor's connection and, when pacing.control_socket is set,
  // starts the control socket. Throws TempFailError (database unreachable)
  // or UnavailableError (socket path in use or not creatable).
  explicit Pacer(PacerOptions options);
  ~Pacer();
  Pacer(const Pacer&) = delete;
  Pacer& operator=(const Pacer&) = delete;

  // Call before claiming each chunk. Returns the size of the next chunk, or
  // nullopt when the run should stop (socket `stop`, the stop file, critical
  // load with critical_action: stop). Blocks while the operator paused the
  // run (socket `pause` or the pause file) or the job (SetJobPause), while
  // max_load trips (until healthy for hold_time), during the critical
  // re-check and hibernation. A command on the socket wakes it at once.
  std::optional<int> BeforeChunk();

  // Call after each chunk (committed or not): feeds the chunk sizer and the
  // batch's own signals (batch_lock_wait, statement_latency).
  void AfterChunk(const ChunkReport& report);
  void AfterChunk(int items, std::chrono::milliseconds took, bool hit_timeout) {
    AfterChunk(ChunkReport{.items = items, .took = took, .hit_timeout = hit_timeout});
  }

  // The runner's progress for `status`: done items, total when known, and
  // its rate in items per second (ETA = (total - done) / rate).
  void PublishStatus(long long done, std::optional<long long> total, double rate);

  void SetRunId(long long run_id);
  // The job's pause kept in the database (`coexist jobs pause J`), as the
  // runner's heartbeat reads it; nullopt: not paused. While it holds,
  // BeforeChunk blocks as for the socket's `pause` (throttle reason
  // job_paused; the throttle_start event names who paused it and why).
  void SetJobPause(std::optional<db::JobPause> pause);
  // Why BeforeChunk returned nullopt: kOperator (socket `stop` or
  // RequestStop), kJobStop (`coexist ctl --job J stop` through the
  // database), kStopFile or kCriticalLoad; nullopt while running.
  std::optional<StopReason> WhyStopped();
  // The same as the socket's `stop` (e.g. from a SIGTERM handler), with
  // the reason WhyStopped gives.
  void RequestStop(StopReason reason = StopReason::kOperator);
  // The socket's `status` answer (one JSON line), also for logs and tests.
  std::string StatusJson();
  // nullopt when pacing.online_latency is not set.
  std::optional<LatencySummary> Latency();
  // The latency objective's last decision: its percentile of the online
  // statements over the baseline (1.3: 30 % slower than without the
  // batch); nullopt without the objective or while it learns.
  std::optional<double> OnlineLatencyRatio();
  // The pacer's state for those who watch the job from elsewhere (the
  // heartbeat keeps it in the runs row's details.pacing): one JSON object,
  // `status` without progress, signals and thresholds: state and reason
  // (running, throttled: lock_waiters, paused: job_paused, ...), chunk_size,
  // chunk_time_ms, adaptive, and online_latency's state, duty, chunk_scale,
  // ratio and objective when pacing.online_latency is set.
  std::string PacingJson();
  ControlState& control();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace coexist::pacing
