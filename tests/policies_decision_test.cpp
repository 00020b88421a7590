// Decision tables of the five policies: pure, no database, microseconds.

#include <date/tz.h>
#include <gtest/gtest.h>

#include "policies/batch_priority.h"
#include "policies/online_priority.h"
#include "policies/policy.h"
#include "policies/skip_locked.h"
#include "policies/time_window.h"

namespace coexist::policies {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The options the tables below assume: short waits, three deferrals.
const OnlinePriority::Options kWait{.max_wait = seconds(3)};
const BatchPriority::Options kForce{.cancel_after = seconds(2), .terminate_after = seconds(5)};

SkipLocked::Options Skip(OnExhausted on_exhausted = OnExhausted::kReport) {
  return {.max_deferrals = 3, .on_exhausted = on_exhausted, .wait = kWait, .force = kForce};
}

// Without options: the policy's defaults.
config::PolicyConfig Named(const std::string& name, std::any options = {}) {
  config::PolicyConfig c;
  c.name = name;
  c.lock_wait_initial = milliseconds(100);
  c.lock_wait_max = milliseconds(1000);
  c.options = std::move(options);
  return c;
}

RecordFacts Facts(bool row_locked, bool edit_locked, int deferrals = 0,
                  milliseconds waited = milliseconds(0)) {
  RecordFacts f;
  f.row_locked = row_locked;
  f.edit_locked = edit_locked;
  f.deferrals = deferrals;
  f.waited = waited;
  return f;
}

TEST(PolicyRegistry, EveryNameCreatesItsPolicy) {
  std::vector<std::string> expected = {"batch_priority", "online_priority", "skip_locked",
                                       "status_partition", "time_window"};
  EXPECT_EQ(Names(), expected);
  for (const auto& name : expected) EXPECT_STREQ(Create(Named(name))->Name(), name.c_str());
  EXPECT_THROW(Create(Named("first_come")), std::invalid_argument);
  EXPECT_STREQ(Create(config::PolicyConfig{})->Name(), "skip_locked");
  // Another policy's options are a bug, not a default.
  EXPECT_THROW(Create(Named("skip_locked", kWait)), std::invalid_argument);
}

TEST(PolicyCapabilities, WhatTheRunnerPreparesFor) {
  auto online = Create(Named("online_priority", kWait));
  EXPECT_TRUE(online->WaitsForEditLocks());
  EXPECT_EQ(online->MaxWait(), seconds(3));
  EXPECT_EQ(online->SignalPattern(), "");
  auto batch = Create(Named("batch_priority", kForce));
  EXPECT_FALSE(batch->WaitsForEditLocks());
  EXPECT_EQ(batch->SignalPattern(), "coexist-online%");
  EXPECT_TRUE(Create(Named("skip_locked", Skip(OnExhausted::kWait)))->WaitsForEditLocks());
  EXPECT_EQ(Create(Named("skip_locked", Skip(OnExhausted::kWait)))->MaxWait(), seconds(3));
  EXPECT_EQ(Create(Named("skip_locked", Skip(OnExhausted::kForce)))->SignalPattern(),
            "coexist-online%");
  EXPECT_EQ(Create(Named("skip_locked", Skip()))->SignalPattern(), "");
  EXPECT_FALSE(Create(Named("skip_locked", Skip()))->WaitsForEditLocks());
  EXPECT_TRUE(Create(Named("status_partition"))->TakesOver());
  EXPECT_FALSE(Create(Named("skip_locked"))->TakesOver());
  Window allow;
  allow.mode = WindowMode::kAllow;
  auto windows = Create(Named("time_window", TimeWindow::Options{.windows = {allow, Window{}}}));
  ASSERT_EQ(windows->Windows().size(), 2u);
  EXPECT_STREQ(ToString(windows->Windows()[0].mode), "allow");
  EXPECT_STREQ(ToString(windows->Windows()[1].mode), "read_only");
  EXPECT_TRUE(Create(Named("online_priority"))->Windows().empty());
}

// A chunk keeps its unordered SKIP LOCKED row locks, in no savepoint, only
// under a policy that never waits for a row: the claim must hold for every
// row-locked fact, however often deferred or long waited.
TEST(PolicyCapabilities, APolicyThatDefersEveryRowLockNeverWaitsForOne) {
  std::vector<std::pair<std::unique_ptr<Policy>, bool>> policies;
  policies.emplace_back(Create(Named("skip_locked", Skip())), true);
  policies.emplace_back(Create(Named("status_partition")), true);
  policies.emplace_back(Create(Named("skip_locked", Skip(OnExhausted::kWait))), false);
  policies.emplace_back(Create(Named("skip_locked", Skip(OnExhausted::kForce))), false);
  policies.emplace_back(Create(Named("online_priority", kWait)), false);
  policies.emplace_back(Create(Named("batch_priority", kForce)), false);
  policies.emplace_back(Create(Named("time_window", TimeWindow::Options{})), false);
  for (const auto& [policy, defers] : policies) {
    EXPECT_EQ(policy->DefersEveryRowLock(), defers) << policy->Name();
    if (!defers) continue;
    for (int deferrals : {0, 1, 3, 10}) {
      for (milliseconds waited : {milliseconds(0), milliseconds(3000), milliseconds(60000)}) {
        for (bool edit_locked : {false, true}) {
          EXPECT_EQ(policy->Decide(Facts(true, edit_locked, deferrals, waited)).action,
                    Action::kDefer)
              << policy->Name() << " deferrals=" << deferrals;
        }
      }
    }
  }
}

TEST(PolicyRegistry, StepsDoubleUpToTheCap) {
  auto c = Named("online_priority");
  EXPECT_EQ(NextStep(c, milliseconds(0)), milliseconds(100));
  EXPECT_EQ(NextStep(c, milliseconds(100)), milliseconds(200));
  EXPECT_EQ(NextStep(c, milliseconds(300)), milliseconds(400));
  EXPECT_EQ(NextStep(c, milliseconds(700)), milliseconds(800));
  EXPECT_EQ(NextStep(c, milliseconds(1500)), milliseconds(1000));
  EXPECT_EQ(NextStep(c, seconds(60)), milliseconds(1000));
}

TEST(SkipLockedDecision, Table) {
  auto p = Create(Named("skip_locked", Skip()));
  EXPECT_EQ(p->Decide(Facts(false, false)), (Decision{Action::kApply}));
  EXPECT_EQ(p->Decide(Facts(true, false)), (Decision{Action::kDefer, "row_locked"}));
  EXPECT_EQ(p->Decide(Facts(false, true)), (Decision{Action::kDefer, "edit_locked"}));
  EXPECT_EQ(p->Decide(Facts(true, true, 2)), (Decision{Action::kDefer, "edit_locked"}));
  // Exhausted, report: still deferred, now escalated.
  EXPECT_EQ(p->Decide(Facts(true, false, 3)),
            (Decision{Action::kDefer, "row_locked", milliseconds(0), true}));
  EXPECT_EQ(p->Decide(Facts(false, false, 9)), (Decision{Action::kApply}));
}

TEST(SkipLockedDecision, ExhaustedWaitActsAsOnlinePriority) {
  auto p = Create(Named("skip_locked", Skip(OnExhausted::kWait)));
  EXPECT_EQ(p->Decide(Facts(true, false, 3)),
            (Decision{Action::kWaitRowLock, "", milliseconds(100), true}));
  EXPECT_EQ(p->Decide(Facts(false, true, 3)),
            (Decision{Action::kWaitEditLock, "", milliseconds(0), true}));
  EXPECT_EQ(p->Decide(Facts(true, false, 3, seconds(3))),
            (Decision{Action::kDefer, "max_wait", milliseconds(0), true}));
  EXPECT_FALSE(p->WaitsInTransaction());
}

TEST(SkipLockedDecision, ExhaustedForceActsAsBatchPriority) {
  auto p = Create(Named("skip_locked", Skip(OnExhausted::kForce)));
  EXPECT_EQ(p->Decide(Facts(false, true, 3)),
            (Decision{Action::kRevokeEditLock, "", milliseconds(0), true}));
  EXPECT_EQ(p->Decide(Facts(true, false, 3)),
            (Decision{Action::kWaitRowLock, "", milliseconds(100), true}));
  EXPECT_TRUE(p->WaitsInTransaction());
  EXPECT_TRUE(p->WantsBlockers());
}

TEST(OnlinePriorityDecision, Table) {
  auto p = Create(Named("online_priority", kWait));
  EXPECT_EQ(p->Decide(Facts(false, false)), (Decision{Action::kApply}));
  EXPECT_EQ(p->Decide(Facts(true, false)), (Decision{Action::kWaitRowLock, "", milliseconds(100)}));
  EXPECT_EQ(p->Decide(Facts(true, false, 0, milliseconds(100))),
            (Decision{Action::kWaitRowLock, "", milliseconds(200)}));
  EXPECT_EQ(p->Decide(Facts(false, true)), (Decision{Action::kWaitEditLock}));
  EXPECT_EQ(p->Decide(Facts(true, true)), (Decision{Action::kWaitEditLock}));
  EXPECT_EQ(p->Decide(Facts(true, false, 0, seconds(3))), (Decision{Action::kDefer, "max_wait"}));
  EXPECT_EQ(p->Decide(Facts(false, true, 0, seconds(4))), (Decision{Action::kDefer, "max_wait"}));
  // Deferrals do not matter to online_priority.
  EXPECT_EQ(p->Decide(Facts(false, false, 100)), (Decision{Action::kApply}));
  EXPECT_FALSE(p->WaitsInTransaction());
  EXPECT_FALSE(p->WantsBlockers());
}

TEST(BatchPriorityDecision, Table) {
  auto p = Create(Named("batch_priority", kForce));
  EXPECT_EQ(p->Decide(Facts(false, false)), (Decision{Action::kApply}));
  EXPECT_EQ(p->Decide(Facts(true, true)), (Decision{Action::kRevokeEditLock}));
  EXPECT_EQ(p->Decide(Facts(true, false)), (Decision{Action::kWaitRowLock, "", milliseconds(100)}));
  auto online = Facts(true, false, 0, seconds(2));
  online.blockers_seen = true;
  online.blockers_are_online = true;
  EXPECT_EQ(p->Decide(online).action, Action::kCancelBlocker);
  online.waited = seconds(5);
  EXPECT_EQ(p->Decide(online).action, Action::kTerminateBlocker);
  online.waited = seconds(5) + milliseconds(4000);
  EXPECT_EQ(p->Decide(online), (Decision{Action::kDefer, "still_locked"}));
  auto other = Facts(true, false, 0, milliseconds(100));
  other.blockers_seen = true;
  other.blockers_are_online = false;
  EXPECT_EQ(p->Decide(other), (Decision{Action::kDefer, "blocker_not_online"}));
  // Unknown blockers past cancel_after: keep waiting, cannot signal nobody.
  EXPECT_EQ(p->Decide(Facts(true, false, 0, seconds(3))).action, Action::kWaitRowLock);
}

TEST(StatusPartitionDecision, Table) {
  auto p = Create(Named("status_partition"));
  EXPECT_TRUE(p->TakesOver());
  EXPECT_EQ(p->Decide(Facts(false, false)), (Decision{Action::kApply}));
  EXPECT_EQ(p->Decide(Facts(true, false)), (Decision{Action::kDefer, "row_locked"}));
  EXPECT_EQ(p->Decide(Facts(false, true)), (Decision{Action::kDefer, "edit_locked"}));
  auto owned = Facts(false, false);
  owned.owned_by_batch = true;
  EXPECT_EQ(p->Decide(owned), (Decision{Action::kDefer, "batch_owned"}));
}

TEST(TimeWindowDecision, Table) {
  auto p = Create(
      Named("time_window", TimeWindow::Options{.windows = {Window{}}, .max_wait = seconds(3)}));
  EXPECT_EQ(p->Decide(Facts(false, false)), (Decision{Action::kApply}));
  EXPECT_EQ(p->Decide(Facts(false, true)), (Decision{Action::kDefer, "edit_locked"}));
  EXPECT_EQ(p->Decide(Facts(true, false)), (Decision{Action::kWaitRowLock, "", milliseconds(100)}));
  EXPECT_EQ(p->Decide(Facts(true, false, 0, seconds(3))), (Decision{Action::kDefer, "max_wait"}));
}

std::chrono::system_clock::time_point At(const std::string& zone, int y, int mo, int d, int h,
                                         int mi) {
  using namespace date;
  auto local = local_days{year(y) / mo / d} + std::chrono::hours(h) + std::chrono::minutes(mi);
  return std::chrono::system_clock::time_point(locate_zone(zone)->to_sys(local));
}

TEST(TimeWindowGate, TokyoNightWindowOnWeekdays) {
  Window w;
  w.time_zone = "Asia/Tokyo";
  w.weekdays = {1, 2, 3, 4, 5};
  w.start = std::chrono::hours(1);
  w.end = std::chrono::hours(5);
  TimeWindow p(Named("time_window", TimeWindow::Options{.windows = {w},
                                                        .drain_margin = std::chrono::minutes(10)}));
  // 2026-11-30 is a Monday.
  EXPECT_TRUE(p.MayClaim(At("Asia/Tokyo", 2026, 11, 30, 1, 0)).allowed);
  EXPECT_TRUE(p.MayClaim(At("Asia/Tokyo", 2026, 11, 30, 4, 49)).allowed);
  auto drain = p.MayClaim(At("Asia/Tokyo", 2026, 11, 30, 4, 51));
  EXPECT_FALSE(drain.allowed);
  EXPECT_EQ(ToString(drain.reason), "drain_margin");
  EXPECT_EQ(ToString(p.MayClaim(At("Asia/Tokyo", 2026, 11, 30, 5, 0)).reason), "outside_window");
  EXPECT_EQ(ToString(p.MayClaim(At("Asia/Tokyo", 2026, 11, 30, 0, 59)).reason), "outside_window");
  // Saturday 2026-12-05: not listed.
  EXPECT_FALSE(p.MayClaim(At("Asia/Tokyo", 2026, 12, 5, 2, 0)).allowed);
  // The same instant seen from UTC: Monday 01:30 Tokyo is Sunday 16:30 UTC.
  EXPECT_TRUE(p.MayClaim(At("UTC", 2026, 11, 29, 16, 30)).allowed);
  EXPECT_EQ(p.MayClaim(At("Asia/Tokyo", 2026, 11, 30, 2, 0)).stop_at,
            At("Asia/Tokyo", 2026, 11, 30, 4, 50));
}

TEST(TimeWindowGate, WindowAcrossMidnightBelongsToItsStartDay) {
  Window w;
  w.time_zone = "UTC";
  w.weekdays = {5};  // Friday
  w.start = std::chrono::hours(22);
  w.end = std::chrono::hours(2);
  auto state = EvaluateWindows({w}, At("UTC", 2026, 12, 5, 1, 0));  // Saturday 01:00
  EXPECT_TRUE(state.active);
  EXPECT_EQ(state.ends_at, At("UTC", 2026, 12, 5, 2, 0));
  EXPECT_FALSE(EvaluateWindows({w}, At("UTC", 2026, 12, 6, 1, 0)).active);  // Sunday
  EXPECT_TRUE(EvaluateWindows({w}, At("UTC", 2026, 12, 4, 23, 0)).active);  // Friday
}

}  // namespace
}  // namespace coexist::policies
