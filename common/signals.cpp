#include "common/signals.h"

#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <thread>

namespace coexist::signals {
namespace {

struct Registry {
  std::mutex mutex;
  int next_id = 0;
  std::map<int, Callback> handlers;
  std::map<int, std::function<void()>> cleanups;
  bool handling = false;
  int dispatching = -1;  // the handler whose callback runs now, outside the lock
  std::condition_variable dispatched;
};

Registry& TheRegistry() {
  static Registry registry;
  return registry;
}

sigset_t WatchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

// Runs under the registry lock and never releases it: a ~Cleanup on another
// thread then blocks until the process exits, so no cleanup's state is freed
// while the cleanup uses it.
[[noreturn]] void RunCleanupsAndExit(int signo) {
  auto& registry = TheRegistry();
  registry.mutex.lock();
  for (auto it = registry.cleanups.rbegin(); it != registry.cleanups.rend(); ++it) it->second();
  std::_Exit(128 + signo);
}

void Dispatch(int signo) {
  auto& registry = TheRegistry();
  Callback handler;
  {
    std::lock_guard lock(registry.mutex);
    bool repeated = registry.handling && signo != SIGHUP;
    if (!registry.handlers.empty() && !repeated) {
      handler = registry.handlers.rbegin()->second;
      registry.dispatching = registry.handlers.rbegin()->first;
      if (signo != SIGHUP) registry.handling = true;
    }
  }
  if (handler) {
    handler(signo);
    // Notified under the lock: a waiting ~Handler may be the last use of
    // the registry before the process exits.
    std::lock_guard lock(registry.mutex);
    registry.dispatching = -1;
    registry.dispatched.notify_all();
  } else if (signo != SIGHUP) {
    RunCleanupsAndExit(signo);
  }
}

void Watch(std::stop_token stop) {
  sigset_t set = WatchedSignals();
  // Wakes up every 200 ms to see whether the process is shutting down.
  timespec slice{0, 200'000'000};
  while (!stop.stop_requested()) {
    int signo = sigtimedwait(&set, nullptr, &slice);
    if (signo > 0) Dispatch(signo);
  }
}

}  // namespace

void Install() {
  sigset_t set = WatchedSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // The registry first: statics die in reverse order, so the watcher is
  // stopped and joined before the registry it uses is destroyed.
  TheRegistry();
  static std::jthread watcher(Watch);
}

Handler::Handler(Callback callback) {
  auto& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  id_ = registry.next_id++;
  registry.handlers[id_] = std::move(callback);
}

Handler::~Handler() {
  auto& registry = TheRegistry();
  std::unique_lock lock(registry.mutex);
  registry.handlers.erase(id_);
  if (registry.handlers.empty()) registry.handling = false;
  // The callback uses its owner's state, which goes away with this object:
  // one that is running on the watcher thread must finish first.
  registry.dispatched.wait(lock, [&registry, this] { return registry.dispatching != id_; });
}

Cleanup::Cleanup(std::function<void()> cleanup) {
  auto& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  id_ = registry.next_id++;
  registry.cleanups[id_] = std::move(cleanup);
}

Cleanup::~Cleanup() {
  auto& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  registry.cleanups.erase(id_);
}

}  // namespace coexist::signals
