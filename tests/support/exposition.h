#pragma once

// Reading Prometheus exposition in tests (metrics_test, ops_test,
// daemon_test).

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>
#include <string>

namespace coexist::testing {

// A strict reading of the Prometheus text format 0.0.4: # HELP / # TYPE
// lines, then `name{label="value",...} number`. NaN and Inf in any case,
// as Prometheus's parser (Go's ParseFloat) takes them: prometheus-cpp
// writes "Nan" for an empty summary. Returns sample -> value; any other
// line fails the test.
inline std::map<std::string, double> ParseExposition(const std::string& text) {
  std::map<std::string, double> samples;
  std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*$)");
  std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})?) ([-+0-9.eE]+|[Nn][Aa][Nn]|[+-][Ii][Nn][Ff])( [0-9]+)?$)");
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || std::regex_match(line, comment)) continue;
    std::smatch match;
    EXPECT_TRUE(std::regex_match(line, match, sample)) << "not exposition format: " << line;
    if (!match.empty()) samples[match[1]] = std::stod(match[5]);
  }
  return samples;
}

}  // namespace coexist::testing
