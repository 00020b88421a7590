#pragma once

// The audit trail: its one writer and its reader, `coexist events`
// (docs/operations.md, "The audit trail"). Runs, operators, the pacer and
// the daemon record events (docs/schema.md lists the kinds) through
// RecordEvent, or through InsertEventsSql in the very statement that makes
// the change an event records (an item's death with its attempt, a signal
// with its backend), so the change and its audit commit together.
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

#include "schema/event_kind.h"

namespace pqxx {
class connection_base;
class transaction_base;
}  // namespace pqxx

namespace coexist::db {

// A new coexist.events row; nullopt leaves a column NULL (`at` is now()).
struct NewEvent {
  EventKind kind;
  std::optional<std::string> job;
  std::optional<long long> run_id, item_id;
  std::optional<std::string> target;  // a regclass literal, or the table's oid as text
  std::optional<std::string> record_key, actor, subject;
  std::optional<std::string> details_json;  // a JSON object as text
};

// Inserts `event` in `tx`.
void RecordEvent(pqxx::transaction_base& tx, const NewEvent& event);

// "INSERT INTO coexist.events (<columns>)", for the caller to follow with
// the SELECT or VALUES of its rows: a step of a statement (WITH ... AS
// (INSERT ...)) that records events with its change.
std::string InsertEventsSql(const std::string& columns);

// Which events; every filter that is set must match.
struct EventFilter {
  std::optional<EventKind> kind;                       // nullopt: every kind
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
