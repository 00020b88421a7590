#include "config_core/duration.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace coexist::config {
namespace {

std::optional<int64_t> UnitMicros(std::string_view unit) {
  if (unit == "us") return 1;
  if (unit == "ms") return 1'000;
  if (unit == "s") return 1'000'000;
  if (unit == "m") return 60'000'000;
  if (unit == "h") return 3'600'000'000LL;
  if (unit == "d") return 86'400'000'000LL;
  return std::nullopt;
}

}  // namespace

std::optional<std::chrono::microseconds> ParseDuration(std::string_view text,
                                                       DurationError& error) {
  error = DurationError::kMalformed;
  if (text.empty()) return std::nullopt;
  // The largest duration accepted: about 3,170 years, well inside int64 microseconds.
  constexpr long double kMaxMicros = 1e17L;
  long double total = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t number_start = pos;
    bool seen_dot = false;
    while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) ||
                                 (text[pos] == '.' && !seen_dot))) {
      seen_dot |= text[pos] == '.';
      ++pos;
    }
    std::string number(text.substr(number_start, pos - number_start));
    if (number.empty() || number == ".") return std::nullopt;
    size_t unit_start = pos;
    while (pos < text.size() && std::isalpha(static_cast<unsigned char>(text[pos]))) ++pos;
    auto unit = UnitMicros(text.substr(unit_start, pos - unit_start));
    if (!unit) return std::nullopt;
    // strtold, not stold: a number of thousands of digits overflows to
    // HUGE_VALL (too large) or underflows towards 0 instead of throwing.
    long double value = std::strtold(number.c_str(), nullptr);
    total += value * static_cast<long double>(*unit);
    if (!std::isfinite(total) || total > kMaxMicros) {
      error = DurationError::kTooLarge;
      return std::nullopt;
    }
  }
  return std::chrono::microseconds(static_cast<int64_t>(std::llround(total)));
}

std::optional<std::chrono::microseconds> ParseDuration(std::string_view text) {
  DurationError ignored{};
  return ParseDuration(text, ignored);
}

std::string FormatDuration(std::chrono::microseconds value) {
  int64_t us = value.count();
  if (us == 0) return "0s";
  if (us % 1000 != 0) return std::to_string(us) + "us";
  int64_t ms = us / 1000;
  if (ms < 1000 || (ms % 1000 != 0 && ms < 60'000)) {
    if (ms < 1000) return std::to_string(ms) + "ms";
    std::string frac = std::to_string(ms % 1000);
    frac = std::string(3 - frac.size(), '0') + frac;
    while (frac.back() == '0') frac.pop_back();
    return std::to_string(ms / 1000) + "." + frac + "s";
  }
  std::string out;
  int64_t seconds = ms / 1000;
  if (seconds >= 3600) out += std::to_string(seconds / 3600) + "h", seconds %= 3600;
  if (seconds >= 60) out += std::to_string(seconds / 60) + "m", seconds %= 60;
  if (seconds > 0) out += std::to_string(seconds) + "s";
  if (ms % 1000 != 0) out += std::to_string(ms % 1000) + "ms";
  return out;
}

}  // namespace coexist::config
