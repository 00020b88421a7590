#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace coexist::log {

// Log lines are product surface: a lowercase event phrase followed by
// key=value pairs, e.g. "cluster started dir=/tmp/coexist-pg-1 pid=42".
// The text format prints that as is; the json format turns it into
// {"ts":...,"level":...,"event":"cluster started","dir":"/tmp/...","pid":"42"}.
enum class Format { kText, kJson };

std::optional<Format> ParseFormat(std::string_view name);

// Configures the default spdlog logger: stderr, the given level
// ("trace".."critical", "off") and format. Throws coexist::UsageError on an
// unknown level. Call once from main before any thread logs.
void Setup(const std::string& level, Format format);

// Quotes a value for a key=value pair when it has spaces, quotes, line
// breaks or is empty; line breaks and tabs are written as \n, \r, \t.
std::string Value(std::string_view value);

}  // namespace coexist::log
