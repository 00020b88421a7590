#include "policies/status_partition.h"

namespace coexist::policies {

Decision StatusPartition::Decide(const RecordFacts& facts) const {
  // Another worker or run already owns it: not ours to take.
  if (facts.owned_by_batch) return {Action::kDefer, "batch_owned"};
  if (facts.edit_locked) return {Action::kDefer, "edit_locked"};
  if (facts.row_locked) return {Action::kDefer, "row_locked"};
  return {Action::kApply};
}

}  // namespace coexist::policies
