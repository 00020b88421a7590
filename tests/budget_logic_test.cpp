// A run's budgets as pure logic (batch/budget.h): the token bucket of
// batch.max_rate driven by made-up times, the share of batch.max_items
// among chunks in flight, and batch.max_duration's deadline.

#include <gtest/gtest.h>

#include "batch/budget.h"
#include "config/config.h"

namespace coexist::batch {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const Clock::time_point kT0 = Clock::time_point() + 1000h;

TEST(TokenBucket, StartsWithABurstOfATenthOfASecondThenPaces) {
  TokenBucket bucket(100, kT0);
  EXPECT_EQ(bucket.burst(), 10);
  EXPECT_EQ(bucket.Cap(500), 10) << "a claim never asks for more than the burst";
  EXPECT_EQ(bucket.Cap(3), 3);
  Clock::duration wait{};
  EXPECT_EQ(bucket.Take(500, kT0, wait), 10);
  EXPECT_EQ(wait, Clock::duration::zero());
  EXPECT_EQ(bucket.Take(500, kT0, wait), 0);
  EXPECT_EQ(wait, 100ms) << "10 tokens at 100 per second";
  EXPECT_EQ(bucket.Take(500, kT0 + 60ms, wait), 0);
  EXPECT_EQ(wait, 40ms);
  EXPECT_EQ(bucket.Take(500, kT0 + 100ms, wait), 10);
  // A smaller claim needs fewer tokens: 5 are there after 50 ms.
  EXPECT_EQ(bucket.Take(5, kT0 + 150ms, wait), 5);
}

TEST(TokenBucket, AFractionalRateLetsOneItemThroughAtATime) {
  TokenBucket bucket(0.5, kT0);
  EXPECT_EQ(bucket.burst(), 1);
  EXPECT_EQ(bucket.Cap(500), 1);
  Clock::duration wait{};
  EXPECT_EQ(bucket.Take(500, kT0, wait), 1);
  EXPECT_EQ(bucket.Take(500, kT0 + 1s, wait), 0);
  EXPECT_EQ(wait, 1s);
  EXPECT_EQ(bucket.Take(500, kT0 + 2s, wait), 1);
}

// A greedy claimer, asking again the moment the bucket says: over any span
// the bucket lets through at most rate * span + burst items, and keeps up
// with the rate (it caps, it does not starve).
TEST(TokenBucket, CapsAGreedyClaimerAtTheRateOverAnySpan) {
  for (double rate : {100.0, 7.5, 2500.0}) {
    TokenBucket bucket(rate, kT0);
    auto now = kT0;
    long long taken = 0;
    std::vector<std::pair<Clock::time_point, long long>> history;
    while (now < kT0 + 10s) {
      Clock::duration wait{};
      int got = bucket.Take(500, now, wait);
      if (got > 0) {
        taken += got;
        history.emplace_back(now, taken);
      } else {
        now += wait;
      }
    }
    double burst = bucket.burst();
    EXPECT_LE(taken, rate * 10 + burst) << rate;
    EXPECT_GE(taken, rate * 10 - burst) << rate;
    // The claims from the i-th to the j-th, both included.
    for (size_t i = 0; i < history.size(); i += 7) {
      for (size_t j = i; j < history.size(); j += 13) {
        double span = std::chrono::duration<double>(history[j].first - history[i].first).count();
        long long items = history[j].second - (i > 0 ? history[i - 1].second : 0);
        EXPECT_LE(items, rate * span + burst + 1e-6) << rate << " over " << span << " s";
      }
    }
  }
}

TEST(TokenBucket, PutsBackWhatAClaimDidNotUseUpToTheBurst) {
  TokenBucket bucket(100, kT0);
  Clock::duration wait{};
  EXPECT_EQ(bucket.Take(10, kT0, wait), 10);
  bucket.PutBack(4);  // the claim found 6 items
  EXPECT_EQ(bucket.Take(4, kT0, wait), 4);
  EXPECT_EQ(bucket.Take(1, kT0, wait), 0);
  bucket.PutBack(50);
  EXPECT_EQ(bucket.Take(50, kT0, wait), 10) << "never more than the burst";
  EXPECT_EQ(bucket.Take(1, kT0, wait), 0);
}

TEST(ItemBudget, NeverReservesMoreThanIsLeftAndTakesBackWhatAChunkDidNotUse) {
  ItemBudget budget(25);
  EXPECT_EQ(budget.Reserve(10), 10);
  EXPECT_EQ(budget.Reserve(10), 10);
  EXPECT_EQ(budget.Reserve(10), 5);
  EXPECT_EQ(budget.Reserve(10), 0);
  EXPECT_FALSE(budget.spent()) << "chunks in flight may give some back";
  budget.Settle(10, 10);
  budget.Settle(10, 7);  // three items were left for a later chunk
  EXPECT_FALSE(budget.spent());
  EXPECT_EQ(budget.Reserve(10), 3);
  budget.Settle(5, 5);
  budget.Settle(3, 3);
  EXPECT_TRUE(budget.spent());
  EXPECT_EQ(budget.Reserve(10), 0);
}

config::BatchConfig Budgets(std::optional<std::chrono::milliseconds> duration,
                            std::optional<long long> items, std::optional<double> rate) {
  config::BatchConfig batch;
  batch.max_duration = duration;
  batch.max_items = items;
  batch.max_rate = rate;
  return batch;
}

TEST(RunBudget, WithoutBudgetsEveryClaimGoesAsSized) {
  RunBudget budget(config::BatchConfig{}, kT0);
  EXPECT_FALSE(budget.OutOfTime(kT0 + 10000h));
  auto allowed = budget.Allow(500, kT0);
  EXPECT_EQ(allowed.size, 500);
  EXPECT_FALSE(allowed.stop.has_value());
}

TEST(RunBudget, MaxDurationCountsFromTheRunsStart) {
  RunBudget budget(Budgets(2h, std::nullopt, std::nullopt), kT0);
  EXPECT_FALSE(budget.OutOfTime(kT0 + 2h - 1ms));
  EXPECT_TRUE(budget.OutOfTime(kT0 + 2h));
}

TEST(RunBudget, MaxItemsStopsOnlyWhenNothingInFlightCanGiveSomeBack) {
  RunBudget budget(Budgets(std::nullopt, 25, std::nullopt), kT0);
  auto a = budget.Allow(20, kT0);
  auto b = budget.Allow(20, kT0);
  EXPECT_EQ(a.size, 20);
  EXPECT_EQ(b.size, 5);
  auto c = budget.Allow(20, kT0);
  EXPECT_EQ(c.size, 0);
  EXPECT_FALSE(c.stop.has_value()) << "a's chunk may give some back";
  EXPECT_GT(c.wait, Clock::duration::zero());
  budget.Settle(20, 18);
  EXPECT_EQ(budget.Allow(20, kT0).size, 2);
  budget.Settle(2, 2);
  budget.Settle(5, 5);
  EXPECT_EQ(budget.Allow(20, kT0).stop, StopReason::kMaxItems);
}

// A claim the rate holds back takes none of max_items with it.
TEST(RunBudget, ARateRefusalLeavesTheItemsForLaterClaims) {
  RunBudget budget(Budgets(std::nullopt, 12, 100.0), kT0);
  auto first = budget.Allow(500, kT0);
  EXPECT_EQ(first.size, 10);
  auto held = budget.Allow(500, kT0);
  EXPECT_EQ(held.size, 0);
  EXPECT_FALSE(held.stop.has_value());
  EXPECT_EQ(held.wait, 20ms) << "the 2 items left need 2 tokens";
  budget.Settle(10, 10);
  auto second = budget.Allow(500, kT0 + 100ms);
  EXPECT_EQ(second.size, 2) << "what max_items left, within the burst";
  budget.Settle(2, 2);
  EXPECT_EQ(budget.Allow(500, kT0 + 1s).stop, StopReason::kMaxItems);
}

}  // namespace
}  // namespace coexist::batch
