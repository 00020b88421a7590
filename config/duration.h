#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace coexist::config {

// Parses "250ms", "30s", "2m", "1h", "1m30s", "1.5s", "500us" (units us, ms,
// s, m, h, d; at least one number-unit pair; no sign). nullopt when malformed.
std::optional<std::chrono::microseconds> ParseDuration(std::string_view text);

// The shortest exact spelling: 1500ms -> "1.5s", 90s -> "1m30s".
std::string FormatDuration(std::chrono::microseconds value);

}  // namespace coexist::config
