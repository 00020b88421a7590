#include "policies/registry.h"

#include <algorithm>
#include <mutex>
#include <stdexcept>

#include "policies/batch_priority.h"
#include "policies/online_priority.h"
#include "policies/skip_locked.h"
#include "policies/status_partition.h"
#include "policies/time_window.h"

namespace coexist::policies {
namespace {

struct Registry {
  std::mutex mutex;
  // Adding a policy is one line here.
  std::vector<Registration> registrations = {
      Registration::Of<TimeWindow>(),     Registration::Of<StatusPartition>(),
      Registration::Of<OnlinePriority>(), Registration::Of<BatchPriority>(),
      Registration::Of<SkipLocked>(),
  };
};

Registry& TheRegistry() {
  static Registry registry;
  return registry;
}

}  // namespace

std::string DefaultName() { return SkipLocked::kName; }

void Register(Registration registration) {
  auto& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  for (const auto& known : registry.registrations) {
    if (known.name == registration.name) {
      throw std::invalid_argument("a policy named '" + registration.name + "' is registered");
    }
  }
  registry.registrations.push_back(std::move(registration));
}

std::vector<Registration> Registrations() {
  auto& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  return registry.registrations;
}

std::optional<Registration> Find(std::string_view name) {
  auto& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  for (const auto& registration : registry.registrations) {
    if (registration.name == name) return registration;
  }
  return std::nullopt;
}

std::unique_ptr<Policy> Create(const config::PolicyConfig& config) {
  auto registration = Find(config.name.empty() ? DefaultName() : config.name);
  if (!registration) throw std::invalid_argument("no policy named '" + config.name + "'");
  return registration->create(config);
}

std::vector<std::string> Names() {
  std::vector<std::string> names;
  for (const auto& registration : Registrations()) names.push_back(registration.name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace coexist::policies
