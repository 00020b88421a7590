#pragma once

#include "policies/batch_priority.h"
#include "policies/online_priority.h"

namespace coexist::policies {

// skip_locked: lock what can be locked. Records that are row-locked (FOR
// UPDATE SKIP LOCKED passed them) or edit-locked are deferred to the next
// run with a reason. An item deferred max_deferrals times escalates per
// on_exhausted: wait (decide as online_priority with max_wait), force
// (decide as batch_priority), or report (defer again, with an escalation
// event, so an operator sees it).
class SkipLocked : public Policy {
 public:
  static constexpr const char* kName = "skip_locked";
  explicit SkipLocked(config::PolicyConfig config);
  const char* Name() const override { return kName; }
  Decision Decide(const RecordFacts& facts) const override;
  bool WantsBlockers() const override { return config_.on_exhausted == "force"; }
  bool WaitsInTransaction() const override { return config_.on_exhausted == "force"; }

 private:
  config::PolicyConfig config_;
  OnlinePriority wait_;
  BatchPriority force_;
};

}  // namespace coexist::policies
