#include "online-sim/pool.h"

#include <spdlog/spdlog.h>

#include "common/log.h"

namespace coexist::online_sim {

using Clock = std::chrono::steady_clock;

struct Pool::Waiter {
  explicit Waiter(asio::io_context& io) : timer(io, Clock::time_point::max()) {}
  asio::steady_timer timer;
  Connection* granted = nullptr;
};

Lease::Lease(Lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      connection_(std::exchange(other.connection_, nullptr)) {}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Reset();
    pool_ = std::exchange(other.pool_, nullptr);
    connection_ = std::exchange(other.connection_, nullptr);
  }
  return *this;
}

void Lease::Reset() {
  if (pool_ != nullptr && connection_ != nullptr) pool_->Release(connection_);
  pool_ = nullptr;
  connection_ = nullptr;
}

Pool::Pool(asio::io_context& io, const Catalog& catalog, const std::string& conninfo,
           const std::string& application_name, std::vector<Statement> setup, int size,
           Stats& stats)
    : io_(io), stats_(stats) {
  for (int i = 0; i < size; ++i) {
    connections_.push_back(
        std::make_unique<Connection>(io, catalog, conninfo, application_name, setup));
  }
}

Pool::~Pool() { Close(); }

Awaitable<> Pool::Open() {
  for (auto& connection : connections_) {
    co_await connection->Connect();
    idle_.push_back(connection.get());
  }
}

void Pool::Close() {
  closed_ = true;
  for (auto& connection : connections_) connection->Close();
  for (Waiter* waiter : waiters_) waiter->timer.cancel();
  waiters_.clear();
}

Awaitable<Lease> Pool::Acquire() {
  auto asked = Clock::now();
  Connection* connection = nullptr;
  if (!idle_.empty()) {
    connection = idle_.back();
    idle_.pop_back();
  } else if (!closed_) {
    Waiter waiter(io_);
    waiters_.push_back(&waiter);
    boost::system::error_code ec;
    co_await waiter.timer.async_wait(asio::redirect_error(use_awaitable, ec));
    connection = waiter.granted;
  }
  stats_.pool_wait.Add(Clock::now() - asked);
  if (connection == nullptr) throw std::runtime_error("the connection pool is closed");
  co_return Lease(this, connection);
}

void Pool::Release(Connection* connection) {
  if (closed_) return;
  // A transaction left open (a bug, or an error path that could not roll
  // back) must not leak into the next user's work: start afresh.
  if (!connection->broken() && connection->in_transaction()) connection->Close();
  if (connection->broken()) {
    Spawn(io_, Reconnect(connection), "reconnect");
    return;
  }
  Hand(connection);
}

void Pool::Hand(Connection* connection) {
  if (!waiters_.empty()) {
    Waiter* waiter = waiters_.front();
    waiters_.pop_front();
    waiter->granted = connection;
    waiter->timer.cancel();
  } else {
    idle_.push_back(connection);
  }
}

Awaitable<> Pool::Reconnect(Connection* connection) {
  auto pause = std::chrono::milliseconds(50);
  while (!closed_) {
    try {
      co_await connection->Connect();
      ++stats_.reconnects;
      if (!closed_) Hand(connection);
      co_return;
    } catch (const std::exception& e) {
      spdlog::warn("reconnect failed error={} retry_in_ms={}", log::Value(e.what()), pause.count());
    }
    co_await Sleep(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

}  // namespace coexist::online_sim
