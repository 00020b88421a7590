#include "schema/events.h"

#include <pqxx/pqxx>

namespace coexist::db {
namespace {

std::optional<long long> OptionalBigint(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<long long>();
}

std::string OptionalText(const pqxx::field& f) { return f.is_null() ? "" : f.as<std::string>(); }

}  // namespace

std::string InsertEventsSql(const std::string& columns) {
  return "INSERT INTO coexist.events (" + columns + ")";
}

void RecordEvent(pqxx::transaction_base& tx, const NewEvent& event) {
  tx.exec_params0(InsertEventsSql("kind, job, run_id, item_id, target, record_key, actor, subject,"
                                  " details") +
                      " VALUES ($1, $2, $3::bigint, $4::bigint, $5::regclass, $6, $7, $8,"
                      " coalesce($9::jsonb, '{}'))",
                  std::string(ToString(event.kind)), event.job, event.run_id, event.item_id,
                  event.target, event.record_key, event.actor, event.subject, event.details_json);
}

std::vector<EventRow> ListEvents(pqxx::connection_base& conn, const EventFilter& filter) {
  pqxx::read_transaction tx(conn);
  std::optional<long long> age_ms;
  if (filter.since_age) age_ms = filter.since_age->count();
  std::vector<EventRow> out;
  for (const auto& r : tx.exec_params(
           "SELECT event_id, to_char(at, 'YYYY-MM-DD HH24:MI:SS.MSOF'), kind, job, run_id,"
           " item_id, target::text, record_key, actor, subject, details::text"
           " FROM coexist.events"
           " WHERE ($1 = '' OR kind = $1) AND ($2 = '' OR job = $2)"
           "   AND ($3::text IS NULL OR coexist.canonical_key(target, $3::text) IN"
           "        (SELECT record_key UNION ALL"
           "         SELECT jsonb_array_elements_text(details->'keys')))"
           "   AND ($4::bigint IS NULL OR at >= now() - $4::bigint * interval '1 millisecond')"
           "   AND ($5::timestamptz IS NULL OR at >= $5::timestamptz)"
           " ORDER BY event_id DESC LIMIT $6",
           filter.kind ? std::string(ToString(*filter.kind)) : std::string(), filter.job,
           filter.record_key, age_ms, filter.since_time, filter.limit)) {
    EventRow e;
    e.event_id = r[0].as<long long>();
    e.at = r[1].as<std::string>();
    e.kind = r[2].as<std::string>();
    e.job = OptionalText(r[3]);
    e.run_id = OptionalBigint(r[4]);
    e.item_id = OptionalBigint(r[5]);
    e.target = OptionalText(r[6]);
    e.record_key = OptionalText(r[7]);
    e.actor = OptionalText(r[8]);
    e.subject = OptionalText(r[9]);
    e.details_json = r[10].as<std::string>();
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace coexist::db
