#pragma once

// Include only from .cpp files: it brings in libpqxx.

#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "db/server.h"

namespace coexist::db {

// Opens a connection to the server and sets application_name (which
// batch_priority matches to decide whose backends it may cancel) and the
// server's TCP keepalives for this session (a dead client host's session and
// locks go within about two minutes).
// Throws TempFailError, naming the server (never a password), when the server
// cannot be reached; ConfigurationError (78) when libpq cannot parse the
// connection string (db::CheckConninfo).
std::unique_ptr<pqxx::connection> Connect(const Server& server,
                                          const std::string& application_name = "coexist");
std::unique_ptr<pqxx::connection> Connect(const std::string& conninfo,
                                          const std::string& application_name = "coexist");

}  // namespace coexist::db
