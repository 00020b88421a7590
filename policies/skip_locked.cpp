#include "policies/skip_locked.h"

#include "config_core/yaml_reader.h"

namespace coexist::policies {

SkipLocked::Options SkipLocked::ReadOptions(config::Section& s, const ReadContext& context) {
  Options options;
  s.Int("max_deferrals", options.max_deferrals, 1, 1'000'000);
  s.Enum("on_exhausted", options.on_exhausted,
         {{"wait", OnExhausted::kWait},
          {"force", OnExhausted::kForce},
          {"report", OnExhausted::kReport}});
  options.wait = OnlinePriority::ReadOptions(s, context);
  options.force = BatchPriority::ReadOptions(s, context);
  return options;
}

SkipLocked::SkipLocked(config::PolicyConfig config)
    : config_(std::move(config)),
      options_(OptionsOf<Options>(config_)),
      wait_(WithOptions(config_, options_.wait)),
      force_(WithOptions(config_, options_.force)) {}

Decision SkipLocked::Decide(const RecordFacts& facts) const {
  if (!facts.row_locked && !facts.edit_locked) return {Action::kApply};
  if (facts.deferrals < options_.max_deferrals) {
    return {Action::kDefer, facts.edit_locked ? "edit_locked" : "row_locked"};
  }
  Decision decision;
  switch (options_.on_exhausted) {
    case OnExhausted::kWait:
      decision = wait_.Decide(facts);
      break;
    case OnExhausted::kForce:
      decision = force_.Decide(facts);
      break;
    case OnExhausted::kReport:
      decision = {Action::kDefer, facts.edit_locked ? "edit_locked" : "row_locked"};
      break;
  }
  decision.escalated = true;
  return decision;
}

}  // namespace coexist::policies
