#pragma once

#include "policies/policy.h"

namespace coexist::policies {

// online_priority: the batch yields. It waits for row locks in short
// lock_timeout steps (one step per chunk transaction, so it never holds its
// other rows for long) and for edit locks until they are released (NOTIFY)
// or expire, up to max_wait per record; then it defers. Online never gets an
// error because of the batch.
class OnlinePriority : public Policy {
 public:
  static constexpr const char* kName = "online_priority";
  explicit OnlinePriority(config::PolicyConfig config) : config_(std::move(config)) {}
  const char* Name() const override { return kName; }
  Decision Decide(const RecordFacts& facts) const override;

 private:
  config::PolicyConfig config_;
};

}  // namespace coexist::policies
