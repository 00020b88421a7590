#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pacing/latency_probe.h"

namespace coexist::pacing {

struct SessionSamplerOptions {
  std::string conninfo;  // never logged
  std::string application_name = "coexist-pacing-latency-sessions";
  // Sessions whose application_name starts with one of these are coexist's
  // own (the batch's workers, the pacing monitor, the probe, the sampler,
  // the dashboard) and are never sampled.
  std::vector<std::string> exclude_prefixes;
  std::chrono::milliseconds interval{50};
};

// One statement of an online session, as pg_stat_activity showed it.
struct SessionSample {
  int pid = 0;
  std::string application_name;
  // Finished: state_change - query_start, the statement's whole latency
  // with every lock, CPU and I/O wait it met. Censored: a lower bound, the
  // age it was last seen active at (still active past CensorAfter(), or
  // ended between two reads with the session busy again). Each statement
  // counts once, never again when it ends.
  std::chrono::microseconds latency{0};
  bool censored = false;
};

// The application's own statement latencies, read without its help:
// every `interval` it reads pg_stat_activity for the client backends of
// its database other than coexist's own. A session now idle (or idle in
// transaction) whose last statement ended since the previous read reports
// that statement's latency, `state_change - query_start`; a statement seen
// active that ended with the session busy again (the next statement of its
// transaction) reports the age it was last seen at; one still active for
// longer than CensorAfter() reports its age at once (a long lock wait is
// seen before it ends). Each statement (pid, query_start) counts at most
// once. A statement never seen active that is followed by another before
// the next read is not seen: a sample, not a census (a long statement is
// more likely seen than a short one, the same with and without the batch).
//
// It needs to see other roles' sessions: a superuser, a member of
// pg_read_all_stats, or the application's own role. At start it checks
// the first two; without them `on_unavailable` is called with the GRANT
// that fixes it, and the sampler stops.
//
// Contract: `on_poll` is called from the sampler's thread once per read,
// with the statements that read found (possibly none); `on_unavailable`
// at most once, after which the sampler stops. A lost connection is
// reopened. The destructor stops the thread within one interval.
class SessionSampler {
 public:
  using OnPoll = std::function<void(const std::vector<SessionSample>& samples)>;
  using OnUnavailable = std::function<void(const ProbeUnavailable& why)>;

  SessionSampler(SessionSamplerOptions options, OnPoll on_poll, OnUnavailable on_unavailable);
  ~SessionSampler();
  SessionSampler(const SessionSampler&) = delete;
  SessionSampler& operator=(const SessionSampler&) = delete;

  // Active statements older than this are reported as censored samples; 0
  // (the start): never. The pacer sets it to the objective's limit.
  void SetCensorAfter(std::chrono::microseconds after);
  // Asks the thread to stop after its current read, without waiting for it
  // (safe from `on_poll` and `on_unavailable`); the destructor joins it.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace coexist::pacing
