#pragma once

// What a command reports when it fails: the one place that turns an
// exception into an exit status, a message and a hint, for main's last
// catch and for each shard of a command that works several
// (cli/shard_report.h).

#include <exception>
#include <string>

#include "common/exit_codes.h"

namespace coexist::cli {

struct Failure {
  ExitCode code = ExitCode::kSoftware;
  // "config error: FILE:LINE:COLUMN: key: problem" for a config::ConfigError,
  // "coexist: ..." for the rest, as db::Classify judges a database error.
  std::string message;
  std::string hint;  // empty when there is none
};

Failure Describe(const std::exception& e);
// The same for what a thread caught; a non-std exception is a bug (70).
Failure Describe(const std::exception_ptr& error);

}  // namespace coexist::cli
