#pragma once

#include <string>

#include "common/error.h"

namespace coexist::config {

// Where a value sits in a configuration file; line and column are 1-based.
struct Mark {
  std::string file;
  int line = 0;
  int column = 0;

  // "nightly.yaml:12:15", or just the file when the position is unknown.
  std::string ToString() const;
};

// An invalid configuration (exit status 78, EX_CONFIG). what() reads
// "FILE:LINE:COLUMN: key.path: message"; hint() says how to fix it.
class ConfigError : public Error {
 public:
  ConfigError(const Mark& mark, const std::string& key, const std::string& message,
              std::string hint = {});
  const Mark& mark() const { return mark_; }

 private:
  Mark mark_;
};

}  // namespace coexist::config
