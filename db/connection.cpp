#include "db/connection.h"

#include "common/error.h"

namespace coexist::db {

std::unique_ptr<pqxx::connection> Connect(const Server& server,
                                          const std::string& application_name) {
  return Connect(server.conninfo(), application_name);
}

std::unique_ptr<pqxx::connection> Connect(const std::string& conninfo,
                                          const std::string& application_name) {
  CheckConninfo(conninfo);
  std::unique_ptr<pqxx::connection> conn;
  try {
    conn = std::make_unique<pqxx::connection>(conninfo);
  } catch (const pqxx::broken_connection& e) {
    // libpq's message may quote the connection string (the daemon logs
    // this on every retry).
    std::string reason = RedactPasswords(e.what(), conninfo);
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' ')) reason.pop_back();
    throw TempFailError(
        "cannot connect to the database " + DescribeConninfo(conninfo) + ": " + reason,
        "check that the server runs and accepts connections; coexist exits "
        "with 75 (EX_TEMPFAIL) so a scheduler retries later.");
  }
  // The server notices a dead client host (and frees its row and advisory
  // locks: the job's lock) within about two minutes instead of the kernel's
  // two hours: keepalive probes after 60 s idle, every 10 s, 6 unanswered.
  // No effect on unix sockets.
  pqxx::nontransaction tx(*conn);
  tx.exec_params(
      "SELECT set_config('application_name', $1, false), "
      "set_config('tcp_keepalives_idle', '60', false), "
      "set_config('tcp_keepalives_interval', '10', false), "
      "set_config('tcp_keepalives_count', '6', false)",
      application_name);
  return conn;
}

}  // namespace coexist::db
