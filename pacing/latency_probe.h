#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "config_core/target.h"

namespace coexist::pacing {

struct LatencyProbeOptions {
  std::string conninfo;  // never logged
  std::string application_name = "coexist-latency-probe";
  config::TargetTable target;
  config::LatencyProbeKind kind = config::LatencyProbeKind::kLock;
  std::chrono::milliseconds interval{50};
  // lock_timeout and statement_timeout of each probe: a probe that waits
  // this long reports this long (the wait is what online would see).
  std::chrono::milliseconds timeout{2000};
};

// Why the probe cannot run, and how to make it run. The batch goes on,
// paced by the count signals only.
struct ProbeUnavailable {
  std::string reason;
  std::string fix;
};

// Coexist's own online-shaped transaction, timed: every `interval` it reads
// one row of the target by its key, a key drawn at random from a sample
// taken at start, with `SELECT ... FOR NO KEY UPDATE` (kind lock: waits for
// row locks as an online edit does) or a plain SELECT (kind read), and
// rolls back. It sees what the batch does to online work: row locks, CPU and
// I/O contention. Runs on its own thread and connection; a lost connection
// is reopened.
//
// Contract: `on_sample` and `on_unavailable` are called from the probe's
// thread; `on_unavailable` at most once, after which the probe stops. The
// destructor stops the thread (within one interval or one probe's timeout).
class LatencyProbe {
 public:
  using OnSample = std::function<void(std::chrono::microseconds latency)>;
  using OnUnavailable = std::function<void(const ProbeUnavailable& why)>;

  LatencyProbe(LatencyProbeOptions options, OnSample on_sample, OnUnavailable on_unavailable);
  ~LatencyProbe();
  LatencyProbe(const LatencyProbe&) = delete;
  LatencyProbe& operator=(const LatencyProbe&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace coexist::pacing
