#pragma once

#include "policies/registry.h"

namespace coexist::policies {

// status_partition: separate by an owner column. The batch takes over only
// records that nobody row-locks or edit-locks (owner := 'batch', committed),
// processes them in a second transaction and hands them back (owner :=
// 'online'). Meanwhile the database refuses online writes to them (CX004):
// online never waits for the batch. Everything else is deferred.
class StatusPartition : public Policy {
 public:
  static constexpr const char* kName = "status_partition";

  struct Options {};  // no keys of its own
  static Options ReadOptions(config::Section& /*s*/, const ReadContext& /*context*/) { return {}; }

  explicit StatusPartition(config::PolicyConfig config) : config_(std::move(config)) {}
  const char* Name() const override { return kName; }
  Decision Decide(const RecordFacts& facts) const override;
  bool TakesOver() const override { return true; }
  bool DefersEveryRowLock() const override { return true; }

 private:
  config::PolicyConfig config_;
};

}  // namespace coexist::policies
