#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace coexist {

// An unprivileged account to run a child process as (root starting PostgreSQL).
struct RunAs {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// When this process runs as root: the account PostgreSQL should run as
// ("postgres", made by Debian's postgresql package, else "nobody").
// Otherwise nullopt: children run as the current user.
std::optional<RunAs> UnprivilegedUserIfRoot();

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is an absolute path
  std::optional<RunAs> run_as;
  // Where the child's stdout and stderr go (appended); empty: /dev/null.
  std::string output_path;
  // The child gets this signal when the spawning *thread* exits (Linux
  // PR_SET_PDEATHSIG): a server started from main dies with the process even
  // on kill -9. 0 for none.
  int parent_death_signal = 0;
};

// Starts a child in its own process group (so a terminal's Ctrl-C reaches
// only us, and we decide how the child stops). Throws std::system_error.
pid_t Spawn(const SpawnOptions& options);

// Waits for the child; returns its exit status, or 128 + signal.
int WaitForExit(pid_t pid);

struct CommandResult {
  int status = 0;      // exit status, or 128 + signal
  std::string output;  // stdout and stderr, interleaved
};

// Runs a command to completion and captures its output.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::optional<RunAs>& run_as = std::nullopt);

}  // namespace coexist
