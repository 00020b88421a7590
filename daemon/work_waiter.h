#pragma once

// How `batch daemon` waits for work: a connection that LISTENs on
// coexist_queue (0005_enqueue_notify.sql notifies it on every enqueue with
// the job's name), polled together with an eventfd that Wake() signals, so
// a notification, a signal (stop, reload) or the poll timeout ends a wait,
// whichever comes first. libpqxx stays in the .cpp.
//
// Thread safety: Wake() may be called from any thread (the signal watcher);
// everything else from the daemon's main thread only.

#include <chrono>
#include <memory>
#include <string>

namespace coexist::daemon {

class WorkWaiter {
 public:
  WorkWaiter();  // throws std::system_error when no eventfd can be made
  ~WorkWaiter();
  WorkWaiter(const WorkWaiter&) = delete;
  WorkWaiter& operator=(const WorkWaiter&) = delete;

  // Opens the connection and LISTENs, unless it is open already. Throws
  // TempFailError when the server cannot be reached.
  void Connect(const std::string& conninfo, const std::string& application_name);
  // Drops the connection (after it broke); the next Connect() opens a new one.
  void Disconnect();
  bool connected() const;

  void Wake();

  enum class Reason { kNotified, kWoken, kTimeout };
  // Waits up to `timeout` for a notification naming `job`, a Wake(), or
  // the timeout. Without a connection only Wake() and the timeout end it.
  // Throws pqxx::broken_connection when the connection breaks meanwhile.
  Reason Wait(std::chrono::milliseconds timeout, const std::string& job);

  struct QueueCounts {
    long long queued = 0;    // state queued
    long long deferred = 0;  // deferred and due (not_before has passed)
  };
  // The job's claimable items, read on the listening connection: due, and
  // not behind an earlier pending item of their key (claim_items' rule).
  QueueCounts Counts(const std::string& job);
  // Whether a session holds the job's lock (0004_job_lock.sql), read from
  // pg_locks without trying it; false when 0004 is not installed yet.
  // `exclusive_only`: only an exclusive hold counts (a shared run's view).
  bool JobLockHeld(const std::string& job, bool exclusive_only);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace coexist::daemon
