// The latency objective's controller (pacing/latency_objective.h) driven
// with a made-up clock and scripted probe latencies: each transition of the
// state machine drawn in its header.

#include <gtest/gtest.h>

#include <vector>

#include "pacing/latency_objective.h"

namespace coexist::pacing {
namespace {

using namespace std::chrono_literals;
using Clock = LatencyObjective::Clock;
using std::chrono::microseconds;

// Feeds probes every 50 ms from `t` for `span`, each taking `latency`;
// returns the kinds of the events they caused, in order.
std::vector<std::string> Feed(LatencyObjective& c, Clock::time_point& t,
                              std::chrono::milliseconds span, microseconds latency) {
  std::vector<std::string> kinds;
  for (auto end = t + span; t < end;) {
    t += 50ms;
    for (const auto& e : c.Observe(t, latency)) kinds.emplace_back(ToString(e.kind));
  }
  return kinds;
}

// Probes every 50 ms: a decision needs kMinSamples = 10 of them, 500 ms.
constexpr auto kDecision = 500ms;

LatencyObjectiveOptions Measured() {
  return {.objective = 1.25,
          .percentile = 90,
          .window = 2000ms,
          .learn_time = 1000ms,
          .min_duty = 0.05,
          .tolerance = 0us};
}

LatencyObjectiveOptions Configured(microseconds baseline) {
  auto options = Measured();
  options.baseline = baseline;
  return options;
}

TEST(LatencyObjective, LearnsTheBaselineBeforeTheFirstChunk) {
  Clock::time_point t{};
  LatencyObjective c(Measured(), t);
  EXPECT_EQ(c.state(), LatencyState::kLearning);
  EXPECT_TRUE(Feed(c, t, 950ms, 1000us).empty()) << "still within learn_time";
  EXPECT_EQ(c.state(), LatencyState::kLearning);
  EXPECT_EQ(Feed(c, t, 50ms, 1000us), std::vector<std::string>{"latency_baseline"});
  EXPECT_EQ(c.state(), LatencyState::kWithin);
  EXPECT_EQ(c.baseline(), 1000us);
  EXPECT_EQ(c.duty(), 1.0);
  EXPECT_EQ(c.RestAfter(200ms), 0ms);
}

// pacing.online_latency.start: slow. The batch begins at a quarter of the
// duty and the shortest chunks; four decisions with headroom give it full
// speed, the duty first, then the chunks.
TEST(LatencyObjective, ASlowStartBeginsAtAQuarterAndShortChunksAndRampsUpWithHeadroom) {
  Clock::time_point t{};
  auto options = Measured();
  options.min_chunk_scale = 0.25;
  options.slow_start = true;
  LatencyObjective c(options, t);
  EXPECT_EQ(Feed(c, t, 1000ms, 1000us), std::vector<std::string>{"latency_baseline"});
  EXPECT_EQ(c.state(), LatencyState::kWithin);
  EXPECT_DOUBLE_EQ(c.duty(), 0.25);
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 0.25);
  EXPECT_EQ(c.RestAfter(100ms), 300ms) << "a quarter of the time in chunks";
  Feed(c, t, kDecision, 1000us);
  EXPECT_DOUBLE_EQ(c.duty(), 0.5);
  Feed(c, t, kDecision, 1000us);
  EXPECT_DOUBLE_EQ(c.duty(), 1.0);
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 0.25) << "the duty first";
  EXPECT_EQ(Feed(c, t, kDecision, 1000us), std::vector<std::string>{"latency_chunk_time"});
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 0.5);
  Feed(c, t, kDecision, 1000us);
  EXPECT_TRUE(c.FullSpeed()) << "full speed after four decisions, 2 s";
}

// A start that finds online over the objective never reaches the full
// speed that would have hurt it: the first decision cuts from the quarter.
TEST(LatencyObjective, ASlowStartOverTheObjectiveCutsFromWhereItBegan) {
  Clock::time_point t{};
  auto options = Configured(1000us);
  options.min_chunk_scale = 0.25;
  options.slow_start = true;
  LatencyObjective c(options, t);
  EXPECT_DOUBLE_EQ(c.duty(), 0.25) << "a configured baseline starts slow too";
  EXPECT_EQ(Feed(c, t, kDecision, 4000us), std::vector<std::string>{"latency_slowdown"});
  EXPECT_DOUBLE_EQ(c.duty(), 0.125);
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 0.25);
}

// Never below min_duty, even when the quarter is.
TEST(LatencyObjective, ASlowStartNeverBeginsBelowMinDuty) {
  Clock::time_point t{};
  auto options = Configured(1000us);
  options.min_duty = 0.4;
  options.slow_start = true;
  LatencyObjective c(options, t);
  EXPECT_DOUBLE_EQ(c.duty(), 0.4);
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 1.0) << "no second knob: the chunks keep their length";
}

TEST(LatencyObjective, TheBaselineIsAPercentileNotTheMean) {
  Clock::time_point t{};
  LatencyObjective c(Measured(), t);
  // 40 probes; one in ten takes 5 ms (the mean is 1.4 ms). Each group of 10
  // has p90 (nearest rank 9 of 10) 1 ms, and so has their median.
  for (int i = 1; i <= 40; ++i) c.Observe(t + i * 25ms, i % 10 == 3 ? 5000us : 1000us);
  EXPECT_EQ(c.baseline(), 1000us);
}

TEST(LatencyObjective, NeedsMinSamplesToLearn) {
  Clock::time_point t{};
  LatencyObjective c(Measured(), t);
  for (int i = 1; i < LatencyObjective::kMinSamples; ++i) c.Observe(t + i * 150ms, 1000us);
  EXPECT_EQ(c.state(), LatencyState::kLearning) << "9 probes over 1.35 s are not enough";
  c.Observe(t + 1500ms, 1000us);
  EXPECT_EQ(c.state(), LatencyState::kWithin);
}

// The sessions signal may catch its statements early and none after:
// learning ends at the first read past learn_time, samples or not.
TEST(LatencyObjective, LearningEndsOnTheClockWhenTheSamplesCameEarly) {
  Clock::time_point t{};
  LatencyObjective c(Measured(), t);
  for (int i = 1; i <= 25; ++i) c.Observe(t + i * 10ms, 1000us);
  ASSERT_EQ(c.state(), LatencyState::kLearning) << "within learn_time";
  EXPECT_TRUE(c.Quiet(t + 900ms).empty());
  ASSERT_EQ(c.state(), LatencyState::kLearning);
  std::vector<std::string> kinds;
  for (const auto& e : c.Quiet(t + 1000ms)) kinds.emplace_back(ToString(e.kind));
  EXPECT_EQ(kinds, std::vector<std::string>{"latency_baseline"});
  EXPECT_EQ(c.state(), LatencyState::kWithin);
  EXPECT_EQ(c.baseline(), 1000us);
}

TEST(LatencyObjective, AConfiguredBaselineSkipsLearning) {
  LatencyObjective c(Configured(2000us), Clock::time_point{});
  EXPECT_EQ(c.state(), LatencyState::kWithin);
  EXPECT_EQ(c.baseline(), 2000us);
  EXPECT_EQ(c.RestAfter(100ms), 0ms);
}

TEST(LatencyObjective, FarOverTheObjectiveHalvesTheDutyUntilTheFloor) {
  Clock::time_point t{};
  LatencyObjective c(Measured(), t);
  Feed(c, t, 1000ms, 1000us);
  EXPECT_TRUE(Feed(c, t, kDecision - 50ms, 3000us).empty()) << "9 probes decide nothing";
  EXPECT_EQ(Feed(c, t, 50ms, 3000us), std::vector<std::string>{"latency_slowdown"});
  EXPECT_EQ(c.state(), LatencyState::kOver);
  EXPECT_DOUBLE_EQ(c.duty(), 0.5) << "2.4x the 1.25 ms limit: the deepest cut";
  EXPECT_NEAR(c.ratio(), 3.0, 1e-9);
  // Each later cut is judged on 10 fresh probes: 0.25, 0.125, 0.0625, then the floor.
  EXPECT_TRUE(Feed(c, t, kDecision, 3000us).empty()) << "one event per excursion";
  EXPECT_DOUBLE_EQ(c.duty(), 0.25);
  Feed(c, t, 3 * kDecision, 3000us);
  EXPECT_DOUBLE_EQ(c.duty(), 0.05);
  Feed(c, t, 2 * kDecision, 5000us);
  EXPECT_DOUBLE_EQ(c.duty(), 0.05) << "never below min_duty";
}

TEST(LatencyObjective, JustOverTheObjectiveCutsMildly) {
  Clock::time_point t{};
  LatencyObjective c(Measured(), t);
  Feed(c, t, 1000ms, 1000us);
  // 1.3 ms against a 1.25 ms limit (x0.96): the mildest cut, x0.8.
  EXPECT_EQ(Feed(c, t, kDecision, 1300us), std::vector<std::string>{"latency_slowdown"});
  EXPECT_DOUBLE_EQ(c.duty(), 0.8);
  Feed(c, t, kDecision, 1300us);
  EXPECT_DOUBLE_EQ(c.duty(), 0.64);
  // 2 ms (x0.625): in between, in proportion.
  Feed(c, t, kDecision, 2000us);
  EXPECT_DOUBLE_EQ(c.duty(), 0.64 * 0.625);
}

// The online load doubles while the batch runs at some duty, then stops
// again: scripted probe latencies at 50 ms, the 2 s targets of simulated time.
TEST(LatencyObjective, SlowsWithinTwoSecondsOfALoadDoublingAndSpeedsUpWithinTwoOfItsEnd) {
  Clock::time_point t{};
  LatencyObjective c(Measured(), t);
  Feed(c, t, 1000ms, 1000us);
  Feed(c, t, kDecision, 1300us);  // a mild cut under the steady load
  Feed(c, t, 3 * kDecision, 1150us);
  double steady = c.duty();
  ASSERT_LT(steady, 1.0);
  ASSERT_GT(steady, 0.8);

  auto doubled = t;
  while (c.duty() >= steady && t - doubled < 5s) Feed(c, t, 50ms, 2600us);
  EXPECT_LE(t - doubled, 2s) << "the first cut after the load doubled";
  while (c.duty() > 0.25 && t - doubled < 10s) Feed(c, t, 50ms, 2600us);
  EXPECT_LE(t - doubled, 2s) << "down to a quarter within 2 s";
  Feed(c, t, 3s, 2600us);
  EXPECT_DOUBLE_EQ(c.duty(), 0.05) << "held low while the load lasts";

  auto ended = t;
  while (c.duty() <= 0.05 && t - ended < 5s) Feed(c, t, 50ms, 1000us);
  EXPECT_LE(t - ended, 2s) << "the first raise after the load stopped";
  while (c.duty() < 1.0 && t - ended < 10s) Feed(c, t, 50ms, 1000us);
  EXPECT_LE(t - ended, 2s) << "full speed within 2 s";
}

TEST(LatencyObjective, RecoversAndTakesBackFullSpeedWithinTwoSeconds) {
  Clock::time_point t{};
  LatencyObjective c(Measured(), t);
  Feed(c, t, 1000ms, 1000us);
  Feed(c, t, 5 * kDecision, 3000us);
  ASSERT_DOUBLE_EQ(c.duty(), 0.05);
  // Online is fast again: each decision doubles the duty (at least +0.1):
  // 0.15 (recovered), 0.3, 0.6, 1.
  auto start = t;
  EXPECT_EQ(Feed(c, t, kDecision, 1000us), std::vector<std::string>{"latency_recovered"});
  EXPECT_EQ(c.state(), LatencyState::kWithin);
  EXPECT_DOUBLE_EQ(c.duty(), 0.15);
  while (c.duty() < 1.0 && t - start < 5s) Feed(c, t, 50ms, 1000us);
  EXPECT_DOUBLE_EQ(c.duty(), 1.0);
  EXPECT_LE(t - start, 2s);
}

TEST(LatencyObjective, BetweenHeadroomAndObjectiveTheDutyCreepsUp) {
  Clock::time_point t{};
  LatencyObjective c(Measured(), t);
  Feed(c, t, 1000ms, 1000us);
  Feed(c, t, kDecision, 3000us);
  ASSERT_DOUBLE_EQ(c.duty(), 0.5);
  // 1.2x: under the objective (1.25x) but above the headroom (1.125x).
  EXPECT_EQ(Feed(c, t, kDecision, 1200us), std::vector<std::string>{"latency_recovered"});
  EXPECT_DOUBLE_EQ(c.duty(), 0.55);
  Feed(c, t, 4 * kDecision, 1200us);
  EXPECT_NEAR(c.duty(), 0.75, 1e-9) << "+kCreep per decision, not x2";
}

TEST(LatencyObjective, TheToleranceAbsorbsJitterBelowIt) {
  Clock::time_point t{};
  auto options = Configured(200us);
  options.tolerance = 500us;
  LatencyObjective c(options, t);
  EXPECT_TRUE(Feed(c, t, 2 * kDecision, 650us).empty()) << "3.25x, but within 200us + 500us";
  EXPECT_EQ(c.state(), LatencyState::kWithin);
  EXPECT_EQ(Feed(c, t, kDecision, 750us), std::vector<std::string>{"latency_slowdown"});
}

TEST(LatencyObjective, AnOldSpikeLeavesTheDecision) {
  Clock::time_point t{};
  LatencyObjective c(Configured(1000us), t);
  Feed(c, t, kDecision, 10'000us);
  ASSERT_EQ(c.state(), LatencyState::kOver);
  Feed(c, t, kDecision, 1000us);
  EXPECT_EQ(c.state(), LatencyState::kWithin) << "the decision after a cut sees only newer probes";
}

TEST(LatencyObjective, RestAfterAChunkFollowsTheDutyCycle) {
  Clock::time_point t{};
  LatencyObjective c(Configured(1000us), t);
  EXPECT_EQ(c.RestAfter(200ms), 0ms);
  Feed(c, t, kDecision, 3000us);
  ASSERT_DOUBLE_EQ(c.duty(), 0.5);
  EXPECT_EQ(c.RestAfter(200ms), 200ms);  // works half the time
  Feed(c, t, 5 * kDecision, 3000us);
  ASSERT_DOUBLE_EQ(c.duty(), 0.05);
  EXPECT_EQ(c.RestAfter(200ms), 3800ms);
  EXPECT_EQ(c.RestAfter(10s), LatencyObjective::kMaxRest);
}

TEST(LatencyObjective, AnIdleBatchRefreshesAMeasuredBaseline) {
  Clock::time_point t{};
  LatencyObjective c(Measured(), t);
  Feed(c, t, 1000ms, 1000us);
  ASSERT_EQ(c.baseline(), 1000us);
  // Online got slower for reasons of its own while the batch was paused.
  c.SetBatchActive(t, false);
  EXPECT_TRUE(Feed(c, t, 950ms, 1500us).empty()) << "idle for less than learn_time";
  EXPECT_EQ(Feed(c, t, 50ms, 1500us), std::vector<std::string>{"latency_baseline"});
  EXPECT_EQ(c.baseline(), 1500us);
  EXPECT_DOUBLE_EQ(c.duty(), 1.0) << "idle probes never cut the duty";
  c.SetBatchActive(t, true);
  EXPECT_TRUE(Feed(c, t, 2 * kDecision, 1600us).empty()) << "1.07x the refreshed baseline";
}

TEST(LatencyObjective, ASlowedBatchRelearnsItsBaselineAfterRelearnEvery) {
  Clock::time_point t{};
  auto options = Measured();
  options.relearn_every = 5000ms;
  LatencyObjective c(options, t);
  EXPECT_FALSE(c.RelearnDue(t)) << "never while learning";
  Feed(c, t, 1000ms, 1000us);
  ASSERT_EQ(c.baseline(), 1000us);
  Feed(c, t, 6000ms, 1000us);
  EXPECT_FALSE(c.RelearnDue(t)) << "at full speed nothing is to be given back";
  // The host got busier on its own: the batch, slowed for it, sits at a
  // low duty that a stale baseline would never give back.
  while (c.duty() >= 1.0) Feed(c, t, 50ms, 3000us);
  auto full = t;  // the decision that cut: the duty was 1 until then
  ASSERT_DOUBLE_EQ(c.duty(), 0.5);
  Feed(c, t, 4 * kDecision, 3000us);
  EXPECT_LT(c.duty(), 0.1);
  EXPECT_FALSE(c.RelearnDue(full + 4999ms));
  EXPECT_TRUE(c.RelearnDue(full + 5000ms)) << "relearn_every since the duty was last 1";
  t = full + 5000ms;
  c.SetBatchActive(t, false);  // the pacer holds the batch
  EXPECT_EQ(Feed(c, t, 1000ms, 3000us), std::vector<std::string>{"latency_baseline"});
  EXPECT_EQ(c.baseline(), 3000us);
  EXPECT_FALSE(c.RelearnDue(t));
  c.SetBatchActive(t, true);
  Feed(c, t, 5 * kDecision, 3000us);
  EXPECT_EQ(c.duty(), 1.0) << "speed comes back against the new baseline";
  EXPECT_EQ(c.state(), LatencyState::kWithin);
}

// A baseline learned at a quiet moment: online is slower than it with the
// batch nearly idle. Over at the floor for FloorRelearnAfter (4 s here),
// the baseline is learned again long before relearn_every.
TEST(LatencyObjective, OverAtTheFloorRelearnsTheBaselineBeforeRelearnEvery) {
  Clock::time_point t{};
  auto options = Measured();
  options.relearn_every = 60000ms;
  LatencyObjective c(options, t);
  Feed(c, t, 1000ms, 1000us);
  ASSERT_EQ(c.baseline(), 1000us);
  ASSERT_EQ(c.FloorRelearnAfter(), 4000ms) << "twice the window";
  while (c.duty() > options.min_duty) Feed(c, t, 50ms, 3000us);
  auto floor = t;  // the decision that cut to the floor
  Feed(c, t, 3000ms, 3000us);
  EXPECT_DOUBLE_EQ(c.duty(), options.min_duty);
  EXPECT_FALSE(c.RelearnDue(floor + 3999ms));
  EXPECT_TRUE(c.RelearnDue(floor + 4000ms)) << "over at the floor for FloorRelearnAfter";
  t = floor + 4000ms;
  c.SetBatchActive(t, false);  // the pacer holds the batch
  EXPECT_EQ(Feed(c, t, 1000ms, 3000us), std::vector<std::string>{"latency_baseline"});
  EXPECT_EQ(c.baseline(), 3000us);
  EXPECT_FALSE(c.RelearnDue(t)) << "the refresh ends it";
  c.SetBatchActive(t, true);
  Feed(c, t, 12 * kDecision, 3000us);
  EXPECT_EQ(c.duty(), 1.0) << "speed comes back against the new baseline";
}

// Within the objective at the floor (the floor is what holds it): nothing
// to relearn; and relearn_every 0 turns relearning off altogether.
TEST(LatencyObjective, TheFloorAloneOrRelearnEveryZeroNeverRelearns) {
  for (auto every : {60000ms, 0ms}) {
    Clock::time_point t{};
    auto options = Measured();
    options.relearn_every = every;
    LatencyObjective c(options, t);
    Feed(c, t, 1000ms, 1000us);
    while (c.duty() > options.min_duty) Feed(c, t, 50ms, 3000us);
    auto floor = t;
    if (every.count() == 0) {
      Feed(c, t, 6000ms, 3000us);
      EXPECT_FALSE(c.RelearnDue(t)) << "relearn_every 0: never";
      continue;
    }
    Feed(c, t, 2 * kDecision, 1100us);  // within: the floor holds it, a creep raise
    EXPECT_FALSE(c.RelearnDue(floor + 4000ms));
  }
}

TEST(LatencyObjective, ARelearnThatMeasuresNothingIsGivenUp) {
  Clock::time_point t{};
  auto options = Measured();
  options.relearn_every = 5000ms;
  LatencyObjective c(options, t);
  Feed(c, t, 1000ms, 1000us);
  while (c.duty() >= 1.0) Feed(c, t, 50ms, 3000us);
  auto full = t;  // the decision that cut: the duty was 1 until then
  // No probe answers: due for learn_time x 2 + 5 s, then the batch goes on.
  EXPECT_TRUE(c.RelearnDue(full + 5000ms + 6999ms));
  EXPECT_FALSE(c.RelearnDue(full + 5000ms + 7000ms));
}

TEST(LatencyObjective, AConfiguredBaselineIsNeverDue) {
  Clock::time_point t{};
  auto options = Configured(1000us);
  options.relearn_every = 1000ms;
  LatencyObjective c(options, t);
  EXPECT_FALSE(c.RelearnDue(t + 1h));
}

TEST(LatencyObjective, AConfiguredBaselineIsNeverRefreshed) {
  Clock::time_point t{};
  LatencyObjective c(Configured(1000us), t);
  c.SetBatchActive(t, false);
  EXPECT_TRUE(Feed(c, t, 3000ms, 5000us).empty());
  EXPECT_EQ(c.baseline(), 1000us);
}

// The sessions signal: many samples per read, a decision per decision_time.
TEST(LatencyObjective, WithADecisionTimeManySamplesWaitForIt) {
  Clock::time_point t{};
  auto options = Configured(1000us);
  options.decision_time = 500ms;
  LatencyObjective c(options, t);
  // 20 samples every 50 ms: kMinSamples after one read, but no decision
  // before 500 ms.
  auto read = [&](microseconds latency) {
    t += 50ms;
    std::vector<std::string> kinds;
    for (int i = 0; i < 20; ++i) {
      for (const auto& e : c.Observe(t, latency)) kinds.emplace_back(ToString(e.kind));
    }
    return kinds;
  };
  for (int i = 0; i < 9; ++i) EXPECT_TRUE(read(3000us).empty()) << "read " << i;
  EXPECT_EQ(read(3000us), std::vector<std::string>{"latency_slowdown"});
  EXPECT_DOUBLE_EQ(c.duty(), 0.5);
}

TEST(LatencyObjective, TheBaselineGroupsHoldADecisionsSamples) {
  // 40 samples per 50 ms read over the 1 s learn_time, one in 20 slow (5 %):
  // a decision's p99 over its 400 samples is the slow value. Groups of 10
  // (no decision_time) would hold the tail in half of them and learn the
  // fast value; groups of a decision's size learn what a decision sees.
  auto learn = [](std::chrono::milliseconds decision_time) {
    Clock::time_point t{};
    auto options = Measured();
    options.percentile = 99;
    options.decision_time = decision_time;
    LatencyObjective c(options, t);
    for (int read = 1; read <= 20; ++read) {
      for (int i = 0; i < 40; ++i) c.Observe(t + read * 50ms, i % 20 == 0 ? 5000us : 1000us);
    }
    return c.baseline();
  };
  EXPECT_EQ(learn(0ms), 1000us) << "groups of 10";
  EXPECT_EQ(learn(500ms), 5000us) << "groups of 400";
}

TEST(LatencyObjective, NoOnlineStatementForAWindowGivesTheSpeedBack) {
  Clock::time_point t{};
  auto options = Configured(1000us);
  options.decision_time = 500ms;
  options.window = 1000ms;
  LatencyObjective c(options, t);
  for (int i = 0; i < 2; ++i) {
    t += 500ms;
    for (int n = 0; n < 10; ++n) c.Observe(t, 3000us);
  }
  ASSERT_DOUBLE_EQ(c.duty(), 0.25);
  ASSERT_EQ(c.state(), LatencyState::kOver);
  // Online stopped: reads find no statement.
  auto stopped = t;
  t += 50ms;
  EXPECT_TRUE(c.Quiet(t).empty()) << "a read without samples is no evidence yet";
  while (c.state() == LatencyState::kOver && t - stopped < 5s) {
    t += 50ms;
    c.Quiet(t);
  }
  EXPECT_EQ(t - stopped, 1000ms) << "a window without samples";
  EXPECT_DOUBLE_EQ(c.duty(), 0.5);
  while (c.duty() < 1.0 && t - stopped < 5s) {
    t += 50ms;
    c.Quiet(t);
  }
  EXPECT_EQ(t - stopped, 1500ms) << "then x2 per decision_time";
  EXPECT_EQ(c.state(), LatencyState::kWithin);
  c.SetBatchActive(t, false);
  EXPECT_TRUE(c.Quiet(t + 10s).empty()) << "an idle batch has nothing to raise";
}

// The second knob: over the objective, the chunks get shorter first (down
// to min_chunk_scale), then the duty is cut; with headroom the duty comes
// back first, then the chunks' length.
TEST(LatencyObjective, ChunksGetShorterFirstAndLongerLast) {
  Clock::time_point t{};
  auto options = Configured(1000us);
  options.min_duty = 0.25;
  options.min_chunk_scale = 0.25;
  LatencyObjective c(options, t);
  EXPECT_EQ(Feed(c, t, kDecision, 3000us),
            (std::vector<std::string>{"latency_chunk_time", "latency_slowdown"}));
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 0.5);
  EXPECT_DOUBLE_EQ(c.duty(), 1.0) << "the chunks first";
  EXPECT_EQ(Feed(c, t, kDecision, 3000us), std::vector<std::string>{"latency_chunk_time"});
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 0.25);
  EXPECT_TRUE(Feed(c, t, kDecision, 3000us).empty()) << "then the duty";
  EXPECT_DOUBLE_EQ(c.duty(), 0.5);
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 0.25);
  Feed(c, t, 2 * kDecision, 3000us);
  EXPECT_DOUBLE_EQ(c.duty(), 0.25) << "held at min_duty";
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 0.25);

  // Headroom: the duty comes back first (x2 per decision), then the chunks.
  EXPECT_EQ(Feed(c, t, kDecision, 1000us), std::vector<std::string>{"latency_recovered"});
  EXPECT_DOUBLE_EQ(c.duty(), 0.5);
  Feed(c, t, kDecision, 1000us);
  EXPECT_DOUBLE_EQ(c.duty(), 1.0);
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 0.25);
  EXPECT_FALSE(c.FullSpeed());
  EXPECT_EQ(Feed(c, t, kDecision, 1000us), std::vector<std::string>{"latency_chunk_time"});
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 0.5);
  Feed(c, t, kDecision, 1000us);
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 1.0);
  EXPECT_TRUE(c.FullSpeed());
}

TEST(LatencyObjective, BetweenHeadroomAndObjectiveShortChunksStayShort) {
  Clock::time_point t{};
  auto options = Configured(1000us);
  options.min_chunk_scale = 0.25;
  LatencyObjective c(options, t);
  Feed(c, t, kDecision, 3000us);
  ASSERT_DOUBLE_EQ(c.chunk_scale(), 0.5);
  Feed(c, t, 4 * kDecision, 1200us);  // 1.2x: within, no headroom
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 0.5);
  EXPECT_DOUBLE_EQ(c.duty(), 1.0);
}

TEST(LatencyObjective, WithoutASecondKnobTheChunksKeepTheirLength) {
  Clock::time_point t{};
  LatencyObjective c(Configured(1000us), t);
  Feed(c, t, 10 * kDecision, 5000us);
  EXPECT_DOUBLE_EQ(c.duty(), 0.05);
  EXPECT_DOUBLE_EQ(c.chunk_scale(), 1.0);
}

}  // namespace
}  // namespace coexist::pacing
