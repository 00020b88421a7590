#include "daemon/work_waiter.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <pqxx/pqxx>
#include <system_error>

#include "db/connection.h"
#include "schema/queue_store.h"

namespace coexist::daemon {
namespace {

constexpr const char* kChannel = "coexist_queue";

// Remembers which jobs were named by notifications since the last look.
class QueueReceiver : public pqxx::notification_receiver {
 public:
  explicit QueueReceiver(pqxx::connection_base& conn) : notification_receiver(conn, kChannel) {}
  void operator()(const std::string& payload, int) override { jobs.push_back(payload); }
  std::vector<std::string> jobs;
};

}  // namespace

struct WorkWaiter::Impl {
  int event_fd = -1;
  std::unique_ptr<pqxx::connection> conn;
  std::unique_ptr<QueueReceiver> receiver;

  // True when a notification named `job`; drains the others.
  bool TakeNotification(const std::string& job) {
    if (!receiver) return false;
    conn->get_notifs();
    bool found = false;
    for (const auto& name : receiver->jobs) found = found || name == job;
    receiver->jobs.clear();
    return found;
  }

  void DrainEventFd() {
    uint64_t value = 0;
    while (read(event_fd, &value, sizeof(value)) > 0) {
    }
  }
};

WorkWaiter::WorkWaiter() : impl_(std::make_unique<Impl>()) {
  impl_->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl_->event_fd < 0) throw std::system_error(errno, std::system_category(), "eventfd");
}

WorkWaiter::~WorkWaiter() {
  Disconnect();
  close(impl_->event_fd);
}

void WorkWaiter::Connect(const std::string& conninfo, const std::string& application_name) {
  if (impl_->conn) return;
  auto conn = db::Connect(conninfo, application_name);
  // The receiver's constructor sends LISTEN on the open connection.
  auto receiver = std::make_unique<QueueReceiver>(*conn);
  impl_->conn = std::move(conn);
  impl_->receiver = std::move(receiver);
}

void WorkWaiter::Disconnect() {
  impl_->receiver.reset();  // before its connection
  impl_->conn.reset();
}

bool WorkWaiter::connected() const { return impl_->conn != nullptr; }

void WorkWaiter::Wake() {
  uint64_t one = 1;
  // A full counter already wakes the waiter; nothing more to do then.
  [[maybe_unused]] auto n = write(impl_->event_fd, &one, sizeof(one));
}

WorkWaiter::Reason WorkWaiter::Wait(std::chrono::milliseconds timeout, const std::string& job) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + timeout;
  // Notifications may have arrived with the last query's results.
  if (impl_->TakeNotification(job)) return Reason::kNotified;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Reason::kTimeout;
    pollfd fds[2] = {{impl_->event_fd, POLLIN, 0}, {-1, POLLIN, 0}};
    if (impl_->conn) fds[1].fd = impl_->conn->sock();
    int n =
        poll(fds, impl_->conn ? 2 : 1, static_cast<int>(std::min<long long>(left.count(), 60'000)));
    if (n < 0 && errno != EINTR) throw std::system_error(errno, std::system_category(), "poll");
    if (n <= 0) continue;
    if (fds[0].revents != 0) {
      impl_->DrainEventFd();
      return Reason::kWoken;
    }
    // Readable (or hung up): get_notifs reads it and throws
    // broken_connection when the server has gone.
    if (impl_->conn && fds[1].revents != 0) {
      if (impl_->TakeNotification(job)) return Reason::kNotified;
      if (!impl_->conn->is_open())
        throw pqxx::broken_connection("the server closed the connection");
    }
  }
}

WorkWaiter::QueueCounts WorkWaiter::Counts(const std::string& job) {
  pqxx::read_transaction tx(*impl_->conn);
  auto counts = db::CountClaimable(tx, job);
  return {counts.queued, counts.deferred};
}

bool WorkWaiter::JobLockHeld(const std::string& job, bool exclusive_only) {
  pqxx::read_transaction tx(*impl_->conn);
  return db::JobLockHeld(tx, job, exclusive_only);
}

}  // namespace coexist::daemon
