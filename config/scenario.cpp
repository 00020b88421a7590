#include "config/scenario.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/duration.h"
#include "config/yaml_reader.h"
#include "policies/registry.h"

namespace coexist::config {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;

constexpr std::string_view kScenarioKeys[] = {"scenario", "sweep", "policy_options"};

void ReadSettings(Section& s, ScenarioSettings& out) {
  s.String("name", out.name);
  s.String("description", out.description);
  s.Int64("records", out.records, 1, 100'000'000);
  s.Int64("queue_items", out.queue_items, 1, 100'000'000);
  s.Duration("warmup", out.warmup, milliseconds(0), hours(1));
  s.Duration("cooldown", out.cooldown, milliseconds(0), hours(1));
  s.Duration("window", out.window, milliseconds(100), hours(24));
  s.Int64("production_queue_items", out.production_queue_items, 0, 1'000'000'000'000LL);
  s.Duration("production_window", out.production_window, milliseconds(0), hours(24 * 7));
  s.Int64("projection_check", out.projection_check, 0, 100'000'000);
  if (out.projection_check > 0 && out.projection_check < out.queue_items) {
    s.Fail(s.node()["projection_check"], "projection_check",
           fmt::format("{} items is fewer than the {} queued in the measured cells",
                       out.projection_check, out.queue_items),
           "a projection check runs a larger queue than the one measured (e.g. 10 times "
           "scenario.queue_items); 0 runs none.");
  }
  s.Duration("min_batch_time", out.min_batch_time, milliseconds(0), hours(1));
  s.Int("repeat", out.repeat, 1, 100);
  if (auto o = s.Map("objectives")) {
    o->Double("max_p99_ratio", out.objectives.max_p99_ratio, 1, 1'000'000);
    o->Percent("max_error_rate", out.objectives.max_error_percent);
    o->Percent("min_done_share", out.objectives.min_done_percent);
    o->Percent("max_deferred_share", out.objectives.max_deferred_percent);
    o->Finish();
  }
  s.Finish();
  // The batch starts after the warm-up, whose online p99 is the baseline of
  // the p99 objective: a window shorter than that baseline run cannot be
  // judged against it.
  if (out.window < out.warmup) {
    const char* key = s.node()["window"] ? "window" : "warmup";
    s.Fail(s.node()[key], key,
           fmt::format("the window ({}) is shorter than the warm-up ({})",
                       FormatDuration(out.window), FormatDuration(out.warmup)),
           "the batch's online p99 is judged against the warm-up's; give scenario.window at least "
           "the warm-up, or shorten scenario.warmup.");
  }
  if (out.min_batch_time > out.window) {
    s.Fail(s.node()["min_batch_time"], "min_batch_time",
           fmt::format("a batch of at least {} cannot finish inside the window ({})",
                       FormatDuration(out.min_batch_time), FormatDuration(out.window)),
           "give scenario.window at least scenario.min_batch_time.");
  }
}

struct Axis {
  SweepAxis axis;
  YAML::Node key_node;
  std::vector<YAML::Node> value_nodes;
};

std::vector<Axis> ReadSweep(const YAML::Node& node, const Section& top) {
  std::vector<Axis> out;
  if (!node || node.IsNull()) return out;
  if (!node.IsMap()) top.Fail(node, "sweep", "expected a map of key: [values]");
  for (const auto& item : node) {
    Axis a;
    a.axis.key = item.first.Scalar();
    a.key_node = item.first;
    auto dot = a.axis.key.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == a.axis.key.size()) {
      top.Fail(item.first, "sweep." + a.axis.key, "a swept key is section.key",
               "e.g. policy.name, online.users, batch.chunk_size.");
    }
    if (!item.second.IsSequence() || item.second.size() == 0) {
      top.Fail(item.second, "sweep." + a.axis.key, "expected a non-empty list of values");
    }
    for (const auto& value : item.second) {
      a.axis.values.push_back(top.ScalarText(value, "sweep." + a.axis.key));
      a.value_nodes.push_back(value);
    }
    out.push_back(std::move(a));
  }
  return out;
}

// Sets a dotted key in a YAML map, creating maps on the way. The value node
// is shared, not copied, so its position stays for error messages.
void SetPath(YAML::Node root, const std::string& key, const YAML::Node& value) {
  std::vector<std::string> parts;
  std::stringstream in(key);
  for (std::string part; std::getline(in, part, '.');) parts.push_back(part);
  YAML::Node node = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!node[parts[i]] || !node[parts[i]].IsMap())
      node[parts[i]] = YAML::Node(YAML::NodeType::Map);
    // Node::operator= would overwrite the node's content; reset() rebinds.
    node.reset(node[parts[i]]);
  }
  node[parts.back()] = value;
}

std::string LoadLevel(const std::map<std::string, std::string>& parameters) {
  for (const char* key : {"online.users", "online.rate"}) {
    if (auto it = parameters.find(key); it != parameters.end()) return it->first + "=" + it->second;
  }
  return "";
}

}  // namespace

Scenario LoadScenario(const std::string& path, const Overrides& overrides) {
  return LoadScenarioString(ReadFileText(path), path, overrides);
}

bool IsScenarioText(const std::string& yaml, const std::string& name) {
  YAML::Node root = ParseYaml(yaml, name);
  if (!root.IsMap()) return false;
  return std::any_of(std::begin(kScenarioKeys), std::end(kScenarioKeys),
                     [&](std::string_view key) { return root[std::string(key)].IsDefined(); });
}

namespace {

Scenario Load(const std::string& yaml, const std::string& path, const Overrides& overrides) {
  YAML::Node root = ParseYaml(yaml, path);
  if (!root.IsMap()) {
    Section(YAML::Node(YAML::NodeType::Map), "", path)
        .Fail(root, "",
              "a scenario file must be a map of sections (scenario:, sweep:, online:, ...)");
  }
  for (const auto& [key, value] : overrides) {
    if (key.empty() || key.front() == '.' || key.back() == '.' ||
        key.find("..") != std::string::npos) {
      throw ConfigError(Mark{"--set " + key, 0, 0}, "", "'" + key + "' is not a dotted key",
                        "e.g. --set scenario.records=200000 or --set online.users=40.");
    }
    YAML::Node node = ParseYaml(value, "--set " + key + "=" + value);
    // A swept key is one key of sweep: (sweep: {policy.name: [...]}).
    if (key.rfind("sweep.", 0) == 0) {
      if (!root["sweep"] || !root["sweep"].IsMap()) root["sweep"] = YAML::Node(YAML::NodeType::Map);
      root["sweep"][key.substr(6)] = node;
    } else {
      SetPath(root, key, node);
    }
  }

  Scenario scenario;
  const std::string name = std::filesystem::path(path).stem().string();
  scenario.settings.name = name;
  Section top(root, "", path);
  if (auto s = top.Map("scenario")) ReadSettings(*s, scenario.settings);
  std::vector<Axis> axes = ReadSweep(root["sweep"], top);
  for (const auto& a : axes) scenario.sweep.push_back(a.axis);
  YAML::Node policy_options = root["policy_options"];
  if (policy_options && !policy_options.IsNull() && !policy_options.IsMap()) {
    top.Fail(policy_options, "policy_options", "expected a map of policy name: {keys}");
  }

  // The base configuration: the file without the scenario's own sections.
  YAML::Node base(YAML::NodeType::Map);
  for (const auto& item : root) {
    std::string key = item.first.Scalar();
    if (std::find(std::begin(kScenarioKeys), std::end(kScenarioKeys), key) ==
        std::end(kScenarioKeys)) {
      base[item.first] = item.second;
    }
  }

  std::vector<size_t> position(axes.size(), 0);
  for (int index = 1;; ++index) {
    YAML::Node cell_root = YAML::Clone(base);
    // The scenario's own section, for swept scenario.* keys.
    YAML::Node cell_top(YAML::NodeType::Map);
    if (root["scenario"]) cell_top["scenario"] = YAML::Clone(root["scenario"]);
    bool settings_swept = false;
    ScenarioCell cell;
    cell.index = index;
    for (size_t a = 0; a < axes.size(); ++a) {
      const std::string& key = axes[a].axis.key;
      if (key.rfind("scenario.", 0) == 0) {
        SetPath(cell_top, key, axes[a].value_nodes[position[a]]);
        settings_swept = true;
      } else {
        SetPath(cell_root, key, axes[a].value_nodes[position[a]]);
      }
      cell.parameters[key] = axes[a].axis.values[position[a]];
    }
    cell.settings = scenario.settings;
    cell.load_level = LoadLevel(cell.parameters);
    std::string policy = cell_root["policy"] && cell_root["policy"]["name"]
                             ? cell_root["policy"]["name"].Scalar()
                             : policies::DefaultName();
    if (policy_options && policy_options[policy]) {
      if (!policy_options[policy].IsMap()) {
        top.Fail(policy_options[policy], "policy_options." + policy,
                 "expected a map of policy keys");
      }
      for (const auto& option : policy_options[policy]) {
        SetPath(cell_root, "policy." + option.first.Scalar(), option.second);
      }
    }
    try {
      if (settings_swept) {
        cell.settings = ScenarioSettings{.name = name};
        Section cell_section(cell_top, "", path);
        if (auto s = cell_section.Map("scenario")) ReadSettings(*s, cell.settings);
      }
      cell.config = ReadConfig(cell_root, path);
    } catch (const ConfigError& e) {
      if (e.mark().line > 0 || axes.empty()) throw;
      // A key the sweep created has no position: point at the sweep entry.
      throw ConfigError(Section(root, "", path).MarkOf(axes.front().key_node), "sweep",
                        std::string(e.what()).substr(path.size() + 2), e.hint());
    }
    scenario.cells.push_back(std::move(cell));

    size_t a = 0;
    while (a < axes.size() && ++position[a] == axes[a].value_nodes.size()) position[a++] = 0;
    if (a == axes.size()) break;
  }
  // Unknown keys of the base sections were rejected by ReadConfig.
  return scenario;
}

}  // namespace

bool IsScenarioFile(const std::string& path) { return IsScenarioText(ReadFileText(path), path); }

Scenario LoadScenarioString(const std::string& yaml, const std::string& path,
                            const Overrides& overrides) {
  try {
    return Load(yaml, path, overrides);
  } catch (const ConfigError& e) {
    // An overridden value's node comes from its own one-line document: its
    // errors point at the --set option, not at line 1 of the file.
    std::string prefix = e.mark().ToString() + ": ";
    std::string message = std::string(e.what()).substr(prefix.size());
    for (const auto& [key, value] : overrides) {
      if (e.mark().line == 1 && message.rfind(key + ": ", 0) == 0) {
        throw ConfigError(Mark{"--set " + key + "=" + value, 0, 0}, "", message, e.hint());
      }
    }
    throw;
  }
}

}  // namespace coexist::config
