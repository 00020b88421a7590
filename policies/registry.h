#pragma once

// The registry of policies: YAML `policy.name` -> how that policy reads its
// own keys of `policy:`, and how it is created. The built-in policies are
// registered in registry.cpp, one line each; more can be added with
// Register() (a test's toy policy does), before any configuration naming them
// is loaded. The configuration loader accepts exactly the registered names.
//
// A policy class P registers with Registration::Of<P>() when it has
//   static constexpr const char* kName;              // its `policy.name`
//   struct Options { ... };                          // its own keys, with defaults
//   static Options ReadOptions(config::Section&, const ReadContext&);
//   explicit P(config::PolicyConfig);                // options via OptionsOf<Options>
//
// Thread safety: Register() and the readers below lock; registering while
// configurations are being loaded is allowed but not useful.

#include <any>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config_core/config_error.h"
#include "config_core/policy_config.h"
#include "policies/policy.h"

namespace coexist::config {
class Section;
}

namespace coexist::policies {

// What a policy's reader may check its keys against, besides `policy:`.
struct ReadContext {
  // database.application_name: the batch's own sessions, which a policy
  // that signals backends must never match; and where it is written (the
  // file alone when it is not).
  std::string batch_application_name;
  config::Mark batch_application_name_at;
};

struct Registration {
  std::string name;
  // Reads and validates the policy's own keys from `policy:` into its
  // Options (held in a std::any). The shared keys (name, lock_wait_*,
  // defer_delay) are read before; keys no reader asked for are rejected
  // after. Throws config::ConfigError at the offending key.
  std::function<std::any(config::Section&, const ReadContext&)> read_options;
  std::function<std::unique_ptr<Policy>(const config::PolicyConfig&)> create;

  template <typename P>
  static Registration Of() {
    return {P::kName,
            [](config::Section& section, const ReadContext& context) {
              return std::any(P::ReadOptions(section, context));
            },
            [](const config::PolicyConfig& config) -> std::unique_ptr<Policy> {
              return std::make_unique<P>(config);
            }};
  }
};

// The policy of a configuration that names none.
std::string DefaultName();
// Adds a policy. Throws std::invalid_argument when its name is taken.
void Register(Registration registration);
// Every registration, the built-in ones first in the order docs/policies.md
// lists them (the order the loader names them in when a name is unknown).
std::vector<Registration> Registrations();
// The registration named `name`; nullopt when there is none.
std::optional<Registration> Find(std::string_view name);

}  // namespace coexist::policies
