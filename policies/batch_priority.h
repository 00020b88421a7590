#pragma once

#include "policies/registry.h"

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

  struct Options {
    // An online backend blocking the batch's row lock is cancelled after
    // cancel_after (an idle in transaction one terminated) and terminated
    // after terminate_after, only when its application_name matches
    // online_application_name (a SQL LIKE pattern) and it is no superuser's,
    // coexist's own or another database's. Each 0s..1h, cancel_after <=
    // terminate_after; the pattern not only % and _, not matching
    // database.application_name.
    milliseconds cancel_after = std::chrono::seconds(2);
    milliseconds terminate_after = std::chrono::seconds(5);
    std::string online_application_name = "coexist-online%";
  };
  // cancel_after, terminate_after, online_application_name; skip_locked
  // reads them too (its on_exhausted: force).
  static Options ReadOptions(config::Section& s, const ReadContext& context);

  explicit BatchPriority(config::PolicyConfig config)
      : config_(std::move(config)), options_(OptionsOf<Options>(config_)) {}
  const char* Name() const override { return kName; }
  Decision Decide(const RecordFacts& facts) const override;
  bool WaitsInTransaction() const override { return true; }
  bool WantsBlockers() const override { return true; }
  std::string SignalPattern() const override { return options_.online_application_name; }

  // How long past terminate_after the batch still waits (a terminated
  // backend's locks go when its process exits).
  milliseconds Grace() const { return 4 * config_.lock_wait_max; }

 private:
  config::PolicyConfig config_;
  Options options_;
};

// SQL LIKE with the default escape (backslash): % any run, _ one byte.
bool LikeMatches(std::string_view pattern, std::string_view text);

}  // namespace coexist::policies
