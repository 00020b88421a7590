#pragma once

// Include only from .cpp files: it brings in libpqxx.

#include <chrono>
#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "db/server.h"

namespace coexist::db {

// Opens a connection to the server and sets application_name (which
// batch_priority matches to decide whose backends it may cancel) and the
// server's TCP keepalives for this session (a dead client host's session and
// locks go within about two minutes). The client's side is bounded too
// (WithStallSettings, with StallTimeout()): a server that stops answering
// fails the connect after connect_timeout, and, once WatchForStalls is on,
// every open connection to it (StallWatchdog below).
// Throws TempFailError, naming the server (never a password), when the server
// cannot be reached (or did not answer within connect_timeout);
// ConnectionSettingsError (78) when libpq cannot parse the connection string
// or refuses one of its values, also one from the PG* environment
// (db::CheckConninfo, db::IsSettingsFailure).
std::unique_ptr<pqxx::connection> Connect(const Server& server,
                                          const std::string& application_name = "coexist");
std::unique_ptr<pqxx::connection> Connect(const std::string& conninfo,
                                          const std::string& application_name = "coexist");

// Parses and plans `sql` on `conn` through the extended protocol
// (PQprepare) and forgets it: nothing of it runs, and a string of two
// statements ("...; DROP TABLE x") is refused, which a simple-protocol
// "PREPARE ... AS <sql>" would have run the tail of. Throws the server's
// pqxx::sql_error when it refuses the statement.
void ParseOnly(pqxx::connection_base& conn, const std::string& sql);

// How long a server may leave coexist without any answer before coexist
// treats it as gone (database.stall_timeout). Process-wide, read by every
// Connect; 0 turns the client-side settings and the watchdog off.
inline constexpr std::chrono::milliseconds kDefaultStallTimeout{30'000};
void SetStallTimeout(std::chrono::milliseconds timeout);
std::chrono::milliseconds StallTimeout();

// `conninfo` (a URL or key=value string) as a key=value string with what
// bounds a silent server on the client's side, each unless `conninfo` sets
// it itself: TCP keepalives (keepalives=1, keepalives_idle = half the stall
// timeout, keepalives_interval a sixth, keepalives_count 3: a peer that
// vanished is noticed after about the stall timeout), tcp_user_timeout
// (data unacknowledged for the stall timeout breaks the connection) and
// connect_timeout (the stall timeout, at least 2 s; not when
// PGCONNECT_TIMEOUT is set). The TCP settings do nothing on a unix socket;
// none of them notices a server whose kernel still acknowledges (a
// stopped or hung postgres): the watchdog does.
std::string WithStallSettings(const std::string& conninfo, std::chrono::milliseconds stall_timeout);

// The stall watchdog: SetStallTimeout(timeout), and from now on every
// server Connect() reaches is watched while this process holds a connection
// to it. A thread keeps one connection of its own to each such server
// (application_name coexist-watchdog) and asks it `SELECT 1` every quarter
// of the stall timeout; when the server does not answer (or a new
// connection does not complete) within the stall timeout, the server is
// not answering anybody: every socket of this process connected to it is
// shut down (shutdown(2)), so that the statements waiting on them fail at
// once with a broken connection (`batch run` exits 75, the daemon
// reconnects with backoff), and "database not answering" is logged.
// Waits the server answers for (a row lock under lock_timeout, a slow
// statement, the policies' waits) are never cut: the probe gets its answer
// meanwhile. A single backend that stops while its server still answers is
// not noticed (statement_timeout, kept by that backend, is then the bound).
// The CLI turns it on for every command (cli/context.cpp); tests that
// link the library do not get it unless they call this.
void WatchForStalls(std::chrono::milliseconds timeout);

}  // namespace coexist::db
