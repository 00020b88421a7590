#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace coexist::config {

// Parses "250ms", "30s", "2m", "1h", "1m30s", "1.5s", "500us" (units us, ms,
// s, m, h, d; at least one number-unit pair; no sign). nullopt when malformed.
std::optional<std::chrono::microseconds> ParseDuration(std::string_view text);

// Why ParseDuration refused a text: not a duration at all, or one beyond
// about 3,170 years (1e17 microseconds), e.g. a number of 5,000 digits.
enum class DurationError { kMalformed, kTooLarge };
std::optional<std::chrono::microseconds> ParseDuration(std::string_view text, DurationError& error);

// The shortest exact spelling: 1500ms -> "1.5s", 90s -> "1m30s".
std::string FormatDuration(std::chrono::microseconds value);

}  // namespace coexist::config
