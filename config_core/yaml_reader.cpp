#include "config_core/yaml_reader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config_core/duration.h"

namespace coexist::config {
namespace {

const char* KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "nothing";
    default:
      return "a single value";
  }
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string JoinQuoted(const auto& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += std::string(item);
  }
  return out;
}

// A value as messages quote it: whole when short, else its start and length,
// so a value of 5,000 digits does not bury the message.
std::string Shown(const std::string& text) {
  constexpr size_t kShown = 32;
  if (text.size() <= kShown + 8) return "'" + text + "'";
  return "'" + text.substr(0, kShown) + "...' (" + std::to_string(text.size()) + " characters)";
}

// A bound as a hint writes it: 1000000, 0.5 (not 1000000.000000).
std::string FormatNumber(double value) {
  char text[64];
  auto [end, ec] = std::to_chars(text, text + sizeof(text), value, std::chars_format::fixed);
  return ec == std::errc() ? std::string(text, end) : std::to_string(value);
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || s.size() > 63 || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
  });
}

}  // namespace

std::string Mark::ToString() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

ConfigError::ConfigError(const Mark& mark, const std::string& key, const std::string& message,
                         std::string hint)
    : Error(ExitCode::kConfig, mark.ToString() + ": " + (key.empty() ? "" : key + ": ") + message,
            std::move(hint)),
      mark_(mark) {}

std::string ReadFileText(const std::string& path) {
  namespace fs = std::filesystem;
  const Mark where{path, 0, 0};
  std::error_code ec;
  auto status = fs::status(path, ec);  // follows symlinks: a linked file is fine
  if (!ec && fs::is_directory(status)) {
    throw ConfigError(where, "", "is a directory, not a configuration file",
                      "give the path of a YAML file, e.g. /etc/coexist/nightly.yaml.");
  }
  // A regular file, or a pipe (--config <(envsubst < job.yaml)); a device
  // such as /dev/null would read as an empty, "valid" configuration.
  if (!ec && fs::exists(status) && !fs::is_regular_file(status) && !fs::is_fifo(status)) {
    throw ConfigError(where, "", "is not a regular file (a device or socket)",
                      "give the path of a YAML file.");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(where, "", "cannot read the file", "check the path and its permissions.");
  }
  // Read one byte past the limit: enough to know the file is too large
  // without reading all of it.
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    throw ConfigError(where, "", "cannot read the file", "check the path and its permissions.");
  }
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) {
    throw ConfigError(where, "", "the file is larger than 1 MiB, the limit for a configuration",
                      "a configuration holds settings, not data (queue items go through "
                      "`coexist enqueue`); check that this is the right file.");
  }
  return text;
}

YAML::Node ParseYaml(const std::string& text, const std::string& file) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError({file, e.mark.line + 1, e.mark.column + 1}, "", "YAML syntax error: " + e.msg,
                      "check indentation and quoting near this position.");
  }
}

std::string SubstituteVariables(const std::string& text, const Mark& mark, const std::string& key) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$') {
      out += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == '$') {
      out += '$';
      ++i;
    } else if (i + 1 < text.size() && text[i + 1] == '{') {
      size_t close = text.find('}', i + 2);
      if (close == std::string::npos) {
        throw ConfigError(mark, key, "unclosed '${' in '" + text + "'",
                          "write ${NAME} for an environment variable, $$ for a literal $.");
      }
      std::string name = text.substr(i + 2, close - i - 2);
      const char* value = std::getenv(name.c_str());
      if (value == nullptr) {
        throw ConfigError(mark, key, "environment variable '" + name + "' is not set",
                          "export " + name + " before running coexist, or write the value here.");
      }
      out += value;
      i = close;
    } else {
      out += '$';
    }
  }
  return out;
}

Section::Section(const YAML::Node& node, std::string path, std::string file)
    : node_(node), path_(std::move(path)), file_(std::move(file)) {
  // Indexed by name: a map of 80,000 keys is checked in linear time.
  for (const auto& item : node_) {
    std::string name = item.first.Scalar();
    auto [at, inserted] = index_.try_emplace(name, entries_.size());
    if (!inserted) {
      Fail(item.first, name, "duplicate key",
           "it was first set at " + MarkOf(entries_[at->second].second.key).ToString() +
               "; keep one.");
    }
    entries_.push_back({name, Entry{item.first, item.second}});
  }
}

std::string Section::KeyPath(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

Mark Section::MarkOf(const YAML::Node& node) const {
  auto mark = node.Mark();
  if (mark.is_null()) return {file_, 0, 0};
  return {file_, mark.line + 1, mark.column + 1};
}

void Section::Fail(const YAML::Node& at, std::string_view key, const std::string& message,
                   std::string hint) const {
  throw ConfigError(MarkOf(at), KeyPath(key), message, std::move(hint));
}

const Section::Entry* Section::Find(std::string_view key) {
  known_.emplace(key);
  auto at = index_.find(std::string(key));
  return at == index_.end() ? nullptr : &entries_[at->second].second;
}

std::string Section::ScalarText(const YAML::Node& value, std::string_view key) const {
  if (!value.IsScalar())
    Fail(value, key, std::string("expected a single value, got ") + KindName(value));
  return SubstituteVariables(value.Scalar(), MarkOf(value), KeyPath(key));
}

std::optional<Section> Section::Map(std::string_view key) {
  const Entry* entry = Find(key);
  if (entry == nullptr || entry->value.IsNull()) return std::nullopt;
  if (!entry->value.IsMap()) {
    Fail(entry->value, key,
         std::string("expected a map of settings, got ") + KindName(entry->value));
  }
  return Section(entry->value, KeyPath(key), file_);
}

std::optional<YAML::Node> Section::Sequence(std::string_view key) {
  const Entry* entry = Find(key);
  if (entry == nullptr || entry->value.IsNull()) return std::nullopt;
  if (!entry->value.IsSequence()) {
    Fail(entry->value, key, std::string("expected a list, got ") + KindName(entry->value));
  }
  return entry->value;
}

void Section::String(std::string_view key, std::string& out) {
  if (const Entry* entry = Find(key)) out = ScalarText(entry->value, key);
}

void Section::OptionalString(std::string_view key, std::optional<std::string>& out) {
  const Entry* entry = Find(key);
  if (entry == nullptr) return;
  if (entry->value.IsNull()) {
    out.reset();
  } else {
    out = ScalarText(entry->value, key);
  }
}

void Section::Int64(std::string_view key, long long& out, long long min, long long max) {
  const Entry* entry = Find(key);
  if (entry == nullptr) return;
  std::string text = ScalarText(entry->value, key);
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string range =
      "allowed range is " + std::to_string(min) + " to " + std::to_string(max) + " inclusive.";
  if (ec == std::errc::result_out_of_range)
    Fail(entry->value, key, Shown(text) + " is out of range", range);
  if (ec != std::errc() || end != text.data() + text.size()) {
    Fail(entry->value, key, Shown(text) + " is not a whole number", range);
  }
  if (value < min || value > max) Fail(entry->value, key, Shown(text) + " is out of range", range);
  out = value;
}

void Section::Int(std::string_view key, int& out, int min, int max) {
  long long value = out;
  Int64(key, value, min, max);
  out = static_cast<int>(value);
}

double Section::NumberOf(const YAML::Node& value, std::string_view key,
                         const std::string& range) const {
  std::string text = ScalarText(value, key);
  char* end = nullptr;
  errno = 0;
  double number = std::strtod(text.c_str(), &end);
  bool overflow = errno == ERANGE && std::isinf(number);
  // "inf" and "nan" are words, not numbers; 1e999 is a number out of range.
  if (text.empty() || end != text.c_str() + text.size() || (!std::isfinite(number) && !overflow)) {
    Fail(value, key, Shown(text) + " is not a number", range);
  }
  return number;
}

void Section::Double(std::string_view key, double& out, double min, double max) {
  const Entry* entry = Find(key);
  if (entry == nullptr) return;
  auto range = "allowed range is " + std::to_string(min) + " to " + std::to_string(max) + ".";
  double value = NumberOf(entry->value, key, range);
  if (std::isinf(value) || value < min || value > max) {
    Fail(entry->value, key, Shown(ScalarText(entry->value, key)) + " is out of range", range);
  }
  out = value;
}

void Section::PositiveDouble(std::string_view key, double& out, double max) {
  const Entry* entry = Find(key);
  if (entry == nullptr) return;
  auto range = "allowed range is more than 0, at most " + FormatNumber(max) + ".";
  double value = NumberOf(entry->value, key, range);
  // A value too small for a double (1e-400) reads as 0: out of range too.
  if (std::isinf(value) || !(value > 0) || value > max) {
    Fail(entry->value, key, Shown(ScalarText(entry->value, key)) + " is out of range", range);
  }
  out = value;
}

void Section::Percent(std::string_view key, double& out) {
  const Entry* entry = Find(key);
  if (entry == nullptr) return;
  std::string text = ScalarText(entry->value, key);
  const std::string range = "allowed range is 0% to 100% inclusive.";
  size_t sign = text.find('%');
  std::string number = text.substr(0, sign);
  while (!number.empty() && number.back() == ' ') number.pop_back();
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(number.c_str(), &end);
  if (sign == std::string::npos || sign + 1 != text.size() || number.empty() ||
      end != number.c_str() + number.size() || !std::isfinite(value) || errno == ERANGE) {
    Fail(entry->value, key, Shown(text) + " is not a percentage",
         "write it with its percent sign, e.g. 99% or 0.5%.");
  }
  if (value < 0 || value > 100) Fail(entry->value, key, Shown(text) + " is out of range", range);
  out = value;
}

void Section::Bool(std::string_view key, bool& out) {
  const Entry* entry = Find(key);
  if (entry == nullptr) return;
  std::string text = ScalarText(entry->value, key);
  if (text == "true") {
    out = true;
  } else if (text == "false") {
    out = false;
  } else {
    Fail(entry->value, key, "'" + text + "' is not a boolean", "write true or false.");
  }
}

void Section::Duration(std::string_view key, std::chrono::milliseconds& out,
                       std::chrono::milliseconds min, std::chrono::milliseconds max) {
  const Entry* entry = Find(key);
  if (entry == nullptr) return;
  std::string text = ScalarText(entry->value, key);
  DurationError error{};
  auto parsed = ParseDuration(text, error);
  std::string range =
      "allowed range is " + FormatDuration(min) + " to " + FormatDuration(max) + ".";
  if (!parsed && error == DurationError::kTooLarge) {
    Fail(entry->value, key, Shown(text) + " is out of range", range);
  }
  if (!parsed) {
    bool bare_number = !text.empty() && text.size() <= 40 &&
                       text.find_first_not_of("0123456789.") == std::string::npos;
    Fail(entry->value, key, Shown(text) + " is not a duration",
         bare_number ? "add a unit: '" + text + "ms', '" + text + "s' or '" + text + "m'."
                     : "write a number with a unit (us, ms, s, m, h, d), e.g. 250ms, 30s, 1m30s.");
  }
  if (*parsed % std::chrono::milliseconds(1) != std::chrono::microseconds(0)) {
    Fail(entry->value, key, Shown(text) + " is finer than a millisecond", range);
  }
  auto value = std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
  if (value < min || value > max) Fail(entry->value, key, Shown(text) + " is out of range", range);
  out = value;
}

void Section::Enum(std::string_view key, std::string& out,
                   std::initializer_list<std::string_view> allowed) {
  if (auto at = Choice(key, {allowed.begin(), allowed.end()})) out = *(allowed.begin() + *at);
}

std::optional<size_t> Section::Choice(std::string_view key,
                                      const std::vector<std::string_view>& allowed) {
  const Entry* entry = Find(key);
  if (entry == nullptr) return std::nullopt;
  std::string text = ScalarText(entry->value, key);
  auto at = std::find(allowed.begin(), allowed.end(), text);
  if (at == allowed.end()) {
    Fail(entry->value, key, "unknown value '" + text + "'",
         "use one of: " + JoinQuoted(allowed) + ".");
  }
  return static_cast<size_t>(at - allowed.begin());
}

void Section::Identifier(std::string_view key, std::string& out) {
  std::optional<std::string> value = out;
  OptionalIdentifier(key, value);
  if (!value) Fail(Find(key)->value, key, "a name is required here");
  out = *value;
}

void Section::OptionalIdentifier(std::string_view key, std::optional<std::string>& out) {
  const Entry* entry = Find(key);
  if (entry == nullptr) return;
  if (entry->value.IsNull()) {
    out.reset();
    return;
  }
  std::string text = ScalarText(entry->value, key);
  if (!IsIdentifier(text)) {
    Fail(entry->value, key, "'" + text + "' is not a valid SQL name",
         "use letters, digits, _ and $, not starting with a digit, at most 63 bytes.");
  }
  out = text;
}

void Section::QualifiedName(std::string_view key, std::string& schema, std::string& name) {
  const Entry* entry = Find(key);
  if (entry == nullptr) return;
  std::string text = ScalarText(entry->value, key);
  auto dot = text.find('.');
  std::string first = dot == std::string::npos ? text : text.substr(0, dot);
  std::string second = dot == std::string::npos ? "" : text.substr(dot + 1);
  if (!IsIdentifier(first) || (dot != std::string::npos && !IsIdentifier(second))) {
    Fail(entry->value, key, "'" + text + "' is not a valid table name",
         "write name or schema.name; each part letters, digits, _ and $, not starting with a "
         "digit, at most 63 bytes.");
  }
  if (dot == std::string::npos) {
    name = first;
  } else {
    schema = first;
    name = second;
  }
}

void Section::Finish() const {
  for (const auto& [name, entry] : entries_) {
    if (known_.count(name)) continue;
    std::string nearest;
    size_t best = 3;
    for (const auto& known : known_) {
      size_t d = EditDistance(name, known);
      if (d < best) best = d, nearest = known;
    }
    std::string hint = nearest.empty() ? "known keys here: " + JoinQuoted(known_) + "."
                                       : "did you mean '" + nearest +
                                             "'? known keys here: " + JoinQuoted(known_) + ".";
    Fail(entry.key, name, "unknown key", hint);
  }
}

std::optional<double> ParseTimes(std::string_view text) {
  std::string number(text);
  if (!number.empty() && (number.back() == 'x' || number.back() == 'X')) number.pop_back();
  if (number.empty()) return std::nullopt;
  char* end = nullptr;
  double times = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(times)) return std::nullopt;
  return times;
}

}  // namespace coexist::config
