#pragma once

// Runs a shell command line with its stdout and stderr caught in files of a
// scratch folder: the CLI tests' way to see exactly what a user would.

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace coexist::testing {

struct Outcome {
  int status = -1;  // the exit status, or 128 + the signal that ended it
  std::string out;
  std::string err;
};

inline std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `command` (shell words) with its output in `scratch`/out and /err.
inline Outcome RunShell(const std::string& command, const std::filesystem::path& scratch) {
  int raw = std::system(
      (command + " > " + (scratch / "out").string() + " 2> " + (scratch / "err").string()).c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), Slurp(scratch / "out"),
          Slurp(scratch / "err")};
}

}  // namespace coexist::testing
