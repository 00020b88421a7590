#pragma once

// A process the chaos suite started: `coexist ...` with its stdout and
// stderr appended to a log file. The destructor kills (SIGKILL) and reaps a
// child that still runs, so no process outlives its iteration.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace coexist::chaos {

class Child {
 public:
  // Starts `argv` (argv[0] an absolute path). Throws std::system_error.
  Child(const std::vector<std::string>& argv, std::filesystem::path log);
  ~Child();
  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  const std::filesystem::path& log() const { return log_; }

  // Reaps the child if it has exited; true while it runs.
  bool Running();
  // The exit status (128 + signal when killed by one), or nullopt when it
  // still runs after `timeout`.
  std::optional<int> WaitFor(std::chrono::milliseconds timeout);
  void Signal(int signo);
  // SIGKILL and wait; returns the status (the child's own if it had exited).
  int Kill();
  // The last `lines` lines of its log, for evidence.
  std::string LogTail(std::size_t lines = 15) const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::filesystem::path log_;
};

// "75", or "SIGKILL" / "SIGTERM" for a death by that signal: the table's
// exit status column.
std::string DescribeStatus(int status);

}  // namespace coexist::chaos
