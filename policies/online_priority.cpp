#include "policies/online_priority.h"

#include "config_core/yaml_reader.h"

namespace coexist::policies {

OnlinePriority::Options OnlinePriority::ReadOptions(config::Section& s,
                                                    const ReadContext& /*context*/) {
  Options options;
  s.Duration("max_wait", options.max_wait, milliseconds(0), std::chrono::hours(24));
  return options;
}

Decision OnlinePriority::Decide(const RecordFacts& facts) const {
  if (!facts.row_locked && !facts.edit_locked) return {Action::kApply};
  if (facts.waited >= options_.max_wait) {
    return {Action::kDefer, "max_wait"};
  }
  // An edit lock is held across a human think time: wait outside any
  // transaction, woken by the release NOTIFY. Checked first because while the
  // lock lives, the row lock does not matter.
  if (facts.edit_locked) return {Action::kWaitEditLock};
  return {Action::kWaitRowLock, "", NextStep(config_, facts.waited)};
}

}  // namespace coexist::policies
