#pragma once

// systemd's notify protocol (sd_notify(3)) for `batch daemon`: READY=1,
// STATUS=..., WATCHDOG=1 and STOPPING=1. Without NOTIFY_SOCKET (not started
// by systemd) every call is a cheap no-op.
//
// With WatchdogSec= (WATCHDOG_USEC in the environment) a thread sends
// WATCHDOG=1 at half the interval for as long as the object lives, also
// while the daemon waits for work or a run is in progress. The ping proves the process is alive and
// scheduling threads; a run's own progress is in its runs row's heartbeat.
//
// Thread safety: every member may be called from any thread.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace coexist::daemon {

class SystemdNotifier {
 public:
  SystemdNotifier();
  ~SystemdNotifier();  // stops the watchdog thread
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  void Ready();
  void Stopping();
  // STATUS=<text>: one line for `systemctl status`.
  void Status(const std::string& text);

  // Whether systemd listens (NOTIFY_SOCKET was set at construction).
  bool enabled() const { return enabled_; }
  // The watchdog interval systemd asked for; zero when there is none.
  std::chrono::microseconds watchdog_interval() const { return watchdog_; }

 private:
  void Send(const std::string& message);
  void Watch(std::stop_token stop);

  bool enabled_ = false;
  std::chrono::microseconds watchdog_{0};
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::string status_;
  std::jthread thread_;
};

}  // namespace coexist::daemon
