#pragma once

// Private to online-sim/: a fixed-size connection pool like an application
// server's. A transaction waits for a free connection (the wait is measured);
// a connection handed back broken (terminated backend, lost server) is
// reconnected in the background before anyone gets it again.
// Not thread-safe: one io_context thread.

#include <deque>
#include <memory>
#include <vector>

#include "online-sim/pg_connection.h"
#include "online-sim/stats.h"

namespace coexist::online_sim {

class Pool;

// A borrowed connection; handed back when the lease goes.
class Lease {
 public:
  Lease() = default;
  Lease(Pool* pool, Connection* connection) : pool_(pool), connection_(connection) {}
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  ~Lease() { Reset(); }

  Connection& operator*() const { return *connection_; }
  Connection* operator->() const { return connection_; }
  explicit operator bool() const { return connection_ != nullptr; }
  // Hands the connection back now.
  void Reset();

 private:
  Pool* pool_ = nullptr;
  Connection* connection_ = nullptr;
};

class Pool {
 public:
  Pool(asio::io_context& io, const Catalog& catalog, const std::string& conninfo,
       const std::string& application_name, std::vector<Statement> setup, int size, Stats& stats);
  ~Pool();

  // Opens every connection. Throws std::runtime_error (libpq's message) on
  // the first that fails.
  Awaitable<> Open();
  // Waits for a free connection; adds the wait to stats.pool_wait.
  Awaitable<Lease> Acquire();
  // Closes the connections; leases still out see them broken.
  void Close();
  int size() const { return static_cast<int>(connections_.size()); }

 private:
  friend class Lease;
  struct Waiter;
  void Release(Connection* connection);
  void Hand(Connection* connection);
  Awaitable<> Reconnect(Connection* connection);

  asio::io_context& io_;
  Stats& stats_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::vector<Connection*> idle_;
  std::deque<Waiter*> waiters_;
  bool closed_ = false;
};

}  // namespace coexist::online_sim
