#pragma once

// The audit trail's reader: `coexist events` (docs/operations.md, "The
// audit trail"). coexist.events is written by runs, operators and the
// daemon (docs/schema.md lists the kinds); this reads it, never writes.
//
// Errors are libpqxx's, uncaught: pqxx::broken_connection when the server
// goes away, pqxx::sql_error when the database refuses the statement (42P01
// when coexist is not installed, 42501 without SELECT on coexist.events,
// 22007/22008 for a `since_time` the server cannot read as a timestamp).
//
// Thread safety: a plain function; a connection is used by one thread at a
// time, as libpqxx requires.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace pqxx {
class connection_base;
}  // namespace pqxx

namespace coexist::db {

// Which events; every filter that is set must match.
struct EventFilter {
  std::string kind;                                    // empty: every kind
  std::string job;                                     // empty: every job (and events of none)
  std::optional<std::string> record_key;               // of any target, in any spelling of its type
  std::optional<std::chrono::milliseconds> since_age;  // at >= now() - since_age
  std::optional<std::string> since_time;               // at >= since_time::timestamptz
  int limit = 50;                                      // the newest `limit` matching events
};

// One coexist.events row; "" and nullopt where the column is NULL.
struct EventRow {
  long long event_id = 0;
  std::string at;  // "YYYY-MM-DD HH:MI:SS.MS+TZ" in the session's time zone
  std::string kind, job;
  std::optional<long long> run_id, item_id;
  std::string target, record_key, actor, subject;
  std::string details_json;  // jsonb as text
};

// The newest `filter.limit` events that match, newest first, in one
// read-only transaction of its own on `conn` (which must have none open).
std::vector<EventRow> ListEvents(pqxx::connection_base& conn, const EventFilter& filter);

}  // namespace coexist::db
