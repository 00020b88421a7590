#pragma once

// Private to online-sim/: an asynchronous PostgreSQL connection on libpq's
// non-blocking API in pipeline mode, driven by Boost.Asio. libpqxx 6.4 is
// blocking, and thousands of virtual users cannot each own a thread.
//
// Not thread-safe: a Connection lives on one io_context thread.

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/asio.h"

struct pg_conn;
struct pg_result;

namespace coexist::online_sim {

// online-sim's coroutines use common/asio.h's names unqualified.
namespace asio = async::asio;
using async::Awaitable;
using async::Sleep;
using async::Spawn;
using async::use_awaitable;

// Every SQL statement the simulator sends, prepared once per connection on
// first use (prepared statements are named verb_noun).
class Catalog {
 public:
  struct Entry {
    std::string name;
    std::string sql;
    int param_count;
  };
  // Returns the id to put in a Statement.
  int Add(std::string name, std::string sql, int param_count);
  const Entry& at(int id) const { return entries_.at(static_cast<size_t>(id)); }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<Entry> entries_;
};

// One statement of a round trip: a catalog id and its text parameters.
struct Statement {
  int id;
  std::vector<std::string> params;
};

// The result of one statement; empty when the statement failed or was
// skipped because an earlier one in the same round trip failed.
class Result {
 public:
  Result() = default;
  explicit Result(pg_result* result);
  int rows() const;
  int affected() const;  // rows an INSERT/UPDATE/DELETE touched
  bool IsNull(int row, int column) const;
  std::string_view Text(int row, int column) const;
  long long Int(int row, int column) const;
  bool Bool(int row, int column) const;

 private:
  struct Free {
    void operator()(pg_result* r) const;
  };
  std::unique_ptr<pg_result, Free> result_;
};

// What one round trip brought back.
struct RoundTrip {
  std::vector<Result> results;   // one per statement, in order
  std::string sqlstate;          // the first error's SQLSTATE; empty: all succeeded
  std::string message;           // its primary message
  int failed_statement = -1;     // index of the statement that failed
  bool connection_lost = false;  // the connection is unusable (terminated, server gone)
  bool ok() const { return sqlstate.empty() && !connection_lost; }
};

class Connection {
 public:
  // `setup` runs after every (re)connect, e.g. to set lock_timeout.
  Connection(asio::io_context& io, const Catalog& catalog, std::string conninfo,
             std::string application_name, std::vector<Statement> setup = {});
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects without blocking the thread; closes a previous connection
  // first. Throws std::runtime_error with libpq's message when it fails.
  Awaitable<> Connect();

  // Sends the statements in one pipeline ending in one Sync (one network
  // round trip) and collects their results. Statements between two Syncs
  // run in one implicit transaction unless a BEGIN is among them. Never
  // throws for SQL errors or a lost connection: RoundTrip says so.
  // (By value: g++ 12 miscompiles braced lists that live across co_await,
  // so callers build a named vector and move it in.)
  Awaitable<RoundTrip> Run(std::vector<Statement> statements);

  // No usable connection: never connected, or lost.
  bool broken() const;
  // Inside a transaction block (also a failed one) after the last Run.
  bool in_transaction() const;
  // The server process id, for tests that cancel or terminate it.
  int backend_pid() const;
  void Close();

 private:
  enum class Wait { kRead, kWrite };
  Awaitable<> WaitFor(Wait wait);
  bool Send(const Statement& statement, std::vector<bool>& is_prepare);
  Awaitable<bool> Flush();
  Awaitable<pg_result*> NextResult(bool& lost);

  asio::io_context& io_;
  const Catalog& catalog_;
  std::string conninfo_;
  std::string application_name_;
  std::vector<Statement> setup_;
  pg_conn* conn_ = nullptr;
  std::unique_ptr<asio::posix::stream_descriptor> socket_;
  std::vector<bool> prepared_;
};

}  // namespace coexist::online_sim
