// A sixth policy from the test tree, added through the registry alone: the
// loader accepts its name and its own key, and a real batch runs with it.
// Nothing outside policies/ knows the five built-in names either; this is
// the proof that nothing needs to.

#include <gtest/gtest.h>

#include "batch/enqueue.h"
#include "batch/runner.h"
#include "config/config.h"
#include "config_core/config_error.h"
#include "config_core/yaml_reader.h"
#include "policies/registry.h"
#include "tests/support/database_test.h"
#include "tests/support/ledger_operation.h"

namespace coexist::batch {
namespace {

// Applies every record unless someone holds its row lock, then defers it
// with the reason its own key, defer_reason, names.
class ApplyUnlessRowLocked : public policies::Policy {
 public:
  static constexpr const char* kName = "apply_unless_row_locked";

  struct Options {
    std::string defer_reason = "row_locked";
  };
  static Options ReadOptions(config::Section& s, const policies::ReadContext& /*context*/) {
    Options options;
    s.String("defer_reason", options.defer_reason);
    if (options.defer_reason.empty()) {
      s.Fail(s.node()["defer_reason"], "defer_reason", "a reason is required here");
    }
    return options;
  }

  explicit ApplyUnlessRowLocked(config::PolicyConfig config)
      : options_(policies::OptionsOf<Options>(config)) {}
  const char* Name() const override { return kName; }
  policies::Decision Decide(const policies::RecordFacts& facts) const override {
    if (facts.row_locked) return {policies::Action::kDefer, options_.defer_reason};
    return {policies::Action::kApply};
  }

 private:
  Options options_;
};

void RegisterToy() {
  static const bool registered =
      (policies::Register(policies::Registration::Of<ApplyUnlessRowLocked>()), true);
  ASSERT_TRUE(registered);
}

std::string Message(const std::string& yaml) {
  try {
    config::LoadString(yaml, "toy.yaml");
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

class ToyPolicyTest : public testing::DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    RegisterToy();
    QueryValue("CREATE TABLE ledger (key bigint NOT NULL)");
  }

  config::Config Config(const std::string& policy_yaml) {
    return config::LoadString(
        "batch: {job: j, chunk_size: 5}\npolicy:\n" + policy_yaml + testing::LedgerOperation(),
        "toy.yaml");
  }
};

TEST_F(ToyPolicyTest, TheLoaderTakesItsNameAndItsOwnKeys) {
  auto config = Config("  name: apply_unless_row_locked\n  defer_reason: toy_locked\n");
  EXPECT_EQ(config.policy.name, "apply_unless_row_locked");
  EXPECT_EQ(policies::OptionsOf<ApplyUnlessRowLocked::Options>(config.policy).defer_reason,
            "toy_locked");
  // Its own validation, located like the built-in policies' ...
  EXPECT_EQ(Message("policy:\n  name: apply_unless_row_locked\n  defer_reason: \"\"\n"),
            "toy.yaml:3:17: policy.defer_reason: a reason is required here");
  // ... another policy's keys are unknown to it, and its key to them.
  EXPECT_EQ(Message("policy:\n  name: apply_unless_row_locked\n  max_wait: 1s\n"),
            "toy.yaml:3:3: policy.max_wait: unknown key");
  EXPECT_EQ(Message("policy:\n  name: skip_locked\n  defer_reason: x\n"),
            "toy.yaml:3:3: policy.defer_reason: unknown key");
}

TEST_F(ToyPolicyTest, RunsARealBatch) {
  std::vector<EnqueueItem> items;
  for (long long k = 1; k <= 20; ++k) items.push_back({std::to_string(k), "{}", std::nullopt});
  EnqueueItems(conninfo(), "j", items);
  auto config = Config("  name: apply_unless_row_locked\n  defer_reason: toy_locked\n");
  {
    auto online = Connect("coexist-online");
    pqxx::work hold(*online);
    hold.exec("SELECT 1 FROM products WHERE id IN (4, 9) FOR UPDATE");
    auto summary = batch::Run(conninfo(), config);
    EXPECT_EQ(summary.policy, "apply_unless_row_locked");
    EXPECT_EQ(summary.counts.done, 18);
    EXPECT_EQ(summary.counts.deferred, 2);
    EXPECT_EQ(summary.counts.deferrals_by_reason["toy_locked"], 2);
  }
  EXPECT_EQ(
      QueryValue("SELECT string_agg(record_key::text, ',' ORDER BY record_key::bigint)"
                 " FROM coexist.items WHERE state = 'deferred' AND defer_reason = 'toy_locked'"),
      "4,9");
  EXPECT_EQ(QueryValue("SELECT string_agg(DISTINCT policy, ',') FROM coexist.runs"),
            "apply_unless_row_locked");
  // The locks are gone: the next run applies the two.
  auto next = batch::Run(conninfo(), config);
  EXPECT_EQ(next.counts.done, 2);
  EXPECT_EQ(next.counts.deferred, 0);
  EXPECT_EQ(Count("SELECT count(*) FROM coexist.items WHERE state = 'done'"), 20);
  EXPECT_EQ(Count("SELECT count(DISTINCT key) FROM ledger"), 20);
  EXPECT_EQ(Count("SELECT count(*) FROM ledger"), 20);
}

}  // namespace
}  // namespace coexist::batch
