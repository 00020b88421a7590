#include "config/custom_kinds.h"

#include <algorithm>
#include <charconv>
#include <regex>

#include "common/sql_text.h"
#include "config_core/duration.h"

namespace coexist::config {
namespace {

constexpr size_t kMaxPlaceholders = 16;  // what online-sim binds per statement

const char* const kScriptHint =
    "write the kind's lines as a list under script:, e.g. - \\set key random_key, then - "
    "UPDATE ... WHERE id = :key.";

using sql_text::IsNameChar;
using sql_text::IsNameStart;

bool IsName(const std::string& text) {
  return !text.empty() && text.size() <= 63 && IsNameStart(text[0]) &&
         std::all_of(text.begin(), text.end(), IsNameChar);
}

std::string Trim(const std::string& text) {
  auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// One SQL line: each :name becomes $n (the same name, the same n); quoted
// strings and identifiers, comments, dollar quotes and :: casts are left as
// they are.
void ReadStatement(Section& s, const YAML::Node& item, const std::string& text,
                   const std::vector<std::string>& variables, ScriptStep& step) {
  std::string& out = step.sql;
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    size_t skipped = i;
    if (sql_text::Skip(text, i, skipped) != sql_text::NotCode::kNone) {
      out.append(text, i, skipped - i);
      i = skipped;
    } else if (c == '$' && i + 1 < text.size() &&
               std::isdigit(static_cast<unsigned char>(text[i + 1]))) {
      s.Fail(item, "script",
             "'" + text.substr(i, 2) + "': a script binds its values as :name placeholders",
             "\\set a variable and write :name where its value goes; coexist numbers the "
             "parameters.");
    } else if (c == ':' && i + 1 < text.size() && text[i + 1] == ':') {
      out += "::";
      i += 2;
    } else if (c == ':' && i + 1 < text.size() && IsNameStart(text[i + 1])) {
      size_t end = i + 1;
      while (end < text.size() && IsNameChar(text[end])) ++end;
      std::string name = text.substr(i + 1, end - i - 1);
      auto known = std::find(variables.begin(), variables.end(), name);
      if (known == variables.end()) {
        s.Fail(item, "script", "':" + name + "' is not set on an earlier line",
               "set it first with \\set " + name + " ... (" +
                   (variables.empty() ? std::string("nothing is set so far")
                                      : "set so far: " + Joined(variables)) +
                   ").");
      }
      int variable = static_cast<int>(known - variables.begin());
      auto slot = std::find(step.params.begin(), step.params.end(), variable);
      if (slot == step.params.end()) {
        if (step.params.size() == kMaxPlaceholders) {
          s.Fail(item, "script", "more than 16 placeholders in one statement",
                 "split the statement; each binds at most 16 values.");
        }
        slot = step.params.insert(step.params.end(), variable);
      }
      out += "$" + std::to_string(slot - step.params.begin() + 1);
      i = end;
    } else if (c == ';') {
      if (Trim(text.substr(i + 1)).empty()) break;
      s.Fail(item, "script", "two statements on one line",
             "a line is one statement (each is prepared on its own); split it at ';'.");
    } else {
      out += c;
      ++i;
    }
  }
}

// \set NAME random_key | \set NAME random(MIN, MAX)
void ReadSet(Section& s, const YAML::Node& item, const std::string& line, const std::string& rest,
             std::vector<std::string>& variables, ScriptStep& step) {
  static const std::regex kSet(R"(([^\s]+)\s+(.*))");
  static const std::regex kRandom(R"(random\s*\(\s*([-+]?[0-9]+)\s*,\s*([-+]?[0-9]+)\s*\))");
  const char* const hint =
      "write \\set NAME random_key (a key of the target) or \\set NAME random(MIN, MAX) "
      "(integers, MIN <= MAX).";
  std::smatch set;
  if (!std::regex_match(rest, set, kSet)) {
    s.Fail(item, "script", "'" + line + "' is not a \\set this script understands", hint);
  }
  std::string name = set[1];
  std::string value = Trim(set[2]);
  if (!IsName(name)) {
    s.Fail(item, "script", "'" + name + "' is not a variable name",
           "a variable's name is letters, digits and _, not starting with a digit.");
  }
  std::smatch random;
  if (value == "random_key") {
    step.type = ScriptStep::Type::kSetKey;
  } else if (std::regex_match(value, random, kRandom)) {
    step.type = ScriptStep::Type::kSetRandom;
    auto bound = [&](std::string text, long long& out) {
      if (text[0] == '+') text.erase(0, 1);
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
      if (error != std::errc() || end != text.data() + text.size()) {
        s.Fail(item, "script", "'" + text + "' is out of range",
               "MIN and MAX are 64-bit integers.");
      }
    };
    bound(random.str(1), step.min);
    bound(random.str(2), step.max);
    if (step.min > step.max) {
      s.Fail(item, "script", "'" + value + "': MIN is larger than MAX",
             "write the smaller bound first, e.g. random(1, 5).");
    }
  } else {
    s.Fail(item, "script", "'" + line + "' is not a \\set this script understands", hint);
  }
  auto known = std::find(variables.begin(), variables.end(), name);
  if (known == variables.end()) known = variables.insert(variables.end(), name);
  step.variable = static_cast<int>(known - variables.begin());
}

// \sleep DURATION (also pgbench's "\sleep 2 ms").
void ReadSleep(Section& s, const YAML::Node& item, const std::string& line, const std::string& rest,
               ScriptStep& step) {
  std::string text;
  for (char c : rest) {
    if (c != ' ' && c != '\t') text += c;
  }
  const char* const hint = "write the app work as a duration from 0 to 60s, e.g. \\sleep 2ms.";
  auto parsed = ParseDuration(text);
  if (!parsed) s.Fail(item, "script", "'" + line + "': '" + rest + "' is not a duration", hint);
  if (*parsed > std::chrono::seconds(60))
    s.Fail(item, "script", "'" + line + "' is out of range", hint);
  step.type = ScriptStep::Type::kSleep;
  step.sleep = *parsed;
}

ScriptStep ReadLine(Section& s, const YAML::Node& item, size_t number,
                    std::vector<std::string>& variables) {
  ScriptStep step;
  step.at = s.MarkOf(item);
  std::string line = Trim(s.ScalarText(item, "script"));
  if (line.empty()) {
    s.Fail(item, "script", "line " + std::to_string(number) + " is empty",
           "remove it, or write a statement or a command there.");
  }
  if (line[0] != '\\') {
    ReadStatement(s, item, line, variables, step);
    return step;
  }
  auto space = line.find_first_of(" \t");
  std::string command = line.substr(0, space);
  std::string rest = space == std::string::npos ? "" : Trim(line.substr(space));
  if (command == "\\set") {
    ReadSet(s, item, line, rest, variables, step);
  } else if (command == "\\sleep") {
    ReadSleep(s, item, line, rest, step);
  } else {
    s.Fail(item, "script", "'" + command + "' is not a script command",
           "a line is a SQL statement, \\set NAME random_key, \\set NAME random(MIN, MAX) or "
           "\\sleep DURATION.");
  }
  return step;
}

CustomKind ReadKind(Section& kinds, const YAML::Node& key, const std::string& name) {
  CustomKind kind;
  kind.name = name;
  kind.at = kinds.MarkOf(key);
  if (!IsName(name)) {
    kinds.Fail(key, name, "'" + name + "' is not a kind name",
               "a kind's name is letters, digits and _, not starting with a digit (it is its key "
               "in online.mix and its name in the report).");
  }
  if (std::find(kBuiltinKinds.begin(), kBuiltinKinds.end(), name) != kBuiltinKinds.end()) {
    std::string builtin;
    for (auto k : kBuiltinKinds) builtin += (builtin.empty() ? "" : ", ") + std::string(k);
    kinds.Fail(key, name, "'" + name + "' is a built-in kind",
               "give the custom kind a name of its own; the built-in kinds are " + builtin + ".");
  }
  auto section = kinds.Map(name);
  if (!section) kinds.Fail(key, name, "a custom kind needs a script", kScriptHint);
  auto script = section->Sequence("script");
  section->Finish();
  if (!script)
    section->Fail(section->node(), "script", "a custom kind needs a script", kScriptHint);
  if (script->size() == 0) section->Fail(*script, "script", "the script is empty", kScriptHint);
  size_t number = 0;
  for (const auto& item : *script) {
    kind.script.push_back(ReadLine(*section, item, ++number, kind.variables));
  }
  if (std::none_of(kind.script.begin(), kind.script.end(),
                   [](const ScriptStep& step) { return step.type == ScriptStep::Type::kSql; })) {
    section->Fail(*script, "script", "the script has no SQL statement",
                  "a kind is the SQL it sends; \\set and \\sleep lines only prepare it.");
  }
  return kind;
}

}  // namespace

void ReadCustomKinds(Section& s, std::vector<CustomKind>& out) {
  for (auto it = s.node().begin(); it != s.node().end(); ++it) {
    std::string name = s.ScalarText(it->first, "custom_kinds");
    out.push_back(ReadKind(s, it->first, name));
  }
  s.Finish();
}

}  // namespace coexist::config
