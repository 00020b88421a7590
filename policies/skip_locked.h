#pragma once

#include "policies/batch_priority.h"
#include "policies/online_priority.h"

namespace coexist::policies {

// What skip_locked does with an item deferred max_deferrals times.
enum class OnExhausted {
  kWait,    // decide as online_priority, with max_wait
  kForce,   // decide as batch_priority
  kReport,  // defer again, with an escalation event, so an operator sees it
};

// skip_locked: lock what can be locked. Records that are row-locked (FOR
// UPDATE SKIP LOCKED passed them) or edit-locked are deferred to the next
// run with a reason. An item deferred max_deferrals times escalates per
// on_exhausted.
class SkipLocked : public Policy {
 public:
  static constexpr const char* kName = "skip_locked";

  struct Options {
    int max_deferrals = 5;  // 1..1000000
    OnExhausted on_exhausted = OnExhausted::kReport;
    // The keys of the policy it escalates to: max_wait (wait);
    // cancel_after, terminate_after, online_application_name (force).
    OnlinePriority::Options wait;
    BatchPriority::Options force;
  };
  static Options ReadOptions(config::Section& s, const ReadContext& context);

  explicit SkipLocked(config::PolicyConfig config);
  const char* Name() const override { return kName; }
  Decision Decide(const RecordFacts& facts) const override;
  bool WantsBlockers() const override { return options_.on_exhausted == OnExhausted::kForce; }
  bool WaitsInTransaction() const override { return options_.on_exhausted == OnExhausted::kForce; }
  bool DefersEveryRowLock() const override { return options_.on_exhausted == OnExhausted::kReport; }
  std::string SignalPattern() const override {
    return options_.on_exhausted == OnExhausted::kForce ? force_.SignalPattern() : "";
  }
  bool WaitsForEditLocks() const override { return options_.on_exhausted == OnExhausted::kWait; }
  milliseconds MaxWait() const override { return options_.wait.max_wait; }

 private:
  config::PolicyConfig config_;
  Options options_;
  OnlinePriority wait_;
  BatchPriority force_;
};

}  // namespace coexist::policies
