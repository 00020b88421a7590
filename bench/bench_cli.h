#pragma once

// The benchmarks' command lines, read with CLI11 as the coexist CLI's are:
// --help prints the options and exits 0, and an unknown option or a bad
// value exits 64 (EX_USAGE) with CLI11's message, before any cluster
// starts, rather than being ignored by a run of many minutes.

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "common/exit_codes.h"

namespace coexist::bench {

inline void ParseOrExit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    std::exit(code == 0 ? 0 : ToInt(ExitCode::kUsage));
  }
}

}  // namespace coexist::bench
