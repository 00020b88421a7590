// Decision tables of the five policies: pure, no database, microseconds.

#include <date/tz.h>
#include <gtest/gtest.h>

#include "policies/batch_priority.h"
#include "policies/policy.h"
#include "policies/time_window.h"

namespace coexist::policies {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

config::PolicyConfig Named(const std::string& name) {
  config::PolicyConfig c;
  c.name = name;
  c.max_wait = seconds(3);
  c.cancel_after = seconds(2);
  c.terminate_after = seconds(5);
  c.max_deferrals = 3;
  c.lock_wait_initial = milliseconds(100);
  c.lock_wait_max = milliseconds(1000);
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
  for (const auto& name : expected) {
    auto c = Named(name);
    c.windows.emplace_back();
    EXPECT_STREQ(Create(c)->Name(), name.c_str());
  }
  EXPECT_THROW(Create(Named("first_come")), std::invalid_argument);
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
  auto p = Create(Named("skip_locked"));
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
  auto c = Named("skip_locked");
  c.on_exhausted = "wait";
  auto p = Create(c);
  EXPECT_EQ(p->Decide(Facts(true, false, 3)),
            (Decision{Action::kWaitRowLock, "", milliseconds(100), true}));
  EXPECT_EQ(p->Decide(Facts(false, true, 3)),
            (Decision{Action::kWaitEditLock, "", milliseconds(0), true}));
  EXPECT_EQ(p->Decide(Facts(true, false, 3, seconds(3))),
            (Decision{Action::kDefer, "max_wait", milliseconds(0), true}));
  EXPECT_FALSE(p->WaitsInTransaction());
}

TEST(SkipLockedDecision, ExhaustedForceActsAsBatchPriority) {
  auto c = Named("skip_locked");
  c.on_exhausted = "force";
  auto p = Create(c);
  EXPECT_EQ(p->Decide(Facts(false, true, 3)),
            (Decision{Action::kRevokeEditLock, "", milliseconds(0), true}));
  EXPECT_EQ(p->Decide(Facts(true, false, 3)),
            (Decision{Action::kWaitRowLock, "", milliseconds(100), true}));
  EXPECT_TRUE(p->WaitsInTransaction());
  EXPECT_TRUE(p->WantsBlockers());
}

TEST(OnlinePriorityDecision, Table) {
  auto p = Create(Named("online_priority"));
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
  auto p = Create(Named("batch_priority"));
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
  auto c = Named("time_window");
  c.windows.emplace_back();
  auto p = Create(c);
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
  config::WindowConfig w;
  w.time_zone = "Asia/Tokyo";
  w.weekdays = {1, 2, 3, 4, 5};
  w.start = std::chrono::hours(1);
  w.end = std::chrono::hours(5);
  auto c = Named("time_window");
  c.windows = {w};
  c.drain_margin = std::chrono::minutes(10);
  TimeWindow p(c);
  // 2026-11-30 is a Monday.
  EXPECT_TRUE(p.MayClaim(At("Asia/Tokyo", 2026, 11, 30, 1, 0)).allowed);
  EXPECT_TRUE(p.MayClaim(At("Asia/Tokyo", 2026, 11, 30, 4, 49)).allowed);
  auto drain = p.MayClaim(At("Asia/Tokyo", 2026, 11, 30, 4, 51));
  EXPECT_FALSE(drain.allowed);
  EXPECT_EQ(drain.reason, "drain_margin");
  EXPECT_EQ(p.MayClaim(At("Asia/Tokyo", 2026, 11, 30, 5, 0)).reason, "outside_window");
  EXPECT_EQ(p.MayClaim(At("Asia/Tokyo", 2026, 11, 30, 0, 59)).reason, "outside_window");
  // Saturday 2026-12-05: not listed.
  EXPECT_FALSE(p.MayClaim(At("Asia/Tokyo", 2026, 12, 5, 2, 0)).allowed);
  // The same instant seen from UTC: Monday 01:30 Tokyo is Sunday 16:30 UTC.
  EXPECT_TRUE(p.MayClaim(At("UTC", 2026, 11, 29, 16, 30)).allowed);
  EXPECT_EQ(p.MayClaim(At("Asia/Tokyo", 2026, 11, 30, 2, 0)).stop_at,
            At("Asia/Tokyo", 2026, 11, 30, 4, 50));
}

TEST(TimeWindowGate, WindowAcrossMidnightBelongsToItsStartDay) {
  config::WindowConfig w;
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
