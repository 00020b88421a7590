#include "online-sim/pg_connection.h"

#include <libpq-fe.h>

#include <boost/system/system_error.hpp>
#include <charconv>
#include <stdexcept>

#include "db/server.h"

namespace coexist::online_sim {
namespace {

// Watches libpq's socket without owning it: libpq closes it in PQfinish.
class Borrowed {
 public:
  Borrowed(asio::io_context& io, int fd) : descriptor_(io, fd) {}
  ~Borrowed() { descriptor_.release(); }
  asio::posix::stream_descriptor& get() { return descriptor_; }

 private:
  asio::posix::stream_descriptor descriptor_;
};

std::string Trimmed(const char* text) {
  std::string out = text == nullptr ? "" : text;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

int Catalog::Add(std::string name, std::string sql, int param_count) {
  entries_.push_back({std::move(name), std::move(sql), param_count});
  return static_cast<int>(entries_.size()) - 1;
}

void Result::Free::operator()(pg_result* r) const { PQclear(r); }

Result::Result(pg_result* result) : result_(result) {}

int Result::rows() const { return result_ ? PQntuples(result_.get()) : 0; }

int Result::affected() const {
  if (!result_) return 0;
  const char* text = PQcmdTuples(result_.get());
  int value = 0;
  std::from_chars(text, text + std::char_traits<char>::length(text), value);
  return value;
}

bool Result::IsNull(int row, int column) const {
  return !result_ || PQgetisnull(result_.get(), row, column);
}

std::string_view Result::Text(int row, int column) const {
  if (IsNull(row, column)) return {};
  return {PQgetvalue(result_.get(), row, column),
          static_cast<size_t>(PQgetlength(result_.get(), row, column))};
}

long long Result::Int(int row, int column) const {
  auto text = Text(row, column);
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw std::runtime_error("expected an integer, got '" + std::string(text) + "'");
  }
  return value;
}

bool Result::Bool(int row, int column) const { return Text(row, column) == "t"; }

Connection::Connection(asio::io_context& io, const Catalog& catalog, std::string conninfo,
                       std::string application_name, std::vector<Statement> setup)
    : io_(io),
      catalog_(catalog),
      conninfo_(std::move(conninfo)),
      application_name_(std::move(application_name)),
      setup_(std::move(setup)) {}

Connection::~Connection() { Close(); }

void Connection::Close() {
  if (socket_) {
    socket_->release();
    socket_.reset();
  }
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
}

bool Connection::broken() const { return conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK; }

bool Connection::in_transaction() const {
  return conn_ != nullptr && PQtransactionStatus(conn_) != PQTRANS_IDLE;
}

int Connection::backend_pid() const { return conn_ == nullptr ? 0 : PQbackendPID(conn_); }

Awaitable<> Connection::Connect() {
  Close();
  prepared_.assign(catalog_.size(), false);
  // dbname first with expand_dbname, so a URL or key=value string works and
  // application_name after it wins over one inside it.
  const char* keywords[] = {"dbname", "application_name", nullptr};
  const char* values[] = {conninfo_.c_str(), application_name_.c_str(), nullptr};
  conn_ = PQconnectStartParams(keywords, values, 1);
  if (conn_ == nullptr) throw std::runtime_error("out of memory");
  PostgresPollingStatusType status = PGRES_POLLING_WRITING;
  while (status != PGRES_POLLING_OK) {
    if (status == PGRES_POLLING_FAILED || PQstatus(conn_) == CONNECTION_BAD) {
      // libpq may quote the connection string; the pool logs this message.
      std::string message = db::RedactPasswords(Trimmed(PQerrorMessage(conn_)), conninfo_);
      Close();
      throw std::runtime_error(message);
    }
    {
      Borrowed socket(io_, PQsocket(conn_));
      co_await socket.get().async_wait(status == PGRES_POLLING_READING
                                           ? asio::posix::stream_descriptor::wait_read
                                           : asio::posix::stream_descriptor::wait_write,
                                       use_awaitable);
    }
    status = PQconnectPoll(conn_);
  }
  if (PQsetnonblocking(conn_, 1) != 0 || PQenterPipelineMode(conn_) != 1) {
    std::string message = Trimmed(PQerrorMessage(conn_));
    Close();
    throw std::runtime_error("cannot enter pipeline mode: " + message);
  }
  socket_ = std::make_unique<asio::posix::stream_descriptor>(io_, PQsocket(conn_));
  if (!setup_.empty()) {
    RoundTrip setup = co_await Run(setup_);  // a copy
    if (!setup.ok()) {
      Close();
      throw std::runtime_error("connection setup failed: " + setup.message);
    }
  }
}

Awaitable<> Connection::WaitFor(Wait wait) {
  co_await socket_->async_wait(wait == Wait::kRead ? asio::posix::stream_descriptor::wait_read
                                                   : asio::posix::stream_descriptor::wait_write,
                               use_awaitable);
}

bool Connection::Send(const Statement& statement, std::vector<bool>& is_prepare) {
  const Catalog::Entry& entry = catalog_.at(statement.id);
  if (!prepared_[static_cast<size_t>(statement.id)]) {
    if (!PQsendPrepare(conn_, entry.name.c_str(), entry.sql.c_str(), entry.param_count, nullptr)) {
      return false;
    }
    prepared_[static_cast<size_t>(statement.id)] = true;
    is_prepare.push_back(true);
  }
  const char* values[16];
  size_t count = std::min<size_t>(statement.params.size(), 16);
  for (size_t i = 0; i < count; ++i) values[i] = statement.params[i].c_str();
  if (!PQsendQueryPrepared(conn_, entry.name.c_str(), static_cast<int>(count), values, nullptr,
                           nullptr, 0)) {
    return false;
  }
  is_prepare.push_back(false);
  return true;
}

Awaitable<bool> Connection::Flush() {
  for (;;) {
    int flushed = PQflush(conn_);
    if (flushed == 0) co_return true;
    if (flushed < 0) co_return false;
    co_await WaitFor(Wait::kWrite);
  }
}

Awaitable<pg_result*> Connection::NextResult(bool& lost) {
  while (PQisBusy(conn_)) {
    co_await WaitFor(Wait::kRead);
    if (!PQconsumeInput(conn_)) {
      lost = true;
      co_return nullptr;
    }
  }
  co_return PQgetResult(conn_);
}

Awaitable<RoundTrip> Connection::Run(std::vector<Statement> statements) {
  RoundTrip trip;
  trip.results.resize(statements.size());
  if (broken()) {
    trip.connection_lost = true;
    trip.message = "not connected";
    co_return trip;
  }
  // Which result slots are prepares (no statement result) and which executes.
  std::vector<bool> is_prepare;
  bool sent = true;
  for (const Statement& statement : statements) sent = sent && Send(statement, is_prepare);
  sent = sent && PQpipelineSync(conn_) == 1;
  try {
    if (!sent || !(co_await Flush())) {
      trip.connection_lost = true;
      trip.message = Trimmed(PQerrorMessage(conn_));
      Close();
      co_return trip;
    }
    size_t statement = 0;
    for (bool prepare : is_prepare) {
      bool lost = false;
      // Each query of the pipeline yields its result(s), then a null.
      while (pg_result* raw = co_await NextResult(lost)) {
        Result result(raw);
        ExecStatusType status = PQresultStatus(raw);
        if (status == PGRES_FATAL_ERROR && trip.sqlstate.empty()) {
          const char* state = PQresultErrorField(raw, PG_DIAG_SQLSTATE);
          trip.sqlstate = state == nullptr ? "" : state;
          trip.message = Trimmed(PQresultErrorField(raw, PG_DIAG_MESSAGE_PRIMARY));
          trip.failed_statement = static_cast<int>(statement);
        }
        // A prepare that failed or was skipped (an earlier statement of the
        // pipeline failed) must be sent again next time.
        if (prepare && status != PGRES_COMMAND_OK) {
          prepared_[static_cast<size_t>(statements[statement].id)] = false;
        }
        if (!prepare && (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK)) {
          trip.results[statement] = std::move(result);
        }
        if (PQstatus(conn_) == CONNECTION_BAD) lost = true;
        if (lost) break;
      }
      if (lost || PQstatus(conn_) == CONNECTION_BAD) {
        trip.connection_lost = true;
        if (trip.message.empty()) trip.message = Trimmed(PQerrorMessage(conn_));
        co_return trip;
      }
      if (!prepare) ++statement;
    }
    bool lost = false;
    pg_result* sync = co_await NextResult(lost);
    bool synced = sync != nullptr && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(sync);
    if (lost || !synced) {
      trip.connection_lost = true;
      if (trip.message.empty()) trip.message = "pipeline out of step";
      Close();
    }
  } catch (const boost::system::system_error& e) {
    trip.connection_lost = true;
    trip.message = e.what();
    Close();
  }
  co_return trip;
}

}  // namespace coexist::online_sim
