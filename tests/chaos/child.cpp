#include "tests/chaos/child.h"

#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include "common/subprocess.h"

namespace coexist::chaos {

using namespace std::chrono_literals;

Child::Child(const std::vector<std::string>& argv, std::filesystem::path log)
    : log_(std::move(log)) {
  SpawnOptions options;
  options.argv = argv;
  options.output_path = log_.string();
  options.parent_death_signal = SIGKILL;  // the driver dies: so do its children
  pid_ = Spawn(options);
}

Child::Child(Child&& other) noexcept
    : pid_(other.pid_), status_(other.status_), log_(std::move(other.log_)) {
  other.pid_ = -1;
}

Child::~Child() {
  if (pid_ > 0 && !status_) Kill();
}

bool Child::Running() {
  if (status_) return false;
  int raw = 0;
  if (waitpid(pid_, &raw, WNOHANG) != pid_) return true;
  status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : WIFSIGNALED(raw) ? 128 + WTERMSIG(raw) : 255;
  return false;
}

std::optional<int> Child::WaitFor(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(10ms);
  }
  return status_;
}

void Child::Signal(int signo) {
  if (Running()) kill(pid_, signo);
}

int Child::Kill() {
  Signal(SIGKILL);
  if (!status_) status_ = WaitForExit(pid_);
  return *status_;
}

std::string Child::LogTail(std::size_t lines) const {
  std::ifstream in(log_);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(line);
    if (tail.size() > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& line : tail) out += "    | " + line + "\n";
  return out;
}

std::string DescribeStatus(int status) {
  if (status > 128 && status < 128 + 32)
    return sigabbrev_np(status - 128) ? std::string("SIG") + sigabbrev_np(status - 128)
                                      : std::to_string(status);
  return std::to_string(status);
}

}  // namespace coexist::chaos
