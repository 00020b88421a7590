#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/stop_reason.h"
#include "config/config.h"
#include "schema/job_pauses.h"

namespace coexist::pacing {

// What `status` reports, published by the Pacer (and, for progress, by the
// batch runner through Pacer::PublishStatus).
struct StatusSnapshot {
  // running, paused, throttled, critical_pending, hibernating, stopping.
  // `status` shows "pausing" / "stopping" as soon as the command arrives,
  // before the runner's next BeforeChunk makes it so.
  std::string state = "starting";
  std::string reason;              // why not running: "operator", "pause_file",
                                   // "lock_waiters", ...; "" when running
  long long done = 0;              // items finished in this run
  std::optional<long long> total;  // items the run expects, when known
  double rate = 0;                 // items per second, as the runner measures it
  bool adaptive = true;
  int chunk_size = 0;  // the next chunk's size
  std::chrono::milliseconds chunk_time{0};
  std::string signals_json = "{}";  // the last health reading (load.h's SignalsToJson)
  // The latency objective's state (pacing.online_latency); "" when not used.
  std::string latency_json;
};

// A chunk-size override from the operator, consumed once by the Pacer.
struct SizingOverride {
  std::optional<std::chrono::milliseconds> chunk_time;  // adaptive with this target
  std::optional<int> chunk_size;                        // fixed size
};

// The operator-controlled state shared by the control socket's thread, the
// batch runner's threads and `coexist ctl`'s answers. Thread-safe: every
// member function locks one mutex. Commands wake WaitForChange().
class ControlState {
 public:
  explicit ControlState(config::LoadThresholds max_load) : max_load_(max_load) {}

  // Executes one control line and returns a one-line JSON answer:
  //   status                -> {"ok":true,"state":...,"done":...,"eta_seconds":...}
  //   pause | resume | stop -> {"ok":true,"paused":...} / {"ok":true,"stopping":true}
  //   chunk-time=250ms      -> adaptive sizing with that target (1ms..1h)
  //   chunk-size=N          -> fixed chunks of N (1..100000)
  //   max-load=N            -> max_load.lock_waiters = N
  //   max-load=SIGNAL=V     -> one max_load threshold (load.h)
  // Anything else answers {"ok":false,"error":"...","hint":"..."}; it never
  // throws on bad input.
  std::string Handle(std::string_view line);

  void RequestPause(bool paused);
  // Stops the run as the socket's `stop` does; `reason` is what the run's
  // stop_reason says (kOperator, or kJobStop for `coexist ctl --job J stop`
  // through the database). The first stop's reason stays.
  void RequestStop(StopReason reason = StopReason::kOperator);
  bool paused() const;
  // The job's pause kept in the database (`coexist jobs pause J`), as the
  // run's heartbeat reads it (nullopt: not paused); wakes WaitForChange.
  void SetJobPause(std::optional<db::JobPause> pause);
  struct JobPauseState {
    bool read = false;  // false until the first SetJobPause: not known yet
    std::optional<db::JobPause> pause;
  };
  // Both at one instant.
  JobPauseState job_pause() const;
  bool stop_requested() const;
  // The first stop's reason; nullopt while none was asked.
  std::optional<StopReason> stop_reason() const;
  config::LoadThresholds max_load() const;
  std::optional<SizingOverride> TakeSizingOverride();

  void Publish(const StatusSnapshot& status);
  StatusSnapshot status() const;
  // Updates the runner's part of the snapshot (progress and rate).
  void PublishProgress(long long done, std::optional<long long> total, double rate);

  // A counter bumped by every command. Read it before deciding to wait, and
  // pass it to WaitForChange, so a command that arrives in between is not
  // missed.
  unsigned long long generation() const;
  // Blocks until the generation differs from `seen` or `timeout` passes.
  void WaitForChange(unsigned long long seen, std::chrono::milliseconds timeout);

 private:
  std::string StatusJson() const;  // mutex held
  void Changed();                  // mutex held

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  unsigned long long generation_ = 0;
  bool paused_ = false;
  std::optional<db::JobPause> job_pause_;
  bool job_pause_read_ = false;
  bool stop_ = false;
  std::optional<StopReason> stop_reason_;
  config::LoadThresholds max_load_;
  std::optional<SizingOverride> sizing_;
  StatusSnapshot status_;
};

}  // namespace coexist::pacing
