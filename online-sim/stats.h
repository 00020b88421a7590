#pragma once

// What the simulator counts: one outcome per transaction, by kind, latency
// histograms, pool waits. Not thread-safe: the simulator updates it from its
// one io_context thread.

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace coexist::online_sim {

enum class Kind {
  kView,
  kOptimisticEdit,
  kPessimisticEdit,
  kOfflineEdit,
  kAtomicDecrement,
  kNolock,
  kMultiEdit
};
// The built-in kinds; a run's custom kinds (online.custom_kinds) follow
// them, kind index kKindCount + i for the i-th.
inline constexpr int kKindCount = 7;
const char* KindName(Kind kind);  // the YAML mix key: "optimistic_edit"

// How a transaction ended. Each transaction gets exactly one.
enum class Outcome {
  kOk,                 // done (a view read its row; an edit saved)
  kGaveUp,             // optimistic, multi_edit: still conflicting after max_retries retries
  kConflict,           // offline edit: the version changed under the edit lock
  kFloor,              // atomic decrement refused: the floor would be crossed
  kLockTimeout,        // 55P03 after lock_timeout
  kNowait,             // 55P03 from FOR UPDATE NOWAIT
  kEditLockBusy,       // CX001: another owner holds the edit lock
  kLockRevoked,        // CX002: the edit lock expired, was released or revoked
  kRefusedWindow,      // CX003: the batch's time window refuses online writes
  kRefusedOwner,       // CX004: the row is owned by the batch
  kRefusedEditLocked,  // CX005: another owner edit-locks the row
  kAbandoned,          // offline edit: the user closed the browser, lock left to expire
  kDeadlock,           // 40P01
  kSerialization,      // 40001
  kCanceled,           // 57014: statement_timeout or pg_cancel_backend
  kTerminated,         // 57P01: pg_terminate_backend; the pool reconnects
  kConnectionLost,     // the connection broke without a SQLSTATE
  kOther,              // any other SQLSTATE (counted by code too)
};
inline constexpr int kOutcomeCount = 18;
const char* OutcomeName(Outcome outcome);  // "lock_timeout"

// Maps an error's SQLSTATE to its outcome; `nowait` tells a NOWAIT 55P03
// from a lock_timeout one.
Outcome OutcomeOf(std::string_view sqlstate, bool nowait);

// Latency percentiles in milliseconds; quantiles are accurate to about 1 %.
struct LatencySummary {
  long long count = 0;
  double mean_ms = 0;
  double p50_ms = 0;
  double p95_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
};

// A log-spaced histogram (Boost.Histogram) from 1 µs to 1000 s; the max is
// kept exactly. Values outside the range land in the under/overflow bins.
class LatencyHistogram {
 public:
  LatencyHistogram();
  ~LatencyHistogram();
  LatencyHistogram(LatencyHistogram&&) noexcept;
  LatencyHistogram& operator=(LatencyHistogram&&) noexcept;

  void Add(std::chrono::nanoseconds value);
  LatencySummary Summarize() const;
  long long count() const { return count_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  long long count_ = 0;
  double sum_us_ = 0;
  double max_us_ = 0;
};

struct KindStats {
  std::array<long long, kOutcomeCount> outcomes{};
  std::map<std::string, long long> other_sqlstates;  // kOther and kConnectionLost by code
  long long conflicts = 0;  // optimistic UPDATEs that matched 0 rows; multi_edit: fewer than all
  long long retried = 0;    // transactions that needed at least one retry
  long long renewals = 0;   // offline edit-lock renewals
  LatencyHistogram latency;

  long long total() const;
};

class Stats {
 public:
  // `kinds`: the built-in kinds and the run's custom kinds.
  explicit Stats(size_t kinds = kKindCount) : kinds_(kinds) {}

  KindStats& kind(Kind k) { return kinds_[static_cast<size_t>(k)]; }
  const KindStats& kind(Kind k) const { return kinds_[static_cast<size_t>(k)]; }
  // By kind index: a built-in Kind's value, or kKindCount + i for a custom kind.
  KindStats& kind(size_t index) { return kinds_.at(index); }
  const KindStats& kind(size_t index) const { return kinds_.at(index); }
  size_t kinds() const { return kinds_.size(); }
  long long total() const;

  LatencyHistogram all;            // every kind's latency
  LatencyHistogram recent;         // every kind's latency since the last progress line
  LatencyHistogram pool_wait;      // from asking for a connection to getting one
  LatencyHistogram schedule_lag;   // open model: from scheduled to actual start
  long long late = 0;              // open model: latency above --latency-limit
  long long reconnects = 0;        // connections re-opened after being lost
  long long arrivals_dropped = 0;  // open model: arrivals not started at stop

 private:
  std::vector<KindStats> kinds_;
};

}  // namespace coexist::online_sim
