#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace coexist::capacity {

// The scenarios under config/scenarios/, compiled into the binary so that
// `coexist simulate demo` works from any folder.
std::optional<std::string_view> BuiltInScenario(const std::string& name);
std::vector<std::string> BuiltInScenarioNames();

}  // namespace coexist::capacity
