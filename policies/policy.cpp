#include "policies/policy.h"

#include <algorithm>

namespace coexist::policies {

const char* ToString(Action action) {
  switch (action) {
    case Action::kApply:
      return "apply";
    case Action::kWaitRowLock:
      return "wait_row_lock";
    case Action::kWaitEditLock:
      return "wait_edit_lock";
    case Action::kRevokeEditLock:
      return "revoke_edit_lock";
    case Action::kCancelBlocker:
      return "cancel_blocker";
    case Action::kTerminateBlocker:
      return "terminate_blocker";
    case Action::kDefer:
      return "defer";
  }
  return "unknown";
}

const char* ToString(WindowMode mode) {
  switch (mode) {
    case WindowMode::kReadOnly:
      return "read_only";
    case WindowMode::kAllow:
      return "allow";
  }
  return "unknown";
}

ClaimGate Policy::MayClaim(std::chrono::system_clock::time_point /*now*/) const { return {}; }

milliseconds NextStep(const config::PolicyConfig& config, milliseconds waited) {
  milliseconds step = config.lock_wait_initial;
  milliseconds total{0};
  while (total + step <= waited) {
    total += step;
    step = std::min(step * 2, config.lock_wait_max);
  }
  return step;
}

}  // namespace coexist::policies
