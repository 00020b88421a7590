#pragma once

#include "policies/policy.h"

namespace coexist::policies {

// batch_priority: the batch goes first. Live edit locks on its records are
// revoked (audited, the owner NOTIFYed; the owner's save then fails with
// CX002 "revoked by ..."). A row lock is waited for in lock_timeout steps;
// the online backends holding it are cancelled once the batch has waited
// cancel_after and terminated after terminate_after, but only when every
// blocker's application_name matches online_application_name: anything else
// (another batch, an administrator) is deferred, as is a row that stays
// locked a grace period past terminate_after.
class BatchPriority : public Policy {
 public:
  static constexpr const char* kName = "batch_priority";
  explicit BatchPriority(config::PolicyConfig config) : config_(std::move(config)) {}
  const char* Name() const override { return kName; }
  Decision Decide(const RecordFacts& facts) const override;
  bool WaitsInTransaction() const override { return true; }
  bool WantsBlockers() const override { return true; }

  // How long past terminate_after the batch still waits (a terminated
  // backend's locks go when its process exits).
  milliseconds Grace() const { return 4 * config_.lock_wait_max; }

 private:
  config::PolicyConfig config_;
};

}  // namespace coexist::policies
