#include "batch/budget.h"

#include <algorithm>
#include <cmath>

namespace coexist::batch {
namespace {

// The bucket holds a tenth of a second's items: a claim of a whole chunk
// at a low rate would otherwise take seconds' worth at once.
constexpr double kBurstSeconds = 0.1;

// Rounding in the refill (tokens_ += rate * seconds) must not leave a claim
// waiting for a billionth of a token.
constexpr double kTokenSlack = 1e-9;

}  // namespace

TokenBucket::TokenBucket(double rate, Clock::time_point now)
    : rate_(rate),
      burst_(std::max(1.0, std::floor(rate * kBurstSeconds))),
      tokens_(burst_),
      at_(now) {}

int TokenBucket::Cap(int want) const {
  return std::max(1, std::min(want, static_cast<int>(burst_)));
}

void TokenBucket::Refill(Clock::time_point now) {
  if (now <= at_) return;
  double seconds = std::chrono::duration<double>(now - at_).count();
  tokens_ = std::min(burst_, tokens_ + rate_ * seconds);
  at_ = now;
}

int TokenBucket::Take(int want, Clock::time_point now, Clock::duration& wait) {
  Refill(now);
  int need = Cap(want);
  if (tokens_ + kTokenSlack >= need) {
    tokens_ = std::max(0.0, tokens_ - need);
    wait = Clock::duration::zero();
    return need;
  }
  auto seconds = std::chrono::duration<double>((need - tokens_) / rate_);
  wait = std::max<Clock::duration>(std::chrono::ceil<Clock::duration>(seconds), Clock::duration(1));
  return 0;
}

void TokenBucket::PutBack(int tokens) {
  if (tokens > 0) tokens_ = std::min(burst_, tokens_ + tokens);
}

long long ItemBudget::Reserve(long long want) {
  long long granted = std::clamp(want, 0LL, left_);
  left_ -= granted;
  in_flight_ += granted;
  return granted;
}

void ItemBudget::Settle(long long reserved, long long used) {
  used = std::clamp(used, 0LL, reserved);
  in_flight_ -= reserved;
  left_ += reserved - used;
}

RunBudget::RunBudget(const config::BatchConfig& batch, Clock::time_point started)
    : deadline_(batch.max_duration ? std::optional(started + *batch.max_duration) : std::nullopt) {
  if (batch.max_items) items_.emplace(*batch.max_items);
  if (batch.max_rate) rate_.emplace(*batch.max_rate, started);
}

RunBudget::Allowance RunBudget::Allow(int size, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  Allowance allowance;
  long long reserved = size;
  if (items_) {
    reserved = items_->Reserve(size);
    if (reserved == 0) {
      if (items_->spent()) {
        allowance.stop = StopReason::kMaxItems;
      } else {
        // A sibling's chunk in flight may give some back when it settles.
        allowance.wait = std::chrono::milliseconds(50);
      }
      return allowance;
    }
  }
  int granted = static_cast<int>(reserved);
  if (rate_) {
    granted = rate_->Take(granted, now, allowance.wait);
    // What the bucket refused is left for the next claims.
    if (items_) items_->Settle(reserved - granted, 0);
  }
  allowance.size = granted;
  return allowance;
}

void RunBudget::Settle(int allowed, long long used) {
  {
    std::lock_guard lock(mutex_);
    used = std::clamp<long long>(used, 0, allowed);
    if (items_) items_->Settle(allowed, used);
    if (rate_) rate_->PutBack(static_cast<int>(allowed - used));
    ++settles_;
  }
  settled_.notify_all();
}

void RunBudget::WaitForSettle(Clock::duration timeout) {
  std::unique_lock lock(mutex_);
  auto seen = settles_;
  settled_.wait_for(lock, timeout, [&] { return settles_ != seen; });
}

}  // namespace coexist::batch
