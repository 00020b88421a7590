#include "policies/policy.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "policies/batch_priority.h"
#include "policies/online_priority.h"
#include "policies/skip_locked.h"
#include "policies/status_partition.h"
#include "policies/time_window.h"

namespace coexist::policies {
namespace {

// The registry: YAML name -> factory. Adding a policy is one line here.
const std::map<std::string, Factory, std::less<>>& Registry() {
  static const std::map<std::string, Factory, std::less<>> registry = {
      {TimeWindow::kName, [](const auto& c) { return std::make_unique<TimeWindow>(c); }},
      {StatusPartition::kName, [](const auto& c) { return std::make_unique<StatusPartition>(c); }},
      {OnlinePriority::kName, [](const auto& c) { return std::make_unique<OnlinePriority>(c); }},
      {BatchPriority::kName, [](const auto& c) { return std::make_unique<BatchPriority>(c); }},
      {SkipLocked::kName, [](const auto& c) { return std::make_unique<SkipLocked>(c); }},
  };
  return registry;
}

}  // namespace

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

ClaimGate Policy::MayClaim(std::chrono::system_clock::time_point /*now*/) const { return {}; }

std::unique_ptr<Policy> Create(const config::PolicyConfig& config) {
  const auto& registry = Registry();
  auto it = registry.find(config.name);
  if (it == registry.end()) throw std::invalid_argument("no policy named '" + config.name + "'");
  return it->second(config);
}

std::vector<std::string> Names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : Registry()) names.push_back(name);
  return names;
}

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
