#pragma once

// Typed, position-aware reading of YAML maps, for the configuration loader
// and the policies' readers of their own keys (policies/registry.h); include
// it from .cpp files only (it brings in yaml-cpp). Every problem becomes a
// ConfigError at the offending node's file:line:column.

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "config_core/config_error.h"

namespace coexist::config {

// One YAML map, e.g. `batch:`. Getters leave `out` untouched when the key is
// absent (so struct defaults stand) and record the key as known; Finish()
// then rejects every key no getter asked for.
class Section {
 public:
  // `path` is the dotted key of this map ("" for the top level).
  Section(const YAML::Node& node, std::string path, std::string file);

  std::optional<Section> Map(std::string_view key);
  std::optional<YAML::Node> Sequence(std::string_view key);
  void String(std::string_view key, std::string& out);
  // A null value (~ or empty) clears it.
  void OptionalString(std::string_view key, std::optional<std::string>& out);
  void Int(std::string_view key, int& out, int min, int max);
  void Int64(std::string_view key, long long& out, long long min, long long max);
  void Double(std::string_view key, double& out, double min, double max);
  // A number more than 0 and at most `max` (a rate: 0 would be none at all).
  void PositiveDouble(std::string_view key, double& out, double max);
  // A share written with its percent sign ("99%", "0.5 %"), 0% to 100%;
  // `out` is the number of percent (99, 0.5). A bare number is refused, so
  // that 0.01 is never read as either 1% or 0.01%.
  void Percent(std::string_view key, double& out);
  void Bool(std::string_view key, bool& out);
  void Duration(std::string_view key, std::chrono::milliseconds& out, std::chrono::milliseconds min,
                std::chrono::milliseconds max);
  void Enum(std::string_view key, std::string& out,
            std::initializer_list<std::string_view> allowed);
  // The same for an enum class: each allowed name with its value, e.g.
  // {{"wait", OnExhausted::kWait}, {"force", OnExhausted::kForce}}.
  template <typename E>
  void Enum(std::string_view key, E& out,
            std::initializer_list<std::pair<std::string_view, E>> allowed) {
    std::vector<std::string_view> names;
    for (const auto& [name, value] : allowed) names.push_back(name);
    if (auto at = Choice(key, names)) out = (allowed.begin() + *at)->second;
  }
  // The position of the value among `allowed`; nullopt when the key is
  // absent. Any other value fails with "unknown value", naming the allowed
  // ones in their order.
  std::optional<size_t> Choice(std::string_view key, const std::vector<std::string_view>& allowed);
  // A SQL identifier: letters, digits, _ and $, not starting with a digit, at
  // most 63 bytes. Quoted when used; validated here so messages are clear.
  void Identifier(std::string_view key, std::string& out);
  void OptionalIdentifier(std::string_view key, std::optional<std::string>& out);
  // "name" or "schema.name"; schema stays as it is when not given.
  void QualifiedName(std::string_view key, std::string& schema, std::string& name);

  // Rejects keys that no getter asked for, suggesting the nearest known one.
  void Finish() const;

  std::string KeyPath(std::string_view key) const;
  // This map, and the file it is in (for readers that go into its lists).
  const YAML::Node& node() const { return node_; }
  const std::string& file() const { return file_; }
  Mark MarkOf(const YAML::Node& node) const;
  [[noreturn]] void Fail(const YAML::Node& at, std::string_view key, const std::string& message,
                         std::string hint = {}) const;
  // The value of a scalar with ${VAR} substituted; fails on maps and lists.
  std::string ScalarText(const YAML::Node& value, std::string_view key) const;

 private:
  struct Entry {
    YAML::Node key;
    YAML::Node value;
  };
  const Entry* Find(std::string_view key);
  // The scalar `value` read as a number, or a "not a number" failure with
  // `range` as its hint; a number too large for a double is +-infinity.
  double NumberOf(const YAML::Node& value, std::string_view key, const std::string& range) const;

  YAML::Node node_;
  std::string path_;
  std::string file_;
  std::vector<std::pair<std::string, Entry>> entries_;  // in file order, for Finish()
  std::unordered_map<std::string, size_t> index_;       // name -> entries_ position
  std::set<std::string, std::less<>> known_;
};

// Configuration files larger than this are refused: a configuration is
// settings, and a file of megabytes is the wrong file.
inline constexpr size_t kMaxConfigBytes = size_t{1} << 20;  // 1 MiB

// The whole file; a ConfigError naming it when it cannot be read, is a
// directory or a device (/dev/null), or is larger than kMaxConfigBytes.
std::string ReadFileText(const std::string& path);

// Parses YAML text into a node; a syntax error becomes a ConfigError.
YAML::Node ParseYaml(const std::string& text, const std::string& file);

// Replaces ${VAR} with the environment's value; `$$` stands for `$`.
// Throws ConfigError at `mark` for a missing variable or an unclosed "${".
std::string SubstituteVariables(const std::string& text, const Mark& mark, const std::string& key);

// "1.25x", "1.25X" or "1.25": a multiple, for keys written as "so many
// times" (pacing.online_latency.objective, scenario.projection_check).
// nullopt when it is not a finite number.
std::optional<double> ParseTimes(std::string_view text);

}  // namespace coexist::config
