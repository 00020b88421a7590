#pragma once

// A run's budgets (docs/batch.md, "Run budgets"): batch.max_duration (how
// long the run claims), batch.max_items (how many items it takes in hand)
// and batch.max_rate (how fast). The first two stop the run with their own
// stop reason; the rate only holds claims back. Private to batch/: the
// workers ask before each claim and settle after each chunk.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "common/stop_reason.h"
#include "config/config.h"

namespace coexist::batch {

// batch.max_rate's pace: a bucket of item tokens refilled at `rate` per
// second. It holds at most a burst of a tenth of a second's items (at least
// one), and starts full, so over any span T the run takes at most
// rate * T + burst items in hand. A claim asks for no more than the burst
// (Cap) and waits until the bucket holds that many.
//
// Pure: the caller passes the clock, so a test drives it with made-up
// times. Not thread-safe (RunBudget guards it).
class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  // `rate`: items per second, more than 0 (config/ checked it).
  TokenBucket(double rate, Clock::time_point now);

  // What a claim of `want` items may ask for: at most the burst.
  int Cap(int want) const;
  // Takes Cap(want) tokens when the bucket holds them at `now` and returns
  // that number; otherwise takes none, returns 0 and sets `wait` to how long
  // until it will hold them.
  int Take(int want, Clock::time_point now, Clock::duration& wait);
  // Puts back tokens a claim took and did not use (it found fewer items),
  // up to the burst.
  void PutBack(int tokens);
  int burst() const { return static_cast<int>(burst_); }

 private:
  void Refill(Clock::time_point now);

  double rate_;    // tokens per second
  double burst_;   // the most the bucket holds, a whole number
  double tokens_;  // held as of at_
  Clock::time_point at_;
};

// batch.max_items: the items left to take in hand, and those taken by
// chunks in flight. Pure; not thread-safe (RunBudget guards it).
class ItemBudget {
 public:
  explicit ItemBudget(long long max_items) : left_(max_items) {}

  // Takes up to `want` of what is left for a chunk; 0 when nothing is.
  long long Reserve(long long want);
  // A chunk that had `reserved` settled `used` of them: the rest is left
  // for the next claims.
  void Settle(long long reserved, long long used);
  // Nothing left and no chunk in flight that could give some back: the
  // run has taken max_items items in hand.
  bool spent() const { return left_ == 0 && in_flight_ == 0; }

 private:
  long long left_;
  long long in_flight_ = 0;
};

// The budgets of one run, shared by its workers. Thread-safe.
class RunBudget {
 public:
  using Clock = std::chrono::steady_clock;
  // `started`: when the run started (batch.max_duration counts from it).
  RunBudget(const config::BatchConfig& batch, Clock::time_point started);

  // batch.max_duration has passed at `now` (never without one).
  bool OutOfTime(Clock::time_point now) const { return deadline_ && now >= *deadline_; }

  // What a worker may claim now, for a chunk the pacer sized `size`.
  struct Allowance {
    int size = 0;                    // more than 0: claim at most this many, then Settle
    std::optional<StopReason> stop;  // kMaxItems: claim nothing more
    // size 0 and no stop: ask again after this (or after a Settle).
    Clock::duration wait{0};
  };
  Allowance Allow(int size, Clock::time_point now);
  // After a chunk that Allow gave `allowed`: it settled `used` items (done,
  // deferred or dead; a range walk's rows applied). Wakes WaitForSettle.
  void Settle(int allowed, long long used);
  // Blocks for `timeout` at most, or until a chunk settles.
  void WaitForSettle(Clock::duration timeout);

 private:
  const std::optional<Clock::time_point> deadline_;
  std::mutex mutex_;
  std::condition_variable settled_;
  long long settles_ = 0;
  std::optional<ItemBudget> items_;
  std::optional<TokenBucket> rate_;
};

// Settles a chunk's allowance however the chunk ends: with `used` when it
// got that far, with 0 (everything given back) when it threw or claimed
// nothing.
class ChunkAllowance {
 public:
  ChunkAllowance(RunBudget& budget, int allowed) : budget_(budget), allowed_(allowed) {}
  ~ChunkAllowance() { budget_.Settle(allowed_, used_); }
  ChunkAllowance(const ChunkAllowance&) = delete;
  ChunkAllowance& operator=(const ChunkAllowance&) = delete;
  void Used(long long items) { used_ = items; }

 private:
  RunBudget& budget_;
  int allowed_;
  long long used_ = 0;
};

}  // namespace coexist::batch
