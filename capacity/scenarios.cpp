#include "capacity/scenarios.h"

#include "common/embedded_file.h"

namespace coexist::capacity {
namespace scenarios_yaml {
const std::vector<EmbeddedFile>& EmbeddedFiles();
}

std::optional<std::string_view> BuiltInScenario(const std::string& name) {
  for (const auto& file : scenarios_yaml::EmbeddedFiles()) {
    if (file.name == name + ".yaml") return file.text;
  }
  return std::nullopt;
}

std::vector<std::string> BuiltInScenarioNames() {
  std::vector<std::string> names;
  for (const auto& file : scenarios_yaml::EmbeddedFiles()) {
    names.emplace_back(file.name.substr(0, file.name.size() - 5));
  }
  return names;
}

}  // namespace coexist::capacity
