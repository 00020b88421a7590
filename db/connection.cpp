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
  pqxx::nontransaction tx(*conn);
  tx.exec_params("SELECT set_config('application_name', $1, false)", application_name);
  return conn;
}

}  // namespace coexist::db
