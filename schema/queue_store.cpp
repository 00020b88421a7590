#include "schema/queue_store.h"

#include <unistd.h>

#include <pqxx/pqxx>
#include <stdexcept>
#include <string>

#include "db/array_literal.h"
#include "db/sql_values.h"
#include "schema/events.h"

namespace coexist::db {
namespace {

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// Item::keys from the row's record_key and record_keys (NULL: one key).
std::vector<RecordKey> KeysOf(const pqxx::field& record_key, const pqxx::field& record_keys) {
  if (record_keys.is_null()) return {record_key.as<std::string>()};
  return ParseArrayLiteral(record_keys.as<std::string>());
}

// Rows of item_id, record_key, payload, attempts, deferrals, record_keys.
std::vector<Item> ItemsOf(const pqxx::result& result) {
  std::vector<Item> items;
  items.reserve(result.size());
  for (const auto& row : result) {
    items.push_back({row[0].as<long long>(), row[1].as<std::string>(), row[2].as<std::string>(),
                     row[3].as<int>(), row[4].as<int>(), KeysOf(row[1], row[5])});
  }
  return items;
}

// Items behind an earlier pending item sharing one of their keys wait for
// it (0007, 0015, 0019): the claim, the dry run and the daemon's wake-up
// test share this.
constexpr const char* kFirstOfKey = R"sql(
       (NOT q.follows_pending
        OR NOT coexist.follows_pending_item(q.job, q.item_id, q.record_key, q.record_keys)))sql";

}  // namespace

QueueStore::QueueStore(pqxx::connection_base& conn, QueueJob job) : job_(std::move(job)) {
  // The two claims differ only in leaving out items with a takeover.
  const std::string claim = std::string(R"sql(
    SELECT q.item_id, q.record_key, q.payload::text, q.attempts, q.deferrals, q.record_keys::text
      FROM coexist.queue q
     WHERE q.job = $1 AND q.state IN ('queued', 'deferred') AND q.not_before <= now()
       AND (q.state = 'queued' OR q.run_id IS DISTINCT FROM $2)
       AND q.item_id > $4 AND q.item_id <> ALL ($5::bigint[])
       AND )sql") + kFirstOfKey;
  const std::string claim_end = R"sql(
     ORDER BY q.item_id
     LIMIT $3
       FOR UPDATE SKIP LOCKED)sql";
  conn.prepare("claim_items", claim + claim_end);
  conn.prepare("claim_untaken_items", claim + R"sql(
       AND NOT EXISTS (SELECT 1 FROM coexist.takeovers t WHERE t.item_id = q.item_id))sql" +
                                          claim_end);
  conn.prepare("relock_items", R"sql(
    SELECT q.item_id, q.record_key, q.payload::text, q.attempts, q.deferrals, q.record_keys::text
      FROM coexist.queue q WHERE q.item_id = ANY ($1::bigint[]) AND q.state IN ('queued', 'deferred')
     ORDER BY q.item_id FOR UPDATE)sql");
  conn.prepare("find_claimable_items", R"sql(
    SELECT q.item_id FROM coexist.queue q
     WHERE q.item_id = ANY ($1::bigint[]) AND q.state IN ('queued', 'deferred')
       AND (q.state = 'queued' OR q.run_id IS DISTINCT FROM $2))sql");
  // A done item leaves the queue for its chunk's row in done_chunks (0029);
  // one with an idempotency key stays, marked done, so that its key is
  // still refused. Returns how many items it completed.
  conn.prepare("complete_items", R"sql(
    WITH kept AS (
      UPDATE coexist.queue
         SET state = 'done', attempts = attempts + 1, run_id = $2, done_at = clock_timestamp(),
             updated_at = now(), last_error = NULL, defer_reason = NULL
       WHERE item_id = ANY ($1::bigint[]) AND idempotency_key IS NOT NULL
      RETURNING 1),
    gone AS (
      DELETE FROM coexist.queue
       WHERE item_id = ANY ($1::bigint[]) AND idempotency_key IS NULL
      RETURNING job, item_id, record_key, record_keys, attempts, payload),
    chunk AS (
      INSERT INTO coexist.done_chunks (job, run_id, done_at, item_ids, record_keys, item_keys,
                                       attempts, payloads)
      SELECT min(job), $2, clock_timestamp(), array_agg(item_id), array_agg(record_key),
             array_agg(record_keys::text), array_agg(attempts + 1), array_agg(payload)
        FROM gone HAVING count(*) > 0
      RETURNING cardinality(item_ids) AS items)
    SELECT (SELECT count(*) FROM kept) + coalesce((SELECT sum(items) FROM chunk), 0))sql");
  conn.prepare(
      "fail_items", R"sql(
    WITH f AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS f(item_id, error)),
    u AS (
      UPDATE coexist.queue q
         SET attempts = q.attempts + 1, last_error = f.error, run_id = $3, updated_at = now(),
             state = CASE WHEN q.attempts + 1 >= $4 THEN 'dead' ELSE 'queued' END::coexist.item_state
        FROM f WHERE q.item_id = f.item_id
      RETURNING q.item_id, q.record_key, q.state, q.attempts, f.error, q.record_keys),
    e AS (
      )sql" + InsertEventsSql("kind, job, run_id, item_id, target, record_key, actor, details") +
                        R"sql(
      SELECT )sql" + SqlLiteral(EventKind::kItemDead) +
                        R"sql(, $5, $3, item_id, $6::regclass, record_key, 'batch run ' || $3,
             jsonb_build_object('attempts', attempts, 'error', error)
             || coexist.keys_detail(record_keys)
        FROM u WHERE state = 'dead'
      RETURNING 1)
    SELECT count(*) FROM u WHERE state = 'dead')sql");
  // A timeout adds to the item's timeouts; at $8 (max_timeouts) the item
  // is dead instead of deferred again (0018).
  conn.prepare(
      "defer_items", R"sql(
    WITH d AS (SELECT *, reason = 'timeout' AS timed_out
                 FROM unnest($1::bigint[], $2::text[], $3::boolean[]) AS d(item_id, reason, escalated)),
    u AS (
      UPDATE coexist.queue q
         SET state = CASE WHEN d.timed_out AND q.timeouts + 1 >= $8::integer THEN 'dead'
                          ELSE 'deferred' END::coexist.item_state,
             timeouts = q.timeouts + d.timed_out::integer,
             last_error = CASE WHEN d.timed_out AND q.timeouts + 1 >= $8::integer
                               THEN 'timed out ' || q.timeouts + 1 || ' times (batch.max_timeouts '
                                    || $8::integer || '): the operation hit database.statement_timeout or '
                                    || 'a lock timeout every time'
                               ELSE q.last_error END,
             deferrals = q.deferrals + 1, defer_reason = d.reason,
             not_before = now() + $6::interval, run_id = $4, updated_at = now()
        FROM d WHERE q.item_id = d.item_id
      RETURNING q.item_id, q.record_key, q.deferrals, q.timeouts, q.state, q.last_error, d.reason,
                d.escalated, q.record_keys),
    e AS (
      )sql" + InsertEventsSql("kind, job, run_id, item_id, target, record_key, actor, details") +
                         R"sql(
      SELECT k.kind, $5, $4, u.item_id, $7::regclass, u.record_key, 'batch run ' || $4,
             jsonb_build_object('reason', u.reason, 'deferrals', u.deferrals)
             || coexist.keys_detail(u.record_keys)
        FROM u CROSS JOIN LATERAL (VALUES ()sql" +
                         SqlLiteral(EventKind::kItemDeferred) +
                         R"sql(), (CASE WHEN u.escalated THEN )sql" +
                         SqlLiteral(EventKind::kItemEscalated) + R"sql( END)) AS k(kind)
       WHERE k.kind IS NOT NULL AND u.state = 'deferred'
      UNION ALL
      SELECT )sql" + SqlLiteral(EventKind::kItemDead) +
                         R"sql(, $5, $4, u.item_id, $7::regclass, u.record_key, 'batch run ' || $4,
             jsonb_build_object('timeouts', u.timeouts, 'error', u.last_error)
             || coexist.keys_detail(u.record_keys)
        FROM u WHERE u.state = 'dead'
      RETURNING 1)
    SELECT item_id FROM u WHERE state = 'dead' ORDER BY item_id)sql");
  // Takeovers no running run holds any more: the run ended, failed, was
  // killed (and marked abandoned) or its row is gone.
  conn.prepare("delete_orphaned_takeovers", R"sql(
    DELETE FROM coexist.takeovers t
     WHERE t.target = $1::regclass
       AND NOT EXISTS (SELECT 1 FROM coexist.runs r
                        WHERE r.run_id = t.run_id AND r.outcome = 'running')
    RETURNING t.record_key)sql");
  conn.prepare("hold_run", "SELECT coexist.hold_run($1)");
  conn.prepare("insert_run", R"sql(
    INSERT INTO coexist.runs (job, policy, host, pid, details, backend_pid)
    VALUES ($1, $2, $3, $4, $5::jsonb, pg_backend_pid())
    RETURNING run_id)sql");
  conn.prepare("try_lock_run",
               "SELECT pg_try_advisory_lock(coexist.run_lock_class(), ($1 % 2147483647)::integer)");
  conn.prepare("find_run_lock_holder", R"sql(
    SELECT l.pid, coalesce(a.usename::text, '?'), coalesce(a.application_name, '?'),
           coalesce(host(a.client_addr), 'local'), coalesce(a.state, '?'),
           extract(epoch FROM now() - a.backend_start)::bigint
      FROM pg_locks l
      LEFT JOIN pg_stat_activity a ON a.pid = l.pid
     WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.pid <> pg_backend_pid()
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND l.classid = coexist.run_lock_class()::oid AND l.objid = ($1 % 2147483647)::oid
     LIMIT 1)sql");
  conn.prepare("try_lock_job", job_.shared_runs ? "SELECT coexist.try_lock_job_shared($1)"
                                                : "SELECT coexist.try_lock_job($1)");
  // The session holding the job's lock (0004), and the run it is, if any
  // (runs.backend_pid, 0012). Another role's session shows NULLs in
  // pg_stat_activity's columns where this role may not read them.
  conn.prepare("find_job_holder", R"sql(
    SELECT l.pid, coalesce(a.usename::text, '?'), coalesce(a.application_name, '?'),
           coalesce(host(a.client_addr), 'local'), coalesce(a.state, '?'),
           extract(epoch FROM now() - a.backend_start)::bigint,
           r.run_id, r.host, r.pid, date_trunc('second', r.started_at)::text,
           extract(epoch FROM now() - r.heartbeat_at)::bigint
      FROM pg_locks l
      LEFT JOIN pg_stat_activity a ON a.pid = l.pid
      LEFT JOIN coexist.runs r ON r.job = $1 AND r.outcome = 'running' AND r.backend_pid = l.pid
     WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND l.classid = coexist.job_lock_class()::oid AND l.objid = hashtext($1)::oid
     LIMIT 1)sql");
  conn.prepare("abandon_runs", "SELECT r FROM coexist.abandon_stale_runs($1) AS r");
  // The job's pause (0032) comes back with the row: one statement a second.
  conn.prepare("heartbeat_run", R"sql(
    UPDATE coexist.runs r
       SET heartbeat_at = now(), claimed = $2, done = $3, deferred = $4, dead = $5,
           details = (CASE WHEN $7::float8 IS NULL THEN r.details - 'online_latency_ratio'
                           ELSE r.details || jsonb_build_object('online_latency_ratio', $7::float8)
                      END - 'pacing')
                     || CASE WHEN $8 = '' THEN '{}'::jsonb
                             ELSE jsonb_build_object('pacing', $8::jsonb) END
      FROM (SELECT 1) one LEFT JOIN coexist.job_pauses p ON p.job = $6
     WHERE r.run_id = $1
    RETURNING r.stop_requested_at IS NOT NULL, coalesce(r.stop_requested_by, 'unknown'),
              )sql" + std::string(kJobPauseColumns));
  conn.prepare("lock_job_finish", "SELECT coexist.lock_job_finish($1)");
  conn.prepare("finish_run", R"sql(
    UPDATE coexist.runs
       SET heartbeat_at = now(), ended_at = now(), outcome = $2, claimed = $3, done = $4,
           deferred = $5, dead = $6, details = (details - 'pacing') || $7::jsonb
     WHERE run_id = $1)sql");
  // A running run's span lasts until now; an abandoned one's ended at its
  // last heartbeat (ended_at is when another run noticed).
  conn.prepare("runs_together", R"sql(
    WITH me AS (SELECT job, started_at, ended_at FROM coexist.runs WHERE run_id = $1),
    spans AS (
      SELECT r.outcome, r.done, r.deferred, r.dead, r.started_at,
             CASE r.outcome WHEN 'running' THEN now() WHEN 'abandoned' THEN r.heartbeat_at
                            ELSE r.ended_at END AS span_end
        FROM coexist.runs r JOIN me ON r.job = me.job AND r.started_at <= me.ended_at)
    SELECT count(*), count(*) FILTER (WHERE s.outcome = 'running'),
           count(*) FILTER (WHERE s.outcome IN ('failed', 'abandoned')),
           coalesce(sum(s.done), 0), coalesce(sum(s.deferred), 0), coalesce(sum(s.dead), 0),
           coalesce(extract(epoch FROM max(s.span_end) - min(s.started_at)), 0)::float8,
           extract(epoch FROM clock_timestamp())::float8
      FROM spans s JOIN me ON s.span_end >= me.started_at)sql");
  conn.prepare("insert_event", R"sql(
    )sql" + InsertEventsSql("kind, job, run_id, actor, details") +
                                   R"sql(
    VALUES ($1, $2, $3::bigint, 'batch run ' || $3::bigint, $4::jsonb))sql");
  conn.prepare("count_queued",
               "SELECT count(*) FROM coexist.queue WHERE job = $1 AND state = 'queued'");
}

long long QueueStore::StartRun(pqxx::transaction_base& tx, const std::string& policy,
                               const std::string& details_json) {
  return tx
      .exec_prepared1("insert_run", job_.job, policy, Hostname(), static_cast<int>(getpid()),
                      details_json)[0]
      .as<long long>();
}

bool QueueStore::TryLockRun(pqxx::transaction_base& tx, long long run_id) {
  return tx.exec_prepared1("try_lock_run", run_id)[0].as<bool>();
}

std::optional<JobHolder> QueueStore::FindRunLockHolder(pqxx::transaction_base& tx,
                                                       long long run_id) {
  auto rows = tx.exec_prepared("find_run_lock_holder", run_id);
  if (rows.empty()) return std::nullopt;
  const auto& row = rows[0];
  JobHolder holder;
  holder.pid = row[0].as<int>();
  long long connected = row[5].is_null() ? 0 : row[5].as<long long>();
  holder.description = "a session that is not a coexist run (pid " + std::to_string(holder.pid) +
                       ", role " + row[1].as<std::string>() + ", application_name '" +
                       row[2].as<std::string>() + "', client " + row[3].as<std::string>() + ", " +
                       row[4].as<std::string>() + ", connected " + std::to_string(connected) +
                       " s ago)";
  holder.stuck =
      connected > std::chrono::duration_cast<std::chrono::seconds>(job_.busy_timeout).count();
  return holder;
}

bool QueueStore::TryLockJob(pqxx::transaction_base& tx) {
  return tx.exec_prepared1("try_lock_job", job_.job)[0].as<bool>();
}

std::optional<JobHolder> QueueStore::FindJobHolder(pqxx::transaction_base& tx) {
  auto rows = tx.exec_prepared("find_job_holder", job_.job);
  if (rows.empty()) return std::nullopt;
  const auto& row = rows[0];
  JobHolder holder;
  holder.pid = row[0].as<int>();
  std::string who = "pid " + std::to_string(holder.pid) + ", role " + row[1].as<std::string>() +
                    ", application_name '" + row[2].as<std::string>() + "', client " +
                    row[3].as<std::string>() + ", " + row[4].as<std::string>();
  auto timeout_s = std::chrono::duration_cast<std::chrono::seconds>(job_.busy_timeout);
  if (!row[6].is_null()) {
    holder.run_id = row[6].as<long long>();
    long long silent = row[10].is_null() ? 0 : row[10].as<long long>();
    holder.description = "run " + std::to_string(holder.run_id) + " on host " +
                         row[7].as<std::string>() + " (pid " + row[8].as<std::string>() +
                         "), started " + row[9].as<std::string>() + ", last heartbeat " +
                         std::to_string(silent) + " s ago; its session: " + who;
    holder.stuck = silent > timeout_s.count();
  } else {
    long long connected = row[5].is_null() ? 0 : row[5].as<long long>();
    holder.description = "a session that is not a coexist run (" + who + ", connected " +
                         std::to_string(connected) + " s ago)";
    holder.stuck = connected > timeout_s.count();
  }
  return holder;
}

bool QueueStore::HoldRun(pqxx::transaction_base& tx, long long run_id) {
  return tx.exec_prepared1("hold_run", run_id)[0].as<bool>();
}

std::vector<long long> QueueStore::AbandonStaleRuns(pqxx::transaction_base& tx) {
  return BigintColumn(tx.exec_prepared("abandon_runs", job_.job));
}

QueueStore::Heartbeat QueueStore::HeartbeatRun(pqxx::transaction_base& tx, long long run_id,
                                               long long claimed, long long done,
                                               long long deferred, long long dead,
                                               std::optional<double> online_latency_ratio,
                                               const std::string& pacing_json) {
  auto result = tx.exec_prepared("heartbeat_run", run_id, claimed, done, deferred, dead, job_.job,
                                 online_latency_ratio, pacing_json);
  Heartbeat beat;
  if (result.empty()) return beat;
  const auto& r = result[0];
  if (r[0].as<bool>()) beat.stop_by = r[1].as<std::string>();
  beat.pause = PauseFrom(r, 2);
  return beat;
}

void QueueStore::FinishRun(pqxx::transaction_base& tx, long long run_id, const std::string& outcome,
                           long long claimed, long long done, long long deferred, long long dead,
                           const std::string& details_json) {
  // The job's runs end one at a time (0024): the runs together read after
  // this see the final counts of every run that ended before.
  tx.exec_prepared("lock_job_finish", job_.job);
  tx.exec_prepared("finish_run", run_id, outcome, claimed, done, deferred, dead, details_json);
}

RunsTogether QueueStore::ReadRunsTogether(pqxx::transaction_base& tx, long long run_id) {
  auto row = tx.exec_prepared1("runs_together", run_id);
  return {.runs = row[0].as<long long>(),
          .running = row[1].as<long long>(),
          .failed = row[2].as<long long>(),
          .done = row[3].as<long long>(),
          .deferred = row[4].as<long long>(),
          .dead = row[5].as<long long>(),
          .seconds = row[6].as<double>(),
          .read_at = std::chrono::system_clock::time_point(
              std::chrono::duration_cast<std::chrono::system_clock::duration>(
                  std::chrono::duration<double>(row[7].as<double>())))};
}

void QueueStore::AddEvent(pqxx::transaction_base& tx, EventKind kind, long long run_id,
                          const std::string& details_json) {
  tx.exec_prepared("insert_event", std::string(ToString(kind)), job_.job, run_id, details_json);
}

long long QueueStore::CountQueued(pqxx::transaction_base& tx) {
  return tx.exec_prepared1("count_queued", job_.job)[0].as<long long>();
}

std::vector<Item> QueueStore::ClaimItems(pqxx::transaction_base& tx, long long run_id, int limit,
                                         long long after, const std::vector<long long>& exclude,
                                         bool untaken_only) {
  return ItemsOf(tx.exec_prepared(untaken_only ? "claim_untaken_items" : "claim_items", job_.job,
                                  run_id, limit, after, ArrayLiteral(exclude)));
}

std::vector<Item> QueueStore::RelockItems(pqxx::transaction_base& tx,
                                          const std::vector<long long>& ids) {
  return ItemsOf(tx.exec_prepared("relock_items", ArrayLiteral(ids)));
}

std::vector<long long> QueueStore::StillClaimable(pqxx::transaction_base& tx, long long run_id,
                                                  const std::vector<long long>& ids) {
  return BigintColumn(tx.exec_prepared("find_claimable_items", ArrayLiteral(ids), run_id));
}

void QueueStore::CompleteItems(pqxx::transaction_base& tx, long long run_id,
                               const std::vector<long long>& ids) {
  if (ids.empty()) return;
  auto completed =
      tx.exec_prepared1("complete_items", ArrayLiteral(ids), run_id)[0].as<long long>();
  // The claim holds every item's row lock until this commits, so nothing
  // else can have completed or removed one: a shortfall is a bug, and the
  // chunk must not commit.
  if (completed != static_cast<long long>(ids.size())) {
    throw std::logic_error("completed " + std::to_string(completed) + " of " +
                           std::to_string(ids.size()) + " claimed items");
  }
}

std::vector<long long> QueueStore::DoneByRun(pqxx::transaction_base& tx, long long run_id,
                                             const std::vector<long long>& ids) {
  if (ids.empty()) return {};
  return BigintColumn(tx.exec_params(R"sql(
    SELECT q.item_id FROM coexist.queue q
     WHERE q.item_id = ANY ($1::bigint[]) AND q.state = 'done' AND q.run_id = $2
    UNION
    SELECT i.item_id FROM coexist.done_chunks c, unnest(c.item_ids) AS i (item_id)
     WHERE c.job = $3 AND c.run_id = $2 AND i.item_id = ANY ($1::bigint[])
     ORDER BY 1)sql",
                                     ArrayLiteral(ids), run_id, job_.job));
}

void QueueStore::DeleteItems(pqxx::transaction_base& tx, const std::vector<long long>& ids) {
  if (!ids.empty()) {
    tx.exec_params0("DELETE FROM coexist.queue WHERE item_id = ANY ($1::bigint[])",
                    ArrayLiteral(ids));
  }
}

long long QueueStore::FailItems(pqxx::transaction_base& tx, long long run_id,
                                const std::vector<Failure>& failures, bool dead_now) {
  if (failures.empty()) return 0;
  std::vector<long long> ids;
  std::vector<std::optional<std::string>> errors;
  for (const auto& f : failures) {
    ids.push_back(f.item_id);
    errors.emplace_back(f.error);
  }
  return tx
      .exec_prepared1("fail_items", ArrayLiteral(ids), ArrayLiteral(errors), run_id,
                      dead_now ? 1 : job_.max_attempts, job_.job, job_.target)[0]
      .as<long long>();
}

std::vector<long long> QueueStore::DeferItems(pqxx::transaction_base& tx, long long run_id,
                                              const std::vector<Deferral>& deferrals) {
  if (deferrals.empty()) return {};
  std::vector<long long> ids;
  std::vector<std::optional<std::string>> reasons;
  std::vector<std::optional<std::string>> escalated;
  for (const auto& d : deferrals) {
    ids.push_back(d.item_id);
    reasons.emplace_back(d.reason);
    escalated.emplace_back(d.escalated ? "t" : "f");
  }
  return BigintColumn(tx.exec_prepared(
      "defer_items", ArrayLiteral(ids), ArrayLiteral(reasons), ArrayLiteral(escalated), run_id,
      job_.job, SettingMilliseconds(job_.defer_delay), job_.target, job_.max_timeouts));
}

std::vector<std::string> QueueStore::DeleteOrphanedTakeovers(pqxx::transaction_base& tx) {
  return TextColumn(tx.exec_prepared("delete_orphaned_takeovers", job_.target));
}

bool QueueInstalled(pqxx::transaction_base& tx) {
  return tx.exec1("SELECT to_regclass('coexist.queue') IS NOT NULL")[0].as<bool>();
}

bool JobLockHeld(pqxx::transaction_base& tx, const std::string& job, bool exclusive_only) {
  if (!tx.exec1("SELECT to_regprocedure('coexist.job_lock_class()') IS NOT NULL")[0].as<bool>()) {
    return false;
  }
  return tx
      .exec_params1(R"sql(
    SELECT EXISTS (
      SELECT 1 FROM pg_locks
       WHERE locktype = 'advisory' AND granted AND objsubid = 2
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND classid = coexist.job_lock_class()::oid AND objid = hashtext($1)::oid
         AND (NOT $2 OR mode = 'ExclusiveLock')))sql",
                    job, exclusive_only)[0]
      .as<bool>();
}

std::vector<Item> ClaimableItems(pqxx::transaction_base& tx, const std::string& job,
                                 long long after, int limit) {
  std::vector<Item> items;
  for (const auto& row : tx.exec_params(std::string(R"sql(
    SELECT item_id, record_key, attempts, deferrals, record_keys::text FROM coexist.queue q
     WHERE job = $1 AND state IN ('queued', 'deferred') AND not_before <= now() AND item_id > $2
       AND )sql") + kFirstOfKey + R"sql(
     ORDER BY item_id
     LIMIT $3)sql",
                                        job, after, limit)) {
    items.push_back({row[0].as<long long>(), row[1].as<std::string>(), "", row[2].as<int>(),
                     row[3].as<int>(), KeysOf(row[1], row[4])});
  }
  return items;
}

ClaimableCounts CountClaimable(pqxx::transaction_base& tx, const std::string& job) {
  // Items behind an earlier pending item of their key are not claimable:
  // counting them would start a run that claims nothing.
  auto row = tx.exec_params1(std::string(R"sql(
    SELECT count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'deferred')
      FROM coexist.queue q
     WHERE job = $1 AND state IN ('queued', 'deferred') AND not_before <= now()
       AND )sql") + kFirstOfKey,
                             job);
  return {row[0].as<long long>(), row[1].as<long long>()};
}

namespace {

// An item of one key behind an earlier item of the same lead key in the
// same INSERT is marked follows_pending by the INSERT itself (over rows
// ks, ord), so mark_followers (0027) need not rewrite it right after; every
// other item is judged by mark_followers as before. Marking an item that
// follows nothing would only cost the claim a check, never an ordering.
constexpr const char* kFollowsInStatement =
    "(cardinality(ks) = 1 AND row_number() OVER (PARTITION BY ks[1] ORDER BY ord) > 1)";

}  // namespace

std::string SortedKeysSql(const std::string& keys_expr, const std::string& key_type) {
  return "ARRAY(SELECT DISTINCT x FROM unnest((" + keys_expr + ")::text[]::" + key_type +
         "[]) AS x ORDER BY x)::text[]";
}

namespace {

// The end of both enqueue statements: counts over `added` (RETURNING ks).
std::string CountAdded(const std::string& missing_sql) {
  std::string missing = missing_sql.empty() ? "false" : "(" + missing_sql + ")";
  return "SELECT count(*), count(*) FILTER (WHERE " + missing +
         "), (array_agg(array_to_string(ks, ',') ORDER BY ord) FILTER (WHERE " + missing +
         "))[1:5] FROM added";
}

Inserted InsertedOf(const pqxx::row& row) {
  Inserted inserted;
  inserted.rows = row[0].as<long long>();
  inserted.added = row[1].as<long long>();
  inserted.missing = row[2].as<long long>();
  if (!row[3].is_null()) inserted.missing_keys = ParseArrayLiteral(row[3].as<std::string>());
  return inserted;
}

}  // namespace

Inserted InsertItems(pqxx::transaction_base& tx, const std::string& job,
                     const std::string& key_type, const std::vector<std::vector<RecordKey>>& keys,
                     const std::vector<std::optional<std::string>>& payloads,
                     const std::vector<std::optional<std::string>>& idempotency_keys,
                     const std::string& missing_sql) {
  // One-key items take the short way (one cast); several keys arrive as one
  // array literal per item and are sorted in the key type's order.
  std::vector<std::optional<std::string>> single;
  std::vector<std::optional<std::string>> several;
  for (const auto& item_keys : keys) {
    if (item_keys.size() == 1) {
      single.emplace_back(item_keys[0]);
      several.emplace_back();
    } else {
      single.emplace_back();
      several.emplace_back(ArrayLiteral(item_keys));
    }
  }
  // Through the key's type and back: one spelling per key ('42' for 042,
  // a uuid in lower case), so items of one record are seen as one key.
  auto row =
      tx.exec_params1(R"sql(
    WITH input AS (SELECT * FROM unnest($2::text[], $3::jsonb[], $4::text[], $5::text[])
                                   WITH ORDINALITY AS i(k, p, ik, ka, ord)),
    keyed AS (
      SELECT CASE WHEN ka IS NULL THEN ARRAY[k::)sql" +
                          key_type + R"sql(::text] ELSE )sql" + SortedKeysSql("ka", key_type) +
                          R"sql( END AS ks, p, ik, ord
        FROM input),
    added AS (
      INSERT INTO coexist.queue (job, record_key, record_keys, payload, idempotency_key,
                                 follows_pending)
      SELECT $1, ks[1], CASE WHEN cardinality(ks) > 1 THEN ks END, coalesce(p, '{}'), ik, )sql" +
                          kFollowsInStatement + R"sql(
        FROM keyed ORDER BY ord
      ON CONFLICT (job, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
      RETURNING coalesce(record_keys, ARRAY[record_key]) AS ks, item_id AS ord),
    counts AS ()sql" + CountAdded(missing_sql) +
                          R"sql()
    SELECT (SELECT count(*) FROM input), * FROM counts)sql",
                      job, ArrayLiteral(single), ArrayLiteral(payloads),
                      ArrayLiteral(idempotency_keys), ArrayLiteral(several));
  return InsertedOf(row);
}

bool HasPendingItems(pqxx::transaction_base& tx, const std::string& job) {
  return tx
      .exec_params1(
          "SELECT EXISTS (SELECT 1 FROM coexist.queue WHERE job = $1 AND state IN "
          "('queued', 'deferred'))",
          job)[0]
      .as<bool>();
}

std::vector<RecordKey> PendingKeys(pqxx::transaction_base& tx, const std::string& job,
                                   const std::vector<RecordKey>& keys) {
  if (keys.empty()) return {};
  // queue_pending_key answers it, one probe per key.
  return TextColumn(tx.exec_params(
      "SELECT DISTINCT record_key FROM coexist.queue WHERE job = $1 AND record_key = "
      "ANY ($2::text[]) AND state IN ('queued', 'deferred')",
      job, ArrayLiteral(keys)));
}

Inserted InsertSelected(pqxx::transaction_base& tx, const std::string& job,
                        const std::string& source, const std::string& missing_sql) {
  auto row = tx.exec_params1(
      "WITH src AS (" + source +
          "), numbered AS (SELECT ks, p, ik, row_number() OVER () AS ord FROM src),"
          " added AS (INSERT INTO coexist.queue (job, record_key, record_keys, payload, "
          "idempotency_key, follows_pending) SELECT $1, ks[1], CASE WHEN cardinality(ks) > 1 "
          "THEN ks END, p, ik, " +
          std::string(kFollowsInStatement) +
          " FROM numbered ORDER BY ord ON CONFLICT (job, idempotency_key) "
          "WHERE idempotency_key IS NOT NULL DO NOTHING "
          "RETURNING coalesce(record_keys, ARRAY[record_key]) AS ks, item_id AS ord), "
          "counts AS (" +
          CountAdded(missing_sql) + ") SELECT (SELECT count(*) FROM src), * FROM counts",
      job);
  return InsertedOf(row);
}

}  // namespace coexist::db
