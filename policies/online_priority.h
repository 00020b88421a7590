#pragma once

#include "policies/registry.h"

namespace coexist::policies {

// online_priority: the batch yields. It waits for row locks in short
// lock_timeout steps (one step per chunk transaction, so it never holds its
// other rows for long) and for edit locks until they are released (NOTIFY)
// or expire, up to max_wait per record; then it defers. Online never gets an
// error because of the batch.
class OnlinePriority : public Policy {
 public:
  static constexpr const char* kName = "online_priority";

  struct Options {
    // How long the batch waits for one record's row lock or edit lock
    // before deferring it. 0s..24h
    milliseconds max_wait = std::chrono::seconds(30);
  };
  // max_wait; skip_locked reads it too (its on_exhausted: wait).
  static Options ReadOptions(config::Section& s, const ReadContext& context);

  explicit OnlinePriority(config::PolicyConfig config)
      : config_(std::move(config)), options_(OptionsOf<Options>(config_)) {}
  const char* Name() const override { return kName; }
  Decision Decide(const RecordFacts& facts) const override;
  bool WaitsForEditLocks() const override { return true; }
  milliseconds MaxWait() const override { return options_.max_wait; }

 private:
  config::PolicyConfig config_;
  Options options_;
};

}  // namespace coexist::policies
