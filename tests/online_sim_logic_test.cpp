// The online simulator's pure logic (no database): the online: section's
// validation with exact messages, key choice, think times, backoff,
// latency percentiles.

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "config/config.h"
#include "config_core/config_error.h"
#include "online-sim/distributions.h"
#include "online-sim/stats.h"

namespace coexist::online_sim {
namespace {

using namespace std::chrono_literals;

TEST(OnlineConfig, ReadsTheSection) {
  auto config = config::LoadString(R"(
online:
  model: open
  rate: 250
  users: 2000
  pool_size: 32
  think_time: 1s
  think_distribution: lognormal
  key_distribution: hot_set
  hot_traffic: 0.9
  hot_keys: 0.05
  mix: {view: 3, nolock: 1}
  lock_mode: nowait
  offline_ttl: 10s
  latency_limit: 50ms
  seed: 7
)",
                                   "online.yaml");
  const auto& o = config.online;
  EXPECT_EQ(o.model, config::LoadModel::kOpen);
  EXPECT_EQ(o.rate, 250);
  EXPECT_EQ(o.users, 2000);
  EXPECT_EQ(o.pool_size, 32);
  EXPECT_EQ(o.think_distribution, config::ThinkDistribution::kLognormal);
  EXPECT_EQ(o.hot_keys, 0.05);
  EXPECT_EQ(o.mix.view, 3);
  EXPECT_EQ(o.mix.nolock, 1);
  EXPECT_EQ(o.mix.optimistic_edit, 15);  // a kind not named keeps its default weight
  EXPECT_EQ(o.lock_mode, config::LockMode::kNowait);
  EXPECT_EQ(o.offline_ttl, 10s);
  EXPECT_EQ(o.latency_limit, 50ms);
  EXPECT_EQ(o.seed, 7);
}

// A custom kind's script: \set lines, placeholders numbered in order of
// first use (the same name, the same number), and what is quoted,
// commented or a :: cast left alone.
TEST(OnlineConfig, ReadsCustomKinds) {
  auto config = config::LoadString(R"(
online:
  mix: {view: 1, multi_edit: 2, settle: 3}
  multi_edit_keys: 5
  custom_kinds:
    settle:
      script:
        - \set key random_key
        - \set qty random(-2, 5)
        - \sleep 2 ms
        - "UPDATE t SET s = s - :qty, n = ':qty' || \":key\" WHERE id = :key::bigint AND :qty > 0;"
        - SELECT :key -- :qty
    idle:
      script: [SELECT 1]
)",
                                   "online.yaml");
  const auto& o = config.online;
  EXPECT_EQ(o.mix.multi_edit, 2);
  EXPECT_EQ(o.multi_edit_keys, 5);
  ASSERT_EQ(o.custom_kinds.size(), 2u);
  const auto& settle = o.custom_kinds[0];
  EXPECT_EQ(settle.name, "settle");
  EXPECT_EQ(settle.weight, 3);
  EXPECT_EQ(o.custom_kinds[1].weight, 0);  // not in the mix: defined, never run
  EXPECT_EQ(settle.variables, (std::vector<std::string>{"key", "qty"}));
  ASSERT_EQ(settle.script.size(), 5u);
  using Type = config::ScriptStep::Type;
  EXPECT_EQ(settle.script[0].type, Type::kSetKey);
  EXPECT_EQ(settle.script[1].type, Type::kSetRandom);
  EXPECT_EQ(settle.script[1].min, -2);
  EXPECT_EQ(settle.script[1].max, 5);
  EXPECT_EQ(settle.script[1].variable, 1);
  EXPECT_EQ(settle.script[2].type, Type::kSleep);
  EXPECT_EQ(settle.script[2].sleep, 2ms);
  EXPECT_EQ(settle.script[3].sql,
            "UPDATE t SET s = s - $1, n = ':qty' || \":key\" WHERE id = $2::bigint AND $1 > 0");
  EXPECT_EQ(settle.script[3].params, (std::vector<int>{1, 0}));
  EXPECT_EQ(settle.script[3].at.ToString(), "online.yaml:11:11");
  EXPECT_EQ(settle.script[4].sql, "SELECT $1 -- :qty");
  EXPECT_EQ(settle.script[4].params, (std::vector<int>{0}));
}

struct Bad {
  const char* name;
  const char* yaml;
  const char* message;
  const char* hint;
};

class BadOnlineConfig : public ::testing::TestWithParam<Bad> {};

TEST_P(BadOnlineConfig, FailsWithItsPlace) {
  try {
    config::LoadString(GetParam().yaml, "sim.yaml");
    FAIL() << "accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), GetParam().message);
    EXPECT_NE(e.hint().find(GetParam().hint), std::string::npos) << e.hint();
    EXPECT_EQ(e.code(), ExitCode::kConfig);
  }
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(Cases, BadOnlineConfig, ::testing::Values(
  Bad{"negative_weight", "online:\n  mix:\n    view: -1\n",
      "sim.yaml:3:11: online.mix.view: '-1' is out of range", "allowed range is 0"},
  Bad{"unknown_kind", "online:\n  mix:\n    veiw: 1\n",
      "sim.yaml:3:5: online.mix.veiw: unknown key", "did you mean 'view'?"},
  Bad{"all_zero", "online:\n  mix:\n    view: 0\n    optimistic_edit: 0\n    pessimistic_edit: 0\n"
                  "    offline_edit: 0\n    atomic_decrement: 0\n",
      "sim.yaml:3:5: online.mix: every weight is zero, so no transaction would run",
      "give at least one kind a positive weight"},
  Bad{"unknown_model", "online:\n  model: bursty\n",
      "sim.yaml:2:10: online.model: unknown value 'bursty'", "use one of: closed, open."},
  Bad{"pool_zero", "online:\n  pool_size: 0\n",
      "sim.yaml:2:14: online.pool_size: '0' is out of range", "1 to 10000"},
  Bad{"backoff_base_above_cap", "online:\n  backoff_base: 1s\n  backoff_cap: 100ms\n",
      "sim.yaml:2:17: online.backoff_base: backoff_base (1s) is larger than backoff_cap (100ms)",
      "raise backoff_cap"},
  Bad{"value_is_version", "online:\n  value_column: version\n",
      "sim.yaml:2:17: online.value_column: 'version' is the target's version column",
      "the database bumps the version"},
  Bad{"unknown_distribution", "online:\n  key_distribution: pareto\n",
      "sim.yaml:2:21: online.key_distribution: unknown value 'pareto'", "uniform, zipf, hot_set"},
  Bad{"multi_edit_one_key", "online:\n  multi_edit_keys: 1\n",
      "sim.yaml:2:20: online.multi_edit_keys: '1' is out of range", "2 to 1000"},
  Bad{"all_zero_with_custom", "online:\n  mix: {view: 0, optimistic_edit: 0, pessimistic_edit: 0,"
                              " offline_edit: 0, atomic_decrement: 0, mine: 0}\n"
                              "  custom_kinds:\n    mine:\n      script: [SELECT 1]\n",
      "sim.yaml:2:8: online.mix: every weight is zero, so no transaction would run",
      "give at least one kind a positive weight"},
  Bad{"mix_names_an_undefined_kind", "online:\n  mix: {settle: 1}\n",
      "sim.yaml:2:9: online.mix.settle: unknown key", "multi_edit"},
  Bad{"custom_named_like_a_builtin", "online:\n  custom_kinds:\n    view:\n      script: [SELECT 1]\n",
      "sim.yaml:3:5: online.custom_kinds.view: 'view' is a built-in kind",
      "the built-in kinds are view, optimistic_edit, pessimistic_edit, offline_edit, "
      "atomic_decrement, nolock, multi_edit."},
  Bad{"custom_bad_name", "online:\n  custom_kinds:\n    settle-order:\n      script: [SELECT 1]\n",
      "sim.yaml:3:5: online.custom_kinds.settle-order: 'settle-order' is not a kind name",
      "letters, digits and _"},
  Bad{"custom_without_script", "online:\n  custom_kinds:\n    settle:\n      scirpt: [SELECT 1]\n",
      "sim.yaml:4:7: online.custom_kinds.settle.scirpt: unknown key", "did you mean 'script'?"},
  Bad{"custom_null", "online:\n  custom_kinds:\n    settle:\n",
      "sim.yaml:3:5: online.custom_kinds.settle: a custom kind needs a script", "under script:"},
  Bad{"custom_empty_script", "online:\n  custom_kinds:\n    settle:\n      script: []\n",
      "sim.yaml:4:15: online.custom_kinds.settle.script: the script is empty", "under script:"},
  Bad{"custom_no_sql", "online:\n  custom_kinds:\n    settle:\n      script:\n"
                       "        - \\set key random_key\n        - \\sleep 1ms\n",
      "sim.yaml:5:9: online.custom_kinds.settle.script: the script has no SQL statement",
      "\\set and \\sleep lines only prepare it"},
  Bad{"custom_unknown_placeholder", "online:\n  custom_kinds:\n    settle:\n      script:\n"
                       "        - \\set key random_key\n"
                       "        - UPDATE t SET s = s - :qty WHERE id = :key\n",
      "sim.yaml:6:11: online.custom_kinds.settle.script: ':qty' is not set on an earlier line",
      "set it first with \\set qty ... (set so far: key)."},
  Bad{"custom_placeholder_set_later", "online:\n  custom_kinds:\n    settle:\n      script:\n"
                       "        - SELECT :key\n        - \\set key random_key\n",
      "sim.yaml:5:11: online.custom_kinds.settle.script: ':key' is not set on an earlier line",
      "(nothing is set so far)"},
  Bad{"custom_bad_set", "online:\n  custom_kinds:\n    settle:\n      script:\n"
                       "        - \\set qty rand(1, 5)\n",
      "sim.yaml:5:11: online.custom_kinds.settle.script: '\\set qty rand(1, 5)' is not a \\set "
      "this script understands", "\\set NAME random(MIN, MAX)"},
  Bad{"custom_set_without_value", "online:\n  custom_kinds:\n    settle:\n      script:\n"
                       "        - \\set qty\n",
      "sim.yaml:5:11: online.custom_kinds.settle.script: '\\set qty' is not a \\set this script "
      "understands", "\\set NAME random_key"},
  Bad{"custom_bad_variable", "online:\n  custom_kinds:\n    settle:\n      script:\n"
                       "        - \\set 2x random_key\n",
      "sim.yaml:5:11: online.custom_kinds.settle.script: '2x' is not a variable name",
      "letters, digits and _"},
  Bad{"custom_random_backwards", "online:\n  custom_kinds:\n    settle:\n      script:\n"
                       "        - \\set qty random(5, 1)\n",
      "sim.yaml:5:11: online.custom_kinds.settle.script: 'random(5, 1)': MIN is larger than MAX",
      "random(1, 5)"},
  Bad{"custom_unknown_command", "online:\n  custom_kinds:\n    settle:\n      script:\n"
                       "        - \\gset\n",
      "sim.yaml:5:11: online.custom_kinds.settle.script: '\\gset' is not a script command",
      "\\sleep DURATION"},
  Bad{"custom_bad_sleep", "online:\n  custom_kinds:\n    settle:\n      script:\n"
                       "        - \\sleep 2 parsecs\n",
      "sim.yaml:5:11: online.custom_kinds.settle.script: '\\sleep 2 parsecs': '2 parsecs' is not "
      "a duration", "from 0 to 60s"},
  Bad{"custom_positional_parameter", "online:\n  custom_kinds:\n    settle:\n      script:\n"
                       "        - SELECT $1\n",
      "sim.yaml:5:11: online.custom_kinds.settle.script: '$1': a script binds its values as "
      ":name placeholders", "coexist numbers the parameters"},
  Bad{"custom_two_statements", "online:\n  custom_kinds:\n    settle:\n      script:\n"
                       "        - SELECT 1; SELECT 2\n",
      "sim.yaml:5:11: online.custom_kinds.settle.script: two statements on one line",
      "split it at ';'"},
  Bad{"custom_empty_line", "online:\n  custom_kinds:\n    settle:\n      script:\n"
                       "        - SELECT 1\n        - ''\n",
      "sim.yaml:6:11: online.custom_kinds.settle.script: line 2 is empty", "remove it"}
), [](const auto& test_case) { return std::string(test_case.param.name); });
// clang-format on

config::OnlineConfig Keys(config::KeyDistribution shape) {
  config::OnlineConfig c;
  c.key_distribution = shape;
  return c;
}

std::vector<long long> Histogram(const KeyChooser& chooser, uint64_t count, int draws) {
  Random random(42);
  std::vector<long long> seen(count);
  for (int i = 0; i < draws; ++i) {
    uint64_t k = chooser.Next(random);
    EXPECT_LT(k, count);
    if (k < count) ++seen[k];
  }
  return seen;
}

TEST(KeyChooser, UniformSpreadsEvenly) {
  auto seen = Histogram(KeyChooser(Keys(config::KeyDistribution::kUniform), 10), 10, 100000);
  for (long long n : seen) EXPECT_NEAR(n, 10000, 500);
}

TEST(KeyChooser, ZipfFollowsOneOverRank) {
  auto config = Keys(config::KeyDistribution::kZipf);
  config.zipf_s = 1.0;
  auto seen = Histogram(KeyChooser(config, 1000), 1000, 200000);
  // P(rank 1) / P(rank 2) = 2 and P(1) / P(10) = 10 for s = 1.
  EXPECT_NEAR(static_cast<double>(seen[0]) / static_cast<double>(seen[1]), 2.0, 0.15);
  EXPECT_NEAR(static_cast<double>(seen[0]) / static_cast<double>(seen[9]), 10.0, 1.5);
  // H(1000) = 7.485: rank 1 gets 13.4 % of the picks.
  EXPECT_NEAR(static_cast<double>(seen[0]) / 200000, 1 / 7.485, 0.01);
}

TEST(KeyChooser, HotSetSendsItsShareToTheHotKeys) {
  auto config = Keys(config::KeyDistribution::kHotSet);
  config.hot_traffic = 0.8;
  config.hot_keys = 0.1;
  auto seen = Histogram(KeyChooser(config, 100), 100, 100000);
  long long hot = 0;
  for (int i = 0; i < 10; ++i) hot += seen[static_cast<size_t>(i)];
  EXPECT_NEAR(static_cast<double>(hot) / 100000, 0.8, 0.01);
}

TEST(KeyChooser, SameSeedSameChoices) {
  KeyChooser chooser(Keys(config::KeyDistribution::kZipf), 500);
  Random a(7), b(7);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(chooser.Next(a), chooser.Next(b));
}

TEST(ThinkTime, MeansMatchTheConfiguredMean) {
  for (auto shape : {config::ThinkDistribution::kFixed, config::ThinkDistribution::kExponential,
                     config::ThinkDistribution::kLognormal}) {
    ThinkTime think(shape, 1000ms, 0.5);
    Random random(1);
    double sum = 0;
    for (int i = 0; i < 20000; ++i) sum += static_cast<double>(think.Next(random).count());
    EXPECT_NEAR(sum / 20000 / 1000, 1000, 30) << static_cast<int>(shape);
  }
}

TEST(Backoff, IsCappedExponentialWithFullJitter) {
  Random random(3);
  for (int retry = 0; retry < 12; ++retry) {
    auto ceiling = std::min(100000LL, 5000LL << retry);
    for (int i = 0; i < 200; ++i) {
      auto wait = Backoff(5ms, 100ms, retry, random).count();
      EXPECT_GE(wait, 0);
      EXPECT_LE(wait, ceiling);
    }
  }
  EXPECT_EQ(Backoff(0ms, 100ms, 5, random).count(), 0);
}

TEST(Kinds, TheBuiltInKindsAreTheConfigurationsInItsOrder) {
  ASSERT_EQ(static_cast<size_t>(kKindCount), config::kBuiltinKinds.size());
  for (int k = 0; k < kKindCount; ++k) {
    EXPECT_EQ(KindName(static_cast<Kind>(k)), config::kBuiltinKinds[static_cast<size_t>(k)]);
  }
}

TEST(LatencyHistogram, PercentilesWithinOnePercent) {
  LatencyHistogram h;
  for (int i = 1; i <= 1000; ++i) h.Add(std::chrono::microseconds(i * 100));  // 0.1..100 ms
  auto s = h.Summarize();
  EXPECT_EQ(s.count, 1000);
  EXPECT_NEAR(s.p50_ms, 50, 0.6);
  EXPECT_NEAR(s.p95_ms, 95, 1.0);
  EXPECT_NEAR(s.p99_ms, 99, 1.0);
  EXPECT_DOUBLE_EQ(s.max_ms, 100);
  EXPECT_NEAR(s.mean_ms, 50.05, 0.01);
}

TEST(Outcomes, EveryCodeHasItsOwnOutcome) {
  EXPECT_EQ(OutcomeOf("55P03", true), Outcome::kNowait);
  EXPECT_EQ(OutcomeOf("55P03", false), Outcome::kLockTimeout);
  EXPECT_EQ(OutcomeOf("CX001", false), Outcome::kEditLockBusy);
  EXPECT_EQ(OutcomeOf("CX002", false), Outcome::kLockRevoked);
  EXPECT_EQ(OutcomeOf("CX003", false), Outcome::kRefusedWindow);
  EXPECT_EQ(OutcomeOf("CX004", false), Outcome::kRefusedOwner);
  EXPECT_EQ(OutcomeOf("CX005", false), Outcome::kRefusedEditLocked);
  EXPECT_EQ(OutcomeOf("40P01", false), Outcome::kDeadlock);
  EXPECT_EQ(OutcomeOf("40001", false), Outcome::kSerialization);
  EXPECT_EQ(OutcomeOf("57014", false), Outcome::kCanceled);
  EXPECT_EQ(OutcomeOf("57P01", false), Outcome::kTerminated);
  EXPECT_EQ(OutcomeOf("22012", false), Outcome::kOther);
  EXPECT_STREQ(OutcomeName(Outcome::kRefusedEditLocked), "refused_edit_locked");
  EXPECT_STREQ(OutcomeName(Outcome::kOther), "other");
}

}  // namespace
}  // namespace coexist::online_sim
