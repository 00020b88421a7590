// Pacing arithmetic and decisions without a database: chunk sizing, the load
// definition, the throttle state machine, and control commands.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "config_core/config_error.h"
#include "pacing/chunk_sizer.h"
#include "pacing/control_state.h"
#include "pacing/load.h"
#include "pacing/throttle.h"

namespace coexist::pacing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

ChunkSizerOptions Adaptive(int initial) {
  return {.adaptive = true,
          .target = 200ms,
          .min_chunk = 10,
          .max_chunk = 5000,
          .max_growth = 1.2,
          .shrink_after = 2.0,
          .rate_weight = 0.5,
          .initial_size = initial};
}

TEST(ChunkSizer, GrowsAtMostByMaxGrowthPerChunk) {
  ChunkSizer sizer(Adaptive(100));
  // 100 items in 20 ms: 5000 items/s, ideal 1000 per 200 ms; growth caps it.
  sizer.Record(100, 20ms, false);
  EXPECT_EQ(sizer.Next(), 120);
  sizer.Record(120, 24ms, false);
  EXPECT_EQ(sizer.Next(), 144);
}

TEST(ChunkSizer, SettlesOnTheTargetDuration) {
  ChunkSizer sizer(Adaptive(100));
  // A steady 1000 items/s: the size converges to 200 (200 ms per chunk).
  for (int i = 0; i < 30; ++i) {
    int size = sizer.Next();
    sizer.Record(size, std::chrono::milliseconds(size), false);
  }
  EXPECT_EQ(sizer.Next(), 200);
  EXPECT_DOUBLE_EQ(sizer.rate(), 1000);
}

TEST(ChunkSizer, CapsAtMaxChunk) {
  ChunkSizer sizer(Adaptive(4800));
  sizer.Record(4800, 10ms, false);
  EXPECT_EQ(sizer.Next(), 5000);
}

TEST(ChunkSizer, ShrinksAtOnceWhenAChunkTakesFarLongerThanTheTarget) {
  ChunkSizer sizer(Adaptive(1000));
  sizer.Record(1000, 200ms, false);  // on target: 5000 items/s
  EXPECT_EQ(sizer.Next(), 1000);
  // 1000 items in 2 s (10x the target): 500 items/s now, so 100 next, not
  // the average's (5000 + 500) / 2 x 0.2 = 550.
  sizer.Record(1000, 2000ms, false);
  EXPECT_EQ(sizer.Next(), 100);
  EXPECT_DOUBLE_EQ(sizer.rate(), 500);
}

TEST(ChunkSizer, ShrinksGraduallyWhenOnlySomewhatSlow) {
  ChunkSizer sizer(Adaptive(1000));
  sizer.Record(1000, 200ms, false);  // 5000/s
  sizer.Record(1000, 400ms, false);  // 2500/s: not over 2x, so averaged
  EXPECT_EQ(sizer.Next(), 750);      // (5000 + 2500) / 2 x 0.2
}

TEST(ChunkSizer, ClampsToMinChunk) {
  ChunkSizer sizer(Adaptive(100));
  sizer.Record(100, 10s, false);  // 10 items/s: ideal 2
  EXPECT_EQ(sizer.Next(), 10);
  ChunkSizer small(Adaptive(1));  // the initial size is clamped too
  EXPECT_EQ(small.Next(), 10);
}

TEST(ChunkSizer, TimeoutHalvesAtLeast) {
  ChunkSizer sizer(Adaptive(1000));
  sizer.Record(1000, 100ms, true);  // fast but cancelled: at most half
  EXPECT_EQ(sizer.Next(), 500);
}

TEST(ChunkSizer, EmptyChunksTeachNothing) {
  ChunkSizer sizer(Adaptive(300));
  sizer.Record(0, 5s, false);
  EXPECT_EQ(sizer.Next(), 300);
  EXPECT_EQ(sizer.rate(), 0);
}

TEST(ChunkSizer, FixedModeNeverChanges) {
  auto options = Adaptive(500);
  options.adaptive = false;
  options.initial_size = 7;  // fixed mode ignores min_chunk
  ChunkSizer sizer(options);
  sizer.Record(7, 10s, false);
  sizer.Record(7, 1ms, true);
  EXPECT_EQ(sizer.Next(), 7);
  EXPECT_FALSE(sizer.adaptive());
}

TEST(ChunkSizer, OperatorOverridesSwitchModes) {
  ChunkSizer sizer(Adaptive(100));
  sizer.SetFixed(42);
  EXPECT_FALSE(sizer.adaptive());
  EXPECT_EQ(sizer.Next(), 42);
  sizer.SetTarget(1000ms);
  EXPECT_TRUE(sizer.adaptive());
  sizer.Record(42, 42ms, false);  // 1000/s, 1 s target: ideal 1000, growth caps
  EXPECT_EQ(sizer.Next(), 50);    // 42 x 1.2 = 50.4
}

TEST(SplitOnTimeout, RetriesInHalvesRoundedUp) {
  EXPECT_EQ(SplitOnTimeout(100), 50);
  EXPECT_EQ(SplitOnTimeout(7), 4);
  EXPECT_EQ(SplitOnTimeout(1), 1);
  EXPECT_EQ(SplitOnTimeout(0), 1);
}

TEST(Load, EachSignalAgainstItsOwnThreshold) {
  config::LoadThresholds t{.lock_waiters = 5, .replication_lag = 10s, .vacuum = 1};
  Signals s{.lock_waiters = 4, .active_sessions = 500, .replication_lag = 9s};
  EXPECT_TRUE(Evaluate(s, t, true).empty());  // active_sessions has no threshold
  s.lock_waiters = 5;
  s.vacuum = 1;
  auto trips = Evaluate(s, t, true);
  EXPECT_EQ(ReasonOf(trips), "lock_waiters,vacuum");
  EXPECT_EQ(trips[0].value, 5);
  EXPECT_EQ(trips[0].threshold, 5);
}

TEST(Load, ThrottleQueryTripsAboveZeroOnlyForMaxLoad) {
  Signals s{.throttle_query = 0.0};
  EXPECT_TRUE(Evaluate(s, {}, true).empty());
  s.throttle_query = 0.5;
  EXPECT_EQ(ReasonOf(Evaluate(s, {}, true)), "throttle_query");
  EXPECT_TRUE(Evaluate(s, {}, false).empty());
}

TEST(Load, OperatorThresholdSettings) {
  config::LoadThresholds t;
  EXPECT_EQ(ApplyThresholdSetting("7", t), "");
  EXPECT_EQ(t.lock_waiters, 7);
  EXPECT_EQ(ApplyThresholdSetting("replication_lag=1500ms", t), "");
  EXPECT_EQ(t.replication_lag, 1500ms);
  EXPECT_EQ(ApplyThresholdSetting("active_sessions=30", t), "");
  EXPECT_EQ(t.active_sessions, 30);
  EXPECT_EQ(ApplyThresholdSetting("-1", t),
            "'-1' is not a valid value for lock_waiters (a count 0..100000)");
  EXPECT_NE(ApplyThresholdSetting("load=3", t).find("unknown signal 'load'"), std::string::npos);
}

class ThrottleTest : public ::testing::Test {
 protected:
  using Clock = Throttle::Clock;
  Clock::time_point At(int ms) { return Clock::time_point() + std::chrono::milliseconds(ms); }
  std::vector<Trip> Trips(const char* name) { return {{name, 1, 1}}; }
  ThrottleOptions options_{.hold_time = 100ms, .critical_recheck = 50ms, .hibernate_time = 1000ms};
};

TEST_F(ThrottleTest, PausesUntilHealthyForHoldTime) {
  Throttle t(options_);
  auto events = t.Observe(At(0), Trips("lock_waiters"), {});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(ToString(events[0].kind), "throttle_start");
  EXPECT_EQ(events[0].reason, "lock_waiters");
  EXPECT_EQ(t.state(), ThrottleState::kThrottled);
  EXPECT_TRUE(t.Observe(At(10), {}, {}).empty());                     // healthy since 10
  EXPECT_TRUE(t.Observe(At(50), Trips("lock_waiters"), {}).empty());  // not any more
  EXPECT_TRUE(t.Observe(At(60), {}, {}).empty());                     // healthy since 60
  EXPECT_TRUE(t.Observe(At(150), {}, {}).empty());                    // 90 ms < hold
  events = t.Observe(At(160), {}, {});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(ToString(events[0].kind), "throttle_stop");
  EXPECT_EQ(events[0].throttled_for, 160ms);
  EXPECT_EQ(t.state(), ThrottleState::kRunning);
}

TEST_F(ThrottleTest, CriticalTwiceHibernatesThenRechecks) {
  Throttle t(options_);
  auto events = t.Observe(At(0), {}, Trips("lock_waiters"));
  EXPECT_EQ(ToString(events.at(0).kind), "throttle_start");
  EXPECT_EQ(t.state(), ThrottleState::kCriticalPending);
  EXPECT_EQ(t.wake_at(), At(50));
  EXPECT_TRUE(t.Observe(At(20), {}, Trips("lock_waiters")).empty());  // before recheck
  events = t.Observe(At(50), {}, Trips("lock_waiters"));
  EXPECT_EQ(ToString(events.at(0).kind), "hibernate");
  EXPECT_EQ(t.state(), ThrottleState::kHibernating);
  t.Tick(At(1049));
  EXPECT_EQ(t.state(), ThrottleState::kHibernating);
  t.Tick(At(1050));
  EXPECT_EQ(t.state(), ThrottleState::kThrottled);
  t.Observe(At(1060), {}, {});
  EXPECT_EQ(ToString(t.Observe(At(1160), {}, {}).at(0).kind), "throttle_stop");
}

TEST_F(ThrottleTest, CriticalOnceIsOnlyAThrottle) {
  options_.stop_on_critical = true;
  Throttle t(options_);
  t.Observe(At(0), {}, Trips("active_sessions"));
  EXPECT_TRUE(t.Observe(At(50), {}, {}).empty());
  EXPECT_EQ(t.state(), ThrottleState::kThrottled);
}

TEST_F(ThrottleTest, CriticalTwiceStopsWhenConfigured) {
  options_.stop_on_critical = true;
  Throttle t(options_);
  t.Observe(At(0), {}, Trips("vacuum"));
  auto events = t.Observe(At(60), {}, Trips("vacuum"));
  EXPECT_EQ(ToString(events.at(0).kind), "critical_stop");
  EXPECT_EQ(events.at(0).reason, "vacuum");
  EXPECT_EQ(t.state(), ThrottleState::kStopped);
}

TEST(ControlState, CommandsAnswerOneJsonLine) {
  ControlState state(config::LoadThresholds{.lock_waiters = 10});
  EXPECT_EQ(json::parse(state.Handle("pause")), json({{"ok", true}, {"paused", true}}));
  EXPECT_TRUE(state.paused());
  EXPECT_EQ(json::parse(state.Handle(" resume \r")), json({{"ok", true}, {"paused", false}}));
  EXPECT_FALSE(state.paused());
  auto answer = json::parse(state.Handle("chunk-size=250"));
  EXPECT_EQ(answer["chunk_size"], 250);
  auto sizing = state.TakeSizingOverride();
  ASSERT_TRUE(sizing && sizing->chunk_size);
  EXPECT_EQ(*sizing->chunk_size, 250);
  EXPECT_FALSE(state.TakeSizingOverride());
  EXPECT_EQ(json::parse(state.Handle("chunk-time=1.5s"))["chunk_time_ms"], 1500);
  EXPECT_EQ(json::parse(state.Handle("max-load=3"))["max_load"]["lock_waiters"], 3);
  EXPECT_EQ(state.max_load().lock_waiters, 3);
  EXPECT_EQ(json::parse(state.Handle("stop")), json({{"ok", true}, {"stopping", true}}));
  EXPECT_TRUE(state.stop_requested());
}

TEST(ControlState, BadCommandsGetAClearError) {
  ControlState state({});
  for (const char* bad : {"frobnicate", "", "chunk-size=0", "chunk-size=12x", "chunk-time=fast",
                          "max-load=lock_waiters=-2", "pause=1", "status=now"}) {
    auto answer = json::parse(state.Handle(bad));
    EXPECT_EQ(answer["ok"], false) << bad;
    EXPECT_FALSE(answer["error"].get<std::string>().empty()) << bad;
    EXPECT_FALSE(answer["hint"].get<std::string>().empty()) << bad;
  }
  EXPECT_EQ(json::parse(state.Handle("frobnicate"))["error"], "unknown command 'frobnicate'");
  EXPECT_FALSE(state.paused());
  EXPECT_FALSE(state.stop_requested());
}

TEST(ControlState, StatusComputesEta) {
  ControlState state({});
  StatusSnapshot s;
  s.state = "running";
  s.chunk_size = 80;
  state.Publish(s);
  state.PublishProgress(400, 1000, 100.0);
  auto status = json::parse(state.Handle("status"));
  EXPECT_EQ(status["state"], "running");
  EXPECT_EQ(status["done"], 400);
  EXPECT_EQ(status["total"], 1000);
  EXPECT_DOUBLE_EQ(status["eta_seconds"].get<double>(), 6.0);
  EXPECT_EQ(status["chunk_size"], 80);
  state.PublishProgress(400, std::nullopt, 100.0);
  EXPECT_TRUE(json::parse(state.Handle("status"))["eta_seconds"].is_null());
}

}  // namespace
}  // namespace coexist::pacing

namespace coexist::config {
namespace {

using namespace std::chrono_literals;

TEST(PacingConfig, DefaultsAndAFullSection) {
  auto defaults = LoadString("", "empty.yaml").pacing;
  EXPECT_TRUE(defaults.adaptive);
  EXPECT_EQ(defaults.chunk_time, 200ms);
  EXPECT_EQ(defaults.max_load.lock_waiters, 10);
  EXPECT_EQ(defaults.critical_action, config::CriticalAction::kHibernate);
  auto p = LoadString(R"(pacing:
  adaptive: false
  chunk_time: 250ms
  min_chunk: 5
  max_chunk: 50
  check_interval: 500ms
  max_load: {lock_waiters: 3, replication_lag: 2s, vacuum: 1}
  critical_load: {active_sessions: 80}
  critical_action: stop
  throttle_query: SELECT 0
  pause_file: /run/coexist/pause
  control_socket: /run/coexist/ctl.sock
)",
                      "p.yaml")
               .pacing;
  EXPECT_FALSE(p.adaptive);
  EXPECT_EQ(p.chunk_time, 250ms);
  EXPECT_EQ(p.max_chunk, 50);
  EXPECT_EQ(p.max_load.lock_waiters, 3);
  EXPECT_EQ(p.max_load.replication_lag, 2s);
  EXPECT_EQ(p.max_load.vacuum, 1);
  EXPECT_EQ(p.critical_load.active_sessions, 80);
  EXPECT_EQ(p.critical_load.lock_waiters, 0);  // a written map is the whole set
  EXPECT_EQ(p.critical_action, config::CriticalAction::kStop);
  EXPECT_EQ(p.throttle_query, "SELECT 0");
  EXPECT_EQ(p.control_socket, "/run/coexist/ctl.sock");
}

TEST(PacingConfig, ErrorsNameTheKey) {
  try {
    LoadString("pacing:\n  min_chunk: 600\n  max_chunk: 500\n", "p.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "p.yaml:2:14: pacing.min_chunk: min_chunk (600) is larger than max_chunk (500)");
  }
  try {
    LoadString("pacing:\n  max_load:\n    lock_waits: 3\n", "p.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("pacing.max_load.lock_waits: unknown key"),
              std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("lock_waiters"), std::string::npos) << e.hint();
  }
  EXPECT_THROW(LoadString("pacing:\n  critical_action: panic\n", "p.yaml"), ConfigError);
}

TEST(PacingConfig, TheOnlineLatencyObjective) {
  EXPECT_FALSE(LoadString("", "empty.yaml").pacing.online_latency) << "off unless written";
  auto defaults = LoadString("pacing:\n  online_latency: {}\n", "p.yaml").pacing.online_latency;
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->objective, 1.25);
  EXPECT_FALSE(defaults->baseline) << "measured";
  EXPECT_EQ(defaults->probe, config::LatencyProbeKind::kLock);
  EXPECT_EQ(defaults->signal, config::LatencySignal::kSessions);
  auto c = LoadString(R"(pacing:
  online_latency:
    signal: probe
    objective: 1.5x
    baseline: 2.5ms
    percentile: 99
    probe: read
    probe_interval: 20ms
    window: 1s
    learn_time: 3s
    min_duty: 0.1
    tolerance: 200us
    min_chunk_time: 5ms
    start: full
)",
                      "p.yaml")
               .pacing.online_latency;
  ASSERT_TRUE(c);
  EXPECT_EQ(c->signal, config::LatencySignal::kProbe);
  EXPECT_EQ(c->objective, 1.5);
  EXPECT_EQ(c->baseline, std::chrono::microseconds(2500));
  EXPECT_EQ(c->percentile, 99);
  EXPECT_EQ(c->probe, config::LatencyProbeKind::kRead);
  EXPECT_EQ(c->probe_interval, 20ms);
  EXPECT_EQ(c->window, 1s);
  EXPECT_EQ(c->learn_time, 3s);
  EXPECT_EQ(c->min_duty, 0.1);
  EXPECT_EQ(c->tolerance, std::chrono::microseconds(200));
  EXPECT_EQ(c->min_chunk_time, 5ms);
  EXPECT_EQ(c->start, config::LatencyStart::kFull);
  EXPECT_EQ(defaults->start, config::LatencyStart::kSlow);
  EXPECT_FALSE(defaults->min_chunk_time) << "chunks keep chunk_time";
  EXPECT_FALSE(defaults->percentile) << "the signal's";
  EXPECT_FALSE(defaults->tolerance) << "the signal's";
  EXPECT_EQ(LoadString("pacing: {online_latency: {objective: 2}}", "p.yaml")
                .pacing.online_latency->objective,
            2.0);
  EXPECT_FALSE(LoadString("pacing: {online_latency: {baseline: measured}}", "p.yaml")
                   .pacing.online_latency->baseline);
}

TEST(PacingConfig, AnObjectiveThatCannotBeMetIsALocatedError) {
  auto error = [](const std::string& yaml) -> std::string {
    try {
      LoadString(yaml, "p.yaml");
    } catch (const ConfigError& e) {
      return std::string(e.what()) + " | " + e.hint();
    }
    return "no error";
  };
  EXPECT_EQ(error("pacing:\n  online_latency: {objective: 1.0x}\n"),
            "p.yaml:2:31: pacing.online_latency.objective: an objective of 1.0x cannot be met | "
            "the batch always costs online something; allow some slowdown, e.g. 1.25x.");
  EXPECT_EQ(error("pacing:\n  online_latency: {objective: 0.8}\n"),
            "p.yaml:2:31: pacing.online_latency.objective: an objective of 0.8 cannot be met | "
            "the batch always costs online something; allow some slowdown, e.g. 1.25x.");
  EXPECT_EQ(error("pacing:\n  online_latency: {objective: fast}\n"),
            "p.yaml:2:31: pacing.online_latency.objective: 'fast' is not a ratio | write how "
            "much slower online may get while the batch runs, e.g. 1.25x (25 % slower).");
  EXPECT_EQ(error("pacing:\n  online_latency: {baseline: 0ms}\n"),
            "p.yaml:2:30: pacing.online_latency.baseline: a baseline of 0ms is out of range | "
            "write the probe's latency without the batch (more than 0 and at most 1m, e.g. 2ms) "
            "or 'measured' to learn it before the first chunk.");
  EXPECT_EQ(error("pacing:\n  online_latency: {baseline: learned}\n"),
            "p.yaml:2:30: pacing.online_latency.baseline: 'learned' is not a duration | write "
            "the probe's latency without the batch (more than 0 and at most 1m, e.g. 2ms) or "
            "'measured' to learn it before the first chunk.");
  EXPECT_EQ(error("pacing:\n  online_latency: {tolerance: -1ms}\n"),
            "p.yaml:2:31: pacing.online_latency.tolerance: '-1ms' is not a duration | latencies "
            "within baseline + tolerance meet the objective; 0 to 1m, e.g. 500us.");
  EXPECT_EQ(error("pacing:\n  online_latency: {window: 100ms, probe_interval: 50ms}\n"),
            "p.yaml:2:28: pacing.online_latency.window: the window holds fewer than 5 probes | "
            "a decision needs at least 5 probes: make window at least 5 x probe_interval.");
  EXPECT_EQ(error("pacing:\n  chunk_time: 20ms\n  online_latency: {min_chunk_time: 50ms}\n"),
            "p.yaml:3:36: pacing.online_latency.min_chunk_time: min_chunk_time (50ms) is longer "
            "than pacing.chunk_time (20ms) | the second knob only shortens chunks: make it at "
            "most chunk_time, or leave it out.");
  EXPECT_EQ(error("pacing:\n  online_latency: {signal: pg_stat_statements}\n"),
            "p.yaml:2:28: pacing.online_latency.signal: unknown value 'pg_stat_statements' | "
            "use one of: sessions, probe.");
  EXPECT_NE(error("pacing:\n  online_latency: {probe: nowait}\n").find("unknown value"),
            std::string::npos);
  EXPECT_NE(error("pacing:\n  online_latency: {objectve: 2x}\n").find("objective"),
            std::string::npos);
}

}  // namespace
}  // namespace coexist::config
