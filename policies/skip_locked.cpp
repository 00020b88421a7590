#include "policies/skip_locked.h"

namespace coexist::policies {

SkipLocked::SkipLocked(config::PolicyConfig config)
    : config_(config), wait_(config), force_(config) {}

Decision SkipLocked::Decide(const RecordFacts& facts) const {
  if (!facts.row_locked && !facts.edit_locked) return {Action::kApply};
  if (facts.deferrals < config_.max_deferrals) {
    return {Action::kDefer, facts.edit_locked ? "edit_locked" : "row_locked"};
  }
  Decision decision;
  if (config_.on_exhausted == "wait") {
    decision = wait_.Decide(facts);
  } else if (config_.on_exhausted == "force") {
    decision = force_.Decide(facts);
  } else {
    decision = {Action::kDefer, facts.edit_locked ? "edit_locked" : "row_locked"};
  }
  decision.escalated = true;
  return decision;
}

}  // namespace coexist::policies
