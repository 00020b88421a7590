#pragma once

#include <any>
#include <chrono>
#include <string>

#include "config_core/config_error.h"

namespace coexist::config {

// `policy:` — how the batch coexists with online users (docs/policies.md).
// The loader reads `name` and the keys every policy shares; the named policy
// reads and validates its own keys (policies/registry.h), and only those:
// another policy's keys are rejected as unknown.
struct PolicyConfig {
  // A registered policy (policies::Names()); what runs.policy records.
  // Empty: the default policy (policies::DefaultName(), skip_locked), which
  // the loader writes in when the file names none.
  std::string name;
  // Where `name` is written, for the errors only the database can find (a
  // right the policy needs); just the file when it is not written.
  Mark name_at;

  // Row-lock waits go in SET LOCAL lock_timeout steps, doubling from
  // lock_wait_initial up to lock_wait_max, never queueing for long.
  std::chrono::milliseconds lock_wait_initial{100};
  std::chrono::milliseconds lock_wait_max{1000};
  // A deferred item is not claimed again before this delay (next run).
  std::chrono::milliseconds defer_delay{0};

  // The named policy's own options, of that policy's Options type (e.g.
  // policies::SkipLocked::Options), as its reader returned them; empty: that
  // policy's defaults. Only policies/ looks inside (policies::OptionsOf).
  std::any options;
};

}  // namespace coexist::config
