#include "policies/online_priority.h"

namespace coexist::policies {

Decision OnlinePriority::Decide(const RecordFacts& facts) const {
  if (!facts.row_locked && !facts.edit_locked) return {Action::kApply};
  if (facts.waited >= config_.max_wait) {
    return {Action::kDefer, "max_wait"};
  }
  // An edit lock is held across a human think time: wait outside any
  // transaction, woken by the release NOTIFY. Checked first because while the
  // lock lives, the row lock does not matter.
  if (facts.edit_locked) return {Action::kWaitEditLock};
  return {Action::kWaitRowLock, "", NextStep(config_, facts.waited)};
}

}  // namespace coexist::policies
