#include "daemon/systemd_notifier.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace coexist::daemon {

SystemdNotifier::SystemdNotifier() : enabled_(std::getenv("NOTIFY_SOCKET") != nullptr) {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_ = std::chrono::microseconds(usec);
    spdlog::info("systemd watchdog enabled interval_ms={}", usec / 1000);
    thread_ = std::jthread([this](std::stop_token stop) { Watch(stop); });
  }
}

SystemdNotifier::~SystemdNotifier() {
  if (thread_.joinable()) {
    thread_.request_stop();
    wake_.notify_all();
  }
}

void SystemdNotifier::Ready() { Send("READY=1"); }

void SystemdNotifier::Stopping() { Send("STOPPING=1"); }

void SystemdNotifier::Status(const std::string& text) {
  {
    std::lock_guard lock(mutex_);
    if (text == status_) return;
    status_ = text;
  }
  Send("STATUS=" + text);
}

void SystemdNotifier::Send(const std::string& message) {
  int rc = sd_notify(0, message.c_str());
  // 0: no NOTIFY_SOCKET, not run by systemd. A failure is logged, never
  // fatal: the work goes on, systemd's timeouts report what is missing.
  if (rc < 0) {
    spdlog::warn("systemd notification failed message={} error={}", log::Value(message),
                 log::Value(std::strerror(-rc)));
  }
}

void SystemdNotifier::Watch(std::stop_token stop) {
  auto half = watchdog_ / 2;
  while (!stop.stop_requested()) {
    Send("WATCHDOG=1");
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, stop, half, [] { return false; });
  }
}

}  // namespace coexist::daemon
