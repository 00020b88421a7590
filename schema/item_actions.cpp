// An operator's actions on a job's items (item_actions.h).

#include "schema/item_actions.h"

#include <pqxx/pqxx>

#include "common/error.h"
#include "db/array_literal.h"
#include "db/sql_values.h"
#include "schema/event_kind.h"
#include "schema/events.h"
#include "schema/jobs.h"

namespace coexist::db {
namespace {

// The filter over coexist.queue q, on parameters $1 to $6 (FilterParams):
// job, keys, states, reason, since as milliseconds, since as a timestamp.
constexpr const char* kFilter = R"sql(
       q.job = $1
   AND ($2::text[] IS NULL OR q.record_key = ANY ($2::text[]) OR q.record_keys && $2::text[])
   AND ($3::text[] IS NULL OR q.state::text = ANY ($3::text[]))
   AND ($4 = '' OR strpos(lower(coalesce(q.last_error, '')), lower($4)) > 0
                OR strpos(lower(coalesce(q.defer_reason, '')), lower($4)) > 0)
   AND ($5::bigint IS NULL OR q.updated_at >= now() - $5::bigint * interval '1 millisecond')
   AND ($6::timestamptz IS NULL OR q.updated_at >= $6::timestamptz))sql";

// The filter as the event's details keep it.
constexpr const char* kFilterJson = R"sql(
  jsonb_strip_nulls(jsonb_build_object(
    'keys', $2::text[], 'states', $3::text[], 'reason', nullif($4, ''),
    'since', coalesce(now() - $5::bigint * interval '1 millisecond', $6::timestamptz))))sql";

std::optional<std::string> ArrayOrNull(const std::vector<std::string>& values) {
  if (values.empty()) return std::nullopt;
  return ArrayLiteral(values);
}

std::optional<long long> Milliseconds(const std::optional<std::chrono::milliseconds>& age) {
  if (!age) return std::nullopt;
  return age->count();
}

// What each action does to the rows `locked` holds (item_id, was,
// record_key), as CTEs ending in `acted` (item_id of each changed item).
std::string ActionSql(ItemAction action) {
  switch (action) {
    case ItemAction::kCancel:
      return R"sql(
acted AS (
  UPDATE coexist.queue q SET state = 'cancelled', updated_at = now()
    FROM locked l WHERE q.item_id = l.item_id
  RETURNING q.item_id))sql";
    case ItemAction::kReschedule:
      return R"sql(
acted AS (
  UPDATE coexist.queue q SET not_before = $9::timestamptz, updated_at = now()
    FROM locked l WHERE q.item_id = l.item_id
  RETURNING q.item_id))sql";
    case ItemAction::kRetry:
      // As `queue retry --dead`: a retried item goes before the later
      // pending items of its keys, which wait for it again. It is itself
      // marked too (the claim then checks its order), so two retried items
      // of one key keep theirs, and no row is updated twice.
      return R"sql(
acted AS (
  UPDATE coexist.queue q
     SET state = 'queued', attempts = 0, timeouts = 0, not_before = '-infinity',
         follows_pending = true, updated_at = now()
    FROM locked l WHERE q.item_id = l.item_id
  RETURNING q.item_id, q.job, coexist.item_keys(q.record_key, q.record_keys) AS keys),
followers AS (
  UPDATE coexist.queue f SET follows_pending = true FROM acted r
   WHERE f.job = r.job AND f.item_id > r.item_id
     AND (f.record_key = ANY (r.keys) OR f.record_keys && r.keys)
     AND f.state IN ('queued', 'deferred') AND NOT f.follows_pending
     AND f.item_id NOT IN (SELECT item_id FROM locked)))sql";
    case ItemAction::kSkip:
      // Done as a run completes items (0029), without applying them: the
      // chunk's row names no run, and attempts are not charged.
      return R"sql(
kept AS (
  UPDATE coexist.queue q
     SET state = 'done', run_id = NULL, done_at = clock_timestamp(), updated_at = now()
    FROM locked l WHERE q.item_id = l.item_id AND q.idempotency_key IS NOT NULL
  RETURNING q.item_id),
gone AS (
  DELETE FROM coexist.queue q USING locked l
   WHERE q.item_id = l.item_id AND q.idempotency_key IS NULL
  RETURNING q.job, q.item_id, q.record_key, q.record_keys, q.attempts, q.payload),
chunk AS (
  INSERT INTO coexist.done_chunks (job, run_id, done_at, item_ids, record_keys, item_keys,
                                   attempts, payloads)
  SELECT min(job), NULL, clock_timestamp(), array_agg(item_id ORDER BY item_id),
         array_agg(record_key ORDER BY item_id), array_agg(record_keys::text ORDER BY item_id),
         array_agg(attempts ORDER BY item_id), array_agg(payload ORDER BY item_id)
    FROM gone HAVING count(*) > 0
  RETURNING 1),
acted AS (SELECT item_id FROM kept UNION ALL SELECT item_id FROM gone))sql";
  }
  return "";
}

EventKind KindOf(ItemAction action) {
  switch (action) {
    case ItemAction::kCancel:
      return EventKind::kItemsCancelled;
    case ItemAction::kSkip:
      return EventKind::kItemsSkipped;
    case ItemAction::kRetry:
      return EventKind::kItemsRetried;
    case ItemAction::kReschedule:
      return EventKind::kItemsRescheduled;
  }
  return EventKind::kItemsCancelled;
}

// Reads a timestamp the operator gave; UsageError naming `option` when
// the server cannot.
std::string Timestamp(pqxx::dbtransaction& tx, const std::string& option,
                      const std::string& value) {
  try {
    pqxx::subtransaction sub(tx, "timestamp");
    auto text = sub.exec_params1("SELECT $1::timestamptz::text", value)[0].as<std::string>();
    sub.commit();
    return text;
  } catch (const pqxx::data_exception&) {
    throw UsageError(option + " '" + value + "' is not a timestamp",
                     "give a time as PostgreSQL reads it, e.g. '2026-12-06 22:00+00', or a "
                     "duration (e.g. 2h); nothing was changed.");
  }
}

std::map<std::string, long long> CountsOf(const std::string& json_object) {
  std::map<std::string, long long> counts;
  // {"dead": 3, "queued": 2}: jsonb prints keys and numbers plainly.
  std::string s = json_object;
  size_t at = 0;
  while ((at = s.find('"', at)) != std::string::npos) {
    size_t end = s.find('"', at + 1);
    size_t colon = s.find(':', end);
    size_t stop = s.find_first_of(",}", colon);
    counts[s.substr(at + 1, end - at - 1)] = std::stoll(s.substr(colon + 1, stop - colon - 1));
    at = stop;
  }
  return counts;
}

}  // namespace

std::string_view ToString(ItemAction action) {
  switch (action) {
    case ItemAction::kCancel:
      return "cancel";
    case ItemAction::kSkip:
      return "skip";
    case ItemAction::kRetry:
      return "retry";
    case ItemAction::kReschedule:
      return "reschedule";
  }
  return "unknown";
}

std::vector<std::string> StatesOf(ItemAction action) {
  switch (action) {
    case ItemAction::kCancel:
    case ItemAction::kSkip:
      return {"queued", "deferred", "dead"};
    case ItemAction::kRetry:
      return {"dead", "deferred", "cancelled"};
    case ItemAction::kReschedule:
      return {"queued", "deferred"};
  }
  return {};
}

const std::vector<std::string>& ItemStates() {
  static const std::vector<std::string> states = {"queued", "deferred", "done", "dead",
                                                  "cancelled"};
  return states;
}

std::vector<std::string> CanonicalKeys(pqxx::connection_base& conn, const std::string& key_type,
                                       const std::vector<std::string>& keys) {
  pqxx::read_transaction tx(conn);
  std::vector<std::string> out;
  for (const auto& key : keys) {
    try {
      pqxx::subtransaction sub(tx, "key");
      // As enqueue stores it: through the key's type and back.
      out.push_back(
          sub.exec_params1("SELECT $1::" + key_type + "::text", key)[0].as<std::string>());
      sub.commit();
    } catch (const pqxx::data_exception& e) {
      std::string what = e.what();
      throw Error(ExitCode::kDataError,
                  "--key '" + key + "' is not a key of the job's key type " + key_type + ": " +
                      what.substr(0, what.find('\n')),
                  "give the key as the target's key column spells it (enqueue stores keys so); "
                  "nothing was changed.");
    }
  }
  return out;
}

std::vector<ItemRow> ListItems(pqxx::connection_base& conn, const ItemFilter& f, int limit) {
  pqxx::read_transaction tx(conn);
  std::optional<std::string> since_time;
  if (f.since_time) since_time = Timestamp(tx, "--since", *f.since_time);
  std::vector<ItemRow> out;
  for (const auto& r : tx.exec_params(
           std::string("SELECT q.item_id, q.record_key, coalesce(q.record_keys::text, ''),"
                       " q.state::text, q.attempts, coalesce(q.last_error, ''),"
                       " coalesce(q.defer_reason, ''),"
                       " CASE WHEN q.not_before = '-infinity' THEN '' ELSE"
                       " to_char(q.not_before, 'YYYY-MM-DD HH24:MI:SSOF') END,"
                       " to_char(q.updated_at, 'YYYY-MM-DD HH24:MI:SSOF')"
                       " FROM coexist.queue q WHERE") +
               kFilter + " ORDER BY q.item_id LIMIT $7",
           f.job, ArrayOrNull(f.keys), ArrayOrNull(f.states), f.reason, Milliseconds(f.since_age),
           since_time, limit)) {
    out.push_back({r[0].as<long long>(), r[1].as<std::string>(), r[2].as<std::string>(),
                   r[3].as<std::string>(), r[4].as<int>(), r[5].as<std::string>(),
                   r[6].as<std::string>(), r[7].as<std::string>(), r[8].as<std::string>()});
  }
  return out;
}

ItemActionResult ActOnItems(pqxx::connection_base& conn, const ItemActionRequest& request) {
  const auto& f = request.filter;
  pqxx::work tx(conn);
  ItemActionResult result;
  auto keys = ArrayOrNull(f.keys);
  auto states = ArrayOrNull(f.states);
  auto since_ms = Milliseconds(f.since_age);
  std::optional<std::string> since_time;
  if (f.since_time) since_time = Timestamp(tx, "--since", *f.since_time);
  std::optional<std::string> not_before;
  if (request.action == ItemAction::kReschedule) {
    not_before = request.at ? Timestamp(tx, "--at", *request.at)
                            : tx.exec_params1(
                                    "SELECT (now() + $1::bigint * interval "
                                    "'1 millisecond')::text",
                                    request.in ? request.in->count() : 0LL)[0]
                                  .as<std::string>();
    result.not_before = *not_before;
  }

  result.job_known = JobKnown(tx, f.job);
  if (!result.job_known) return result;
  for (const auto& row : tx.exec_params(std::string("SELECT q.state::text, count(*)"
                                                    " FROM coexist.queue q WHERE") +
                                            kFilter + " GROUP BY 1",
                                        f.job, keys, states, f.reason, since_ms, since_time)) {
    result.matched[row[0].as<std::string>()] = row[1].as<long long>();
  }
  result.running_runs = BigintColumn(tx.exec_params(
      "SELECT run_id FROM coexist.runs WHERE job = $1 AND outcome = 'running' ORDER BY run_id",
      f.job));
  if (result.matched.empty()) return result;

  // A chunk's open transaction holds its items' rows (SKIP LOCKED passes
  // them by); a status_partition run holds its takeovers between chunks.
  std::string sql = std::string(R"sql(
WITH applicable AS (
  SELECT q.item_id FROM coexist.queue q
   WHERE q.state::text = ANY ($7::text[]) AND )sql") +
                    kFilter + R"sql(),
taken AS (
  SELECT t.item_id FROM coexist.takeovers t JOIN coexist.runs r ON r.run_id = t.run_id
   WHERE r.outcome = 'running' AND t.item_id IN (SELECT item_id FROM applicable)),
locked AS (
  SELECT q.item_id, q.state::text AS was, q.record_key FROM coexist.queue q
   WHERE q.item_id IN (SELECT item_id FROM applicable EXCEPT SELECT item_id FROM taken)
     AND q.state::text = ANY ($7::text[])
   ORDER BY q.item_id
     FOR UPDATE SKIP LOCKED),)sql" +
                    (request.dry_run ? std::string("\nacted AS (SELECT item_id FROM locked)")
                                     : ActionSql(request.action)) +
                    R"sql(,
changed AS (SELECT l.item_id, l.was, l.record_key FROM locked l
             WHERE l.item_id IN (SELECT item_id FROM acted))
SELECT (SELECT count(*) FROM applicable),
       (SELECT count(*) FROM changed),
       (SELECT coalesce(jsonb_object_agg(was, n), '{}')::text
          FROM (SELECT was, count(*) AS n FROM changed GROUP BY was) s),
       (SELECT coalesce(array_agg(item_id ORDER BY item_id), '{}')::text
          FROM (SELECT item_id FROM changed ORDER BY item_id LIMIT $8) s),
       (SELECT coalesce(array_agg(record_key ORDER BY item_id), '{}')::text
          FROM (SELECT item_id, record_key FROM changed ORDER BY item_id LIMIT $8) s),
       (SELECT coalesce(array_agg(item_id ORDER BY item_id), '{}')::text
          FROM (SELECT item_id FROM changed ORDER BY item_id LIMIT 20) s),
       $9::timestamptz)sql";
  auto row = tx.exec_params1(sql, f.job, keys, states, f.reason, since_ms, since_time,
                             ArrayLiteral(StatesOf(request.action)), request.sample, not_before);
  long long applicable = row[0].as<long long>();
  result.changed_total = row[1].as<long long>();
  result.held = applicable - result.changed_total;
  result.changed = CountsOf(row[2].as<std::string>());
  auto ids = ParseArrayLiteral(row[3].as<std::string>());
  auto sample_keys = ParseArrayLiteral(row[4].as<std::string>());
  for (size_t i = 0; i < ids.size() && i < sample_keys.size(); ++i) {
    result.sample.emplace_back(std::stoll(ids[i]), sample_keys[i]);
  }
  if (request.dry_run || result.changed_total == 0) return result;  // rolls back

  result.event_id =
      tx.exec_params1(InsertEventsSql("kind, job, actor, details") +
                          " SELECT $7, $1, $8, jsonb_build_object('action', $9::text, 'filter', " +
                          kFilterJson +
                          ", 'items', $10::bigint, 'by_state', $11::jsonb, 'held', $12::bigint,"
                          " 'item_ids', $13::bigint[], 'db_user', session_user::text)"
                          " || jsonb_strip_nulls(jsonb_build_object('why', nullif($14, ''),"
                          " 'not_before', $15::timestamptz))"
                          " RETURNING event_id",
                      f.job, keys, states, f.reason, since_ms, since_time,
                      std::string(ToString(KindOf(request.action))), request.actor,
                      std::string(ToString(request.action)), result.changed_total,
                      row[2].as<std::string>(), result.held, row[5].as<std::string>(), request.why,
                      not_before)[0]
          .as<long long>();
  tx.commit();
  return result;
}

}  // namespace coexist::db
