// The queue store's statements for operators and reports (queue_store_ops.h).

#include "schema/queue_store_ops.h"

#include <algorithm>
#include <pqxx/pqxx>

#include "db/array_literal.h"
#include "schema/events.h"

namespace coexist::db {
namespace {

constexpr const char* kRunColumns =
    "run_id, job, policy, host, pid, to_char(started_at, 'YYYY-MM-DD HH24:MI:SSOF'),"
    " coalesce(to_char(ended_at, 'YYYY-MM-DD HH24:MI:SSOF'), ''), outcome, claimed, done, deferred,"
    " dead, extract(epoch FROM coalesce(ended_at, now()) - started_at)::float8,"
    " coalesce(CASE outcome WHEN 'running' THEN details->'pacing' END, 'null')::text";

RunRow RunOf(const pqxx::row& r) {
  return {r[0].as<long long>(),   r[1].as<std::string>(), r[2].as<std::string>(),
          r[3].as<std::string>(), r[4].as<int>(),         r[5].as<std::string>(),
          r[6].as<std::string>(), r[7].as<std::string>(), r[8].as<long long>(),
          r[9].as<long long>(),   r[10].as<long long>(),  r[11].as<long long>(),
          r[12].as<double>(),     r[13].as<std::string>()};
}

// Each deletes at most $2 rows older than $1, locked so that a row another
// session holds is skipped, and returns how many rows it deleted and how
// many things they held (a done chunk holds many items); the ORDER BY keeps
// the plan on the retention indexes (0011, 0029).
constexpr const char* kPurgeDoneItems =
    "WITH d AS (DELETE FROM coexist.queue WHERE item_id IN (SELECT item_id FROM coexist.queue"
    " WHERE state = 'done' AND done_at < $1::timestamptz ORDER BY done_at LIMIT $2"
    " FOR UPDATE SKIP LOCKED) RETURNING 1) SELECT count(*), count(*) FROM d";
constexpr const char* kPurgeDoneChunks =
    "WITH d AS (DELETE FROM coexist.done_chunks WHERE chunk_id IN (SELECT chunk_id"
    " FROM coexist.done_chunks WHERE done_at < $1::timestamptz ORDER BY done_at LIMIT $2"
    " FOR UPDATE SKIP LOCKED) RETURNING cardinality(item_ids) AS items)"
    " SELECT count(*), coalesce(sum(items), 0) FROM d";
constexpr const char* kPurgeEvents =
    "WITH d AS (DELETE FROM coexist.events WHERE event_id IN (SELECT event_id FROM coexist.events"
    " WHERE at < $1::timestamptz ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1)"
    " SELECT count(*), count(*) FROM d";
constexpr const char* kPurgeRuns =
    "WITH d AS (DELETE FROM coexist.runs WHERE run_id IN (SELECT run_id FROM coexist.runs"
    " WHERE outcome <> 'running' AND ended_at < $1::timestamptz ORDER BY ended_at LIMIT $2"
    " FOR UPDATE SKIP LOCKED) RETURNING 1) SELECT count(*), count(*) FROM d";

// Deletes in statements of kPurgeBatchRows rows until one deletes fewer;
// returns the things deleted. The cutoff is fixed first, so rows that age
// into range meanwhile cannot keep the loop going.
long long PurgeInBatches(pqxx::connection_base& conn, const char* sql,
                         std::chrono::milliseconds age, const std::atomic<bool>* stop) {
  if (age.count() <= 0) return 0;
  pqxx::nontransaction tx(conn);  // autocommit: each statement commits on its own
  auto cutoff = tx.exec_params("SELECT (now() - $1 * interval '1 millisecond')::text",
                               static_cast<long long>(age.count()))[0][0]
                    .as<std::string>();
  long long total = 0;
  while (stop == nullptr || !stop->load()) {
    auto deleted = tx.exec_params1(sql, cutoff, kPurgeBatchRows);
    total += deleted[1].as<long long>();
    if (deleted[0].as<long long>() < kPurgeBatchRows) break;
  }
  return total;
}

// The 10 most frequent last_errors of the items `which` selects (SQL over
// coexist.queue, a constant of this file), by job.
std::vector<DeadError> TopErrors(pqxx::transaction_base& tx, const std::string& which,
                                 const std::string& job) {
  std::vector<DeadError> errors;
  for (const auto& row : tx.exec_params(
           "SELECT job, coalesce(last_error, '(no error kept)'), count(*) FROM coexist.queue"
           " WHERE " +
               which +
               " AND ($1 = '' OR job = $1)"
               " GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 10",
           job)) {
    errors.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<long long>()});
  }
  return errors;
}

}  // namespace

PurgeCounts PurgeOldRows(pqxx::connection_base& conn, const PurgeAges& ages,
                         const std::string& actor, const std::atomic<bool>* stop) {
  PurgeCounts counts;
  counts.done_items = PurgeInBatches(conn, kPurgeDoneItems, ages.done_items, stop) +
                      PurgeInBatches(conn, kPurgeDoneChunks, ages.done_items, stop);
  counts.events = PurgeInBatches(conn, kPurgeEvents, ages.events, stop);
  counts.runs = PurgeInBatches(conn, kPurgeRuns, ages.runs, stop);
  if (counts.done_items + counts.events + counts.runs > 0) {
    pqxx::nontransaction(conn).exec_params(InsertEventsSql("kind, actor, details") + " VALUES (" +
                                               SqlLiteral(EventKind::kQueuePurged) +
                                               ", $1, jsonb_build_object('done_items', $2::bigint,"
                                               " 'events', $3::bigint, 'runs', $4::bigint))",
                                           actor, counts.done_items, counts.events, counts.runs);
  }
  return counts;
}

QueueStatus ReadQueueStatus(pqxx::connection_base& conn, const std::string& job) {
  pqxx::read_transaction tx(conn);
  QueueStatus status;
  // Done items are queue rows (with an idempotency key) and done chunks'
  // items (0029); a job whose items are all done may have no queue row.
  auto jobs = tx.exec_params(
      "WITH q AS (SELECT job, count(*) FILTER (WHERE state = 'queued') AS queued,"
      "                  count(*) FILTER (WHERE state = 'deferred') AS deferred,"
      "                  count(*) FILTER (WHERE state = 'done') AS done,"
      "                  count(*) FILTER (WHERE state = 'dead') AS dead,"
      "                  count(*) FILTER (WHERE state = 'cancelled') AS cancelled,"
      "                  min(enqueued_at) FILTER (WHERE state IN ('queued', 'deferred'))"
      "                    AS oldest"
      "             FROM coexist.queue WHERE $1 = '' OR job = $1 GROUP BY job),"
      "     c AS (SELECT job, sum(cardinality(item_ids)) AS done FROM coexist.done_chunks"
      "            WHERE $1 = '' OR job = $1 GROUP BY job)"
      " SELECT job, coalesce(q.queued, 0), coalesce(q.deferred, 0),"
      "        coalesce(q.done, 0) + coalesce(c.done, 0), coalesce(q.dead, 0),"
      "        extract(epoch FROM now() - q.oldest)::float8, coalesce(q.cancelled, 0)"
      "   FROM q FULL JOIN c USING (job) ORDER BY job",
      job);
  for (const auto& row : jobs) {
    JobQueueStatus j;
    j.job = row[0].as<std::string>();
    j.by_state = {{"queued", row[1].as<long long>()},
                  {"deferred", row[2].as<long long>()},
                  {"done", row[3].as<long long>()},
                  {"dead", row[4].as<long long>()},
                  {"cancelled", row[6].as<long long>()}};
    if (!row[5].is_null()) j.oldest_queued_seconds = row[5].as<double>();
    for (const auto& reason :
         tx.exec_params("SELECT coalesce(defer_reason, '(none)'), count(*) FROM coexist.queue"
                        " WHERE job = $1 AND state = 'deferred' GROUP BY 1 ORDER BY 2 DESC",
                        j.job)) {
      j.defer_reasons[reason[0].as<std::string>()] = reason[1].as<long long>();
    }
    status.jobs.push_back(std::move(j));
  }
  status.top_dead_errors = TopErrors(tx, "state = 'dead'", job);
  status.top_retry_errors = TopErrors(
      tx, "state IN ('queued', 'deferred') AND attempts > 0 AND last_error IS NOT NULL", job);
  return status;
}

long long RetryDeadItems(pqxx::connection_base& conn, const std::string& job,
                         const std::string& actor) {
  pqxx::work tx(conn);
  auto result = tx.exec_params(
      "WITH retried AS ("
      "  UPDATE coexist.queue SET state = 'queued', attempts = 0, timeouts = 0,"
      "         not_before = '-infinity',"
      "         updated_at = now()"
      "   WHERE state = 'dead' AND ($1 = '' OR job = $1)"
      "  RETURNING job, coexist.item_keys(record_key, record_keys) AS keys, item_id),"
      // Later pending items sharing a key with those now follow a pending
      // one: the claim lets them wait for it (0015's follows_pending, 0019).
      " followers AS ("
      "  UPDATE coexist.queue f SET follows_pending = true FROM retried r"
      "   WHERE f.job = r.job AND f.item_id > r.item_id"
      "     AND (f.record_key = ANY (r.keys) OR f.record_keys && r.keys)"
      "     AND f.state IN ('queued', 'deferred') AND NOT f.follows_pending),"
      " counted AS (SELECT job, count(*) AS n FROM retried GROUP BY job),"
      " audit AS ("
      "  " +
          InsertEventsSql("kind, job, actor, details") + "  SELECT " +
          SqlLiteral(EventKind::kItemsRetried) +
          ", job, $2, jsonb_build_object('items', n) FROM counted)"
          " SELECT coalesce(sum(n), 0)::bigint FROM counted",
      job, actor);
  tx.commit();
  return result[0][0].as<long long>();
}

std::vector<long long> RequestJobStop(pqxx::connection_base& conn, const std::string& job,
                                      const std::string& actor) {
  pqxx::work tx(conn);
  std::vector<long long> runs;
  for (const auto& row : tx.exec_params("SELECT coexist.request_job_stop($1, $2)", job, actor)) {
    runs.push_back(row[0].as<long long>());
  }
  tx.commit();
  return runs;
}

std::vector<RunRow> ListRuns(pqxx::connection_base& conn, const std::string& job, int limit) {
  pqxx::read_transaction tx(conn);
  std::vector<RunRow> out;
  for (const auto& row : tx.exec_params(std::string("SELECT ") + kRunColumns +
                                            " FROM coexist.runs WHERE $1 = '' OR job = $1"
                                            " ORDER BY run_id DESC LIMIT $2",
                                        job, limit)) {
    out.push_back(RunOf(row));
  }
  return out;
}

std::optional<RunDetail> ShowRun(pqxx::connection_base& conn, long long run_id) {
  pqxx::read_transaction tx(conn);
  auto rows = tx.exec_params(
      std::string("SELECT ") + kRunColumns + ", details::text FROM coexist.runs WHERE run_id = $1",
      run_id);
  if (rows.empty()) return std::nullopt;
  RunDetail detail{RunOf(rows[0]), rows[0][14].as<std::string>(), {}};
  for (const auto& row : tx.exec_params("SELECT kind, count(*) FROM coexist.events WHERE run_id = "
                                        "$1 GROUP BY kind ORDER BY kind",
                                        run_id)) {
    detail.events_by_kind[row[0].as<std::string>()] = row[1].as<long long>();
  }
  return detail;
}

QueueTotals ReadQueueTotals(pqxx::transaction_base& tx) {
  QueueTotals totals;
  for (const auto& row : tx.exec("SELECT state::text, count(*) FROM coexist.queue GROUP BY 1")) {
    totals.by_state[row[0].as<std::string>()] = row[1].as<long long>();
  }
  for (const char* state : {"queued", "deferred", "done", "dead", "cancelled"}) {
    totals.by_state.try_emplace(state, 0);
  }
  totals.runs = tx.exec("SELECT count(*) FROM coexist.runs")[0][0].as<long long>();
  return totals;
}

std::optional<LiveRun> FindLiveRun(pqxx::transaction_base& tx, const std::string& job) {
  bool heartbeat =
      tx.exec1("SELECT to_regproc('coexist.live_run_heartbeat') IS NOT NULL")[0].as<bool>();
  auto rows = tx.exec_params(
      std::string("SELECT r.run_id, r.job FROM coexist.runs r WHERE r.outcome = 'running'") +
          (heartbeat ? " AND r.heartbeat_at > clock_timestamp() - coexist.live_run_heartbeat()"
                     : "") +
          " AND ($1 = '' OR r.job = $1) ORDER BY r.run_id LIMIT 1",
      job);
  if (rows.empty()) return std::nullopt;
  return LiveRun{rows[0][0].as<long long>(), rows[0][1].as<std::string>()};
}

void EmptyCoexistTables(pqxx::transaction_base& tx) {
  tx.exec(
      "TRUNCATE coexist.queue, coexist.done_chunks, coexist.runs, coexist.events, "
      "coexist.edit_locks, coexist.windows, coexist.takeovers, coexist.range_checkpoints "
      "RESTART IDENTITY");
}

JobCounts CountJobItems(pqxx::transaction_base& tx, const std::string& job) {
  auto row = tx.exec_params1(
      "SELECT count(*) FILTER (WHERE state = 'done')"
      "       + (SELECT coalesce(sum(cardinality(item_ids)), 0) FROM coexist.done_chunks"
      "           WHERE job = $1),"
      " count(*) FILTER (WHERE state = 'deferred'),"
      " count(*) FILTER (WHERE state = 'dead'), count(*) FILTER (WHERE state = 'queued'),"
      " count(*) FILTER (WHERE state = 'cancelled')"
      " FROM coexist.queue WHERE job = $1",
      job);
  return {row[0].as<long long>(), row[1].as<long long>(), row[2].as<long long>(),
          row[3].as<long long>(), row[4].as<long long>()};
}

long long LedgerMismatch(pqxx::transaction_base& tx, const std::string& job,
                         const std::string& ledger) {
  return tx
      .exec_params1(
          // Every record of an item of several records (0019) counts.
          "WITH done AS (SELECT k AS record_key, count(*) AS n FROM coexist.items,"
          "                     unnest(coexist.item_keys(record_key, record_keys)) AS k"
          "               WHERE job = $1 AND state = 'done' GROUP BY 1),"
          "     ledger AS (SELECT record_key::text AS record_key, count(*) AS n FROM " +
              ledger +
              " GROUP BY 1)"
              " SELECT coalesce(sum(abs(coalesce(l.n, 0) - coalesce(d.n, 0))), 0)"
              " FROM done d FULL JOIN ledger l USING (record_key)",
          job)[0]
      .as<long long>();
}

std::vector<DoneChunk> ReadDoneChunks(pqxx::transaction_base& tx, const std::string& job) {
  std::vector<DoneChunk> chunks;
  for (const auto& row :
       tx.exec_params("SELECT extract(epoch FROM c.done_at - r.started_at)::float8,"
                      "       cardinality(c.item_ids)::bigint"
                      "  FROM coexist.done_chunks c JOIN coexist.runs r USING (run_id)"
                      " WHERE c.job = $1"
                      " UNION ALL"
                      " SELECT extract(epoch FROM min(q.done_at) - r.started_at)::float8, count(*)"
                      "  FROM coexist.queue q JOIN coexist.runs r USING (run_id)"
                      " WHERE q.job = $1 AND q.state = 'done'"
                      " GROUP BY q.xmin::text, r.started_at ORDER BY 1",
                      job)) {
    chunks.push_back({row[0].as<double>(), row[1].as<long long>()});
  }
  return chunks;
}

void RecordRangeChunks(pqxx::transaction_base& tx) {
  tx.exec(
      "CREATE TABLE IF NOT EXISTS public.simulate_range_chunks ("
      "  job text NOT NULL, run_id bigint, at timestamptz NOT NULL, applied bigint NOT NULL);"
      "TRUNCATE public.simulate_range_chunks;"
      "CREATE OR REPLACE FUNCTION public.simulate_range_chunk() RETURNS trigger "
      "LANGUAGE plpgsql AS $$ BEGIN "
      "  INSERT INTO public.simulate_range_chunks "
      "  VALUES (NEW.job, NEW.run_id, clock_timestamp(), NEW.applied - OLD.applied); "
      "  RETURN NULL; END $$;"
      "CREATE OR REPLACE TRIGGER simulate_range_chunk AFTER UPDATE ON coexist.range_checkpoints "
      "FOR EACH ROW WHEN (NEW.applied > OLD.applied) "
      "EXECUTE FUNCTION public.simulate_range_chunk()");
}

std::vector<DoneChunk> ReadRangeChunks(pqxx::transaction_base& tx, const std::string& job) {
  std::vector<DoneChunk> chunks;
  for (const auto& row :
       tx.exec_params("SELECT extract(epoch FROM c.at - r.started_at)::float8, c.applied"
                      "  FROM public.simulate_range_chunks c JOIN coexist.runs r USING (run_id)"
                      " WHERE c.job = $1",
                      job)) {
    chunks.push_back({row[0].as<double>(), row[1].as<long long>()});
  }
  for (const auto& chunk : ReadDoneChunks(tx, job)) chunks.push_back(chunk);
  std::stable_sort(chunks.begin(), chunks.end(), [](const DoneChunk& a, const DoneChunk& b) {
    return a.at_seconds < b.at_seconds;
  });
  return chunks;
}

long long RangeLedgerMismatch(pqxx::transaction_base& tx, const std::string& job, bool finished) {
  return tx
      .exec_params1(
          "WITH ledger AS (SELECT record_key::text AS k, count(*) AS n"
          "                  FROM public.batch_ledger GROUP BY 1),"
          "     pending AS (SELECT DISTINCT k FROM coexist.items,"
          "                        unnest(coexist.item_keys(record_key, record_keys)) AS k"
          "                  WHERE job = $1 AND state IN ('queued', 'deferred', 'dead')),"
          "     expected AS (SELECT record_key::text AS k FROM public.batch_range_rows"
          "                   WHERE record_key::text NOT IN (SELECT k FROM pending))"
          " SELECT coalesce(sum(CASE WHEN l.n IS NULL THEN $2::bigint"
          "                          WHEN e.k IS NULL THEN l.n ELSE l.n - 1 END), 0)"
          "   FROM expected e FULL JOIN ledger l USING (k)",
          job, finished ? 1 : 0)[0]
      .as<long long>();
}

std::optional<PayloadFields> ReadPayloadFields(pqxx::transaction_base& tx, const std::string& job,
                                               const std::vector<std::string>& fields, int sample) {
  if (tx.exec1("SELECT to_regclass('coexist.queue') IS NULL")[0].as<bool>()) return std::nullopt;
  // One statement over one sample (materialized once): the total, each
  // field's count, the fields present, most common first.
  auto rows = tx.exec_params(
      "WITH s AS MATERIALIZED ("
      "  SELECT CASE jsonb_typeof(payload) WHEN 'object' THEN payload ELSE '{}'::jsonb END"
      "         AS payload"
      "    FROM coexist.queue WHERE job = $1 AND state IN ('queued', 'deferred') LIMIT $2)"
      " SELECT 0, NULL::text, count(*) FROM s"
      " UNION ALL SELECT 1, f, (SELECT count(*) FROM s WHERE payload ? f) FROM unnest($3::text[]) f"
      " UNION ALL (SELECT 2, k, count(*) FROM s, jsonb_object_keys(payload) k"
      "             GROUP BY k ORDER BY 3 DESC, 2 LIMIT 10)"
      " ORDER BY 1, 3 DESC, 2",
      job, sample, ArrayLiteral(fields));
  PayloadFields out;
  std::map<std::string, long long> having;
  for (const auto& row : rows) {
    int kind = row[0].as<int>();
    if (kind == 0) out.looked_at = row[2].as<long long>();
    if (kind == 1) having[row[1].as<std::string>()] = row[2].as<long long>();
    if (kind == 2) out.present.push_back(row[1].as<std::string>());
  }
  for (const auto& field : fields) out.having.push_back(having[field]);
  return out;
}

void AnalyzeQueue(pqxx::transaction_base& tx) { tx.exec0("ANALYZE coexist.queue"); }

void VacuumQueue(pqxx::transaction_base& tx) { tx.exec0("VACUUM ANALYZE coexist.queue"); }

}  // namespace coexist::db
