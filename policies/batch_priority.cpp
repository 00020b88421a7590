#include "policies/batch_priority.h"

namespace coexist::policies {

Decision BatchPriority::Decide(const RecordFacts& facts) const {
  if (facts.edit_locked) return {Action::kRevokeEditLock};
  if (!facts.row_locked) return {Action::kApply};
  if (facts.blockers_seen && !facts.blockers_are_online) {
    return {Action::kDefer, "blocker_not_online"};
  }
  if (facts.waited >= config_.terminate_after + Grace()) return {Action::kDefer, "still_locked"};
  milliseconds step = NextStep(config_, facts.waited);
  if (facts.blockers_seen && facts.waited >= config_.terminate_after) {
    return {Action::kTerminateBlocker, "", step};
  }
  if (facts.blockers_seen && facts.waited >= config_.cancel_after) {
    return {Action::kCancelBlocker, "", step};
  }
  return {Action::kWaitRowLock, "", step};
}

}  // namespace coexist::policies
