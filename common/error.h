#pragma once

#include <stdexcept>
#include <string>

#include "common/exit_codes.h"

namespace coexist {

// An error that the program reports to the operator and exits on. It carries
// the exit status it maps to and an optional hint, printed as a "HINT:" line.
class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message, std::string hint = {})
      : std::runtime_error(message), code_(code), hint_(std::move(hint)) {}

  ExitCode code() const { return code_; }
  const std::string& hint() const { return hint_; }

 private:
  ExitCode code_;
  std::string hint_;
};

// The command line is wrong (EX_USAGE).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message, std::string hint = {})
      : Error(ExitCode::kUsage, message, std::move(hint)) {}
};

// Something the program needs is not there: server binaries, a user (EX_UNAVAILABLE).
class UnavailableError : public Error {
 public:
  explicit UnavailableError(const std::string& message, std::string hint = {})
      : Error(ExitCode::kUnavailable, message, std::move(hint)) {}
};

// Something a command needs is not configured, or is configured wrongly
// outside a YAML file: no database at all for a command that keeps state, a
// malformed database URL (EX_CONFIG). Errors inside a YAML file are
// config::ConfigError, which adds file:line:column.
class ConfigurationError : public Error {
 public:
  explicit ConfigurationError(const std::string& message, std::string hint = {})
      : Error(ExitCode::kConfig, message, std::move(hint)) {}
};

// A failure that may pass if tried again later: database down (EX_TEMPFAIL).
class TempFailError : public Error {
 public:
  explicit TempFailError(const std::string& message, std::string hint = {})
      : Error(ExitCode::kTempFail, message, std::move(hint)) {}
};

}  // namespace coexist
