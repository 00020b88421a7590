#include "common/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <system_error>

namespace coexist {
namespace {

std::vector<char*> ArgvPointers(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& arg : argv) out.push_back(const_cast<char*>(arg.c_str()));
  out.push_back(nullptr);
  return out;
}

// Runs in the forked child: only async-signal-safe calls until exec.
[[noreturn]] void ExecChild(char* const* argv, int output_fd, const std::optional<RunAs>& run_as,
                            int parent_death_signal, pid_t parent) {
  setpgid(0, 0);
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  int out = output_fd >= 0 ? output_fd : null_fd;
  if (out >= 0) {
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
  }
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);  // undo the parent's blocked signals
  if (run_as) {
    if (setgroups(0, nullptr) != 0 || setgid(run_as->gid) != 0 || setuid(run_as->uid) != 0) {
      _exit(126);
    }
  }
  // Set after setuid: a change of credentials clears the death signal.
  if (parent_death_signal != 0) {
    prctl(PR_SET_PDEATHSIG, parent_death_signal);
    if (getppid() != parent) _exit(125);
  }
  execv(argv[0], argv);
  _exit(127);
}

}  // namespace

std::optional<RunAs> UnprivilegedUserIfRoot() {
  if (geteuid() != 0) return std::nullopt;
  for (const char* name : {"postgres", "nobody"}) {
    if (passwd* pw = getpwnam(name)) return RunAs{name, pw->pw_uid, pw->pw_gid};
  }
  return std::nullopt;
}

pid_t Spawn(const SpawnOptions& options) {
  auto argv = ArgvPointers(options.argv);
  int output_fd = -1;
  if (!options.output_path.empty()) {
    output_fd = open(options.output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (output_fd < 0) throw std::system_error(errno, std::generic_category(), options.output_path);
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0)
    ExecChild(argv.data(), output_fd, options.run_as, options.parent_death_signal, parent);
  if (output_fd >= 0) close(output_fd);
  return pid;
}

int WaitForExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitpid");
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

CommandResult RunCommand(const std::vector<std::string>& argv, const std::optional<RunAs>& run_as) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  auto args = ArgvPointers(argv);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) {
    close(fds[0]);
    ExecChild(args.data(), fds[1], run_as, 0, parent);
  }
  close(fds[1]);
  CommandResult result;
  char buffer[4096];
  for (;;) {
    ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      result.output.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  result.status = WaitForExit(pid);
  return result;
}

}  // namespace coexist
