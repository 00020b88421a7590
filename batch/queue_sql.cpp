#include "batch/queue_sql.h"

#include <unistd.h>

#include "db/sqlstate.h"

namespace coexist::batch {
namespace {

std::vector<long long> Keys(const pqxx::result& result) {
  std::vector<long long> out;
  out.reserve(result.size());
  for (const auto& row : result) out.push_back(row[0].as<long long>());
  return out;
}

std::string Ms(std::chrono::milliseconds value) { return std::to_string(value.count()) + "ms"; }

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

}  // namespace

Savepoint::Savepoint(pqxx::transaction_base& tx, const char* name) : tx_(tx), name_(name) {
  tx_.exec("SAVEPOINT " + name_);
}

Savepoint::~Savepoint() {
  if (done_) return;
  try {
    tx_.exec("ROLLBACK TO SAVEPOINT " + name_);
  } catch (const std::exception&) {
    // The connection is gone; the next statement reports it.
  }
}

void Savepoint::Release() {
  tx_.exec("RELEASE SAVEPOINT " + name_);
  done_ = true;
}

std::string ArrayLiteral(const std::vector<long long>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  return out + "}";
}

std::string ArrayLiteral(const std::vector<std::optional<std::string>>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    if (!values[i]) {
      out += "NULL";
      continue;
    }
    out += '"';
    for (char c : *values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

QueueSql::QueueSql(pqxx::connection_base& conn, const config::Config& config)
    : conn_(conn), config_(config), has_owner_(config.target.owner_column.has_value()) {
  const auto& t = config.target;
  std::string table = conn.quote_name(t.schema) + "." + conn.quote_name(t.table);
  std::string key = conn.quote_name(t.key_column);
  target_ = table;

  conn.prepare("claim_items", R"sql(
    SELECT q.item_id, q.record_key, q.payload::text, q.attempts, q.deferrals
      FROM coexist.queue q
     WHERE q.job = $1 AND q.state IN ('queued', 'deferred') AND q.not_before <= now()
       AND (q.state = 'queued' OR q.run_id IS DISTINCT FROM $2)
       AND q.item_id > $4 AND q.item_id <> ALL ($5::bigint[])
       AND (NOT q.follows_pending  -- an earlier item of the key goes first (0007, 0015)
            OR NOT EXISTS (SELECT 1 FROM coexist.queue e
                            WHERE e.job = q.job AND e.record_key = q.record_key
                              AND e.item_id < q.item_id AND e.state IN ('queued', 'deferred')))
     ORDER BY q.item_id
     LIMIT $3
       FOR UPDATE SKIP LOCKED)sql");
  conn.prepare("claim_untaken_items", R"sql(
    SELECT q.item_id, q.record_key, q.payload::text, q.attempts, q.deferrals
      FROM coexist.queue q
     WHERE q.job = $1 AND q.state IN ('queued', 'deferred') AND q.not_before <= now()
       AND (q.state = 'queued' OR q.run_id IS DISTINCT FROM $2)
       AND q.item_id > $4 AND q.item_id <> ALL ($5::bigint[])
       AND (NOT q.follows_pending  -- an earlier item of the key goes first (0007, 0015)
            OR NOT EXISTS (SELECT 1 FROM coexist.queue e
                            WHERE e.job = q.job AND e.record_key = q.record_key
                              AND e.item_id < q.item_id AND e.state IN ('queued', 'deferred')))
       AND NOT EXISTS (SELECT 1 FROM coexist.takeovers t WHERE t.item_id = q.item_id)
     ORDER BY q.item_id
     LIMIT $3
       FOR UPDATE SKIP LOCKED)sql");
  conn.prepare("relock_items", R"sql(
    SELECT q.item_id, q.record_key, q.payload::text, q.attempts, q.deferrals
      FROM coexist.queue q WHERE q.item_id = ANY ($1::bigint[]) AND q.state IN ('queued', 'deferred')
     ORDER BY q.item_id FOR UPDATE)sql");
  conn.prepare("find_claimable_items", R"sql(
    SELECT q.item_id FROM coexist.queue q
     WHERE q.item_id = ANY ($1::bigint[]) AND q.state IN ('queued', 'deferred')
       AND (q.state = 'queued' OR q.run_id IS DISTINCT FROM $2))sql");
  conn.prepare("complete_items", R"sql(
    UPDATE coexist.queue
       SET state = 'done', attempts = attempts + 1, run_id = $2, done_at = clock_timestamp(),
           updated_at = now(), last_error = NULL, defer_reason = NULL
     WHERE item_id = ANY ($1::bigint[]))sql");
  conn.prepare("fail_items", R"sql(
    WITH f AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS f(item_id, error)),
    u AS (
      UPDATE coexist.queue q
         SET attempts = q.attempts + 1, last_error = f.error, run_id = $3, updated_at = now(),
             state = CASE WHEN q.attempts + 1 >= $4 THEN 'dead' ELSE 'queued' END::coexist.item_state
        FROM f WHERE q.item_id = f.item_id
      RETURNING q.item_id, q.record_key, q.state, q.attempts, f.error),
    e AS (
      INSERT INTO coexist.events (kind, job, run_id, item_id, target, record_key, actor, details)
      SELECT 'item_dead', $5, $3, item_id, $6::regclass, record_key, 'batch run ' || $3,
             jsonb_build_object('attempts', attempts, 'error', error)
        FROM u WHERE state = 'dead'
      RETURNING 1)
    SELECT count(*) FROM u WHERE state = 'dead')sql");
  conn.prepare("defer_items", R"sql(
    WITH d AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::boolean[])
                              AS d(item_id, reason, escalated)),
    u AS (
      UPDATE coexist.queue q
         SET state = 'deferred', deferrals = q.deferrals + 1, defer_reason = d.reason,
             not_before = now() + $6::interval, run_id = $4, updated_at = now()
        FROM d WHERE q.item_id = d.item_id
      RETURNING q.item_id, q.record_key, q.deferrals, d.reason, d.escalated)
    INSERT INTO coexist.events (kind, job, run_id, item_id, target, record_key, actor, details)
    SELECT k.kind, $5, $4, u.item_id, $7::regclass, u.record_key, 'batch run ' || $4,
           jsonb_build_object('reason', u.reason, 'deferrals', u.deferrals)
      FROM u CROSS JOIN LATERAL (VALUES ('item_deferred'), (CASE WHEN u.escalated
                                 THEN 'item_escalated' END)) AS k(kind)
     WHERE k.kind IS NOT NULL)sql");

  conn.prepare("lock_records", "SELECT " + key + " FROM " + table + " WHERE " + key +
                                   " = ANY ($1::bigint[]) FOR UPDATE SKIP LOCKED");
  conn.prepare("lock_record", "SELECT 1 FROM " + table + " WHERE " + key + " = $1 FOR UPDATE");
  conn.prepare("find_records",
               "SELECT " + key + " FROM " + table + " WHERE " + key + " = ANY ($1::bigint[])");
  if (has_owner_) {
    std::string owner = conn.quote_name(*t.owner_column);
    conn.prepare("find_batch_owned_records", "SELECT " + key + " FROM " + table + " WHERE " + key +
                                                 " = ANY ($1::bigint[]) AND " + owner +
                                                 " = 'batch'");
    conn.prepare("take_over_records", "UPDATE " + table + " SET " + owner + " = 'batch' WHERE " +
                                          key + " = ANY ($1::bigint[])");
    conn.prepare("hand_back_records", "UPDATE " + table + " SET " + owner + " = 'online' WHERE " +
                                          key + " = ANY ($1::bigint[])");
  }
  conn.prepare("insert_takeovers", R"sql(
    INSERT INTO coexist.takeovers (run_id, item_id, target, record_key)
    SELECT $1, i, $4::regclass, k FROM unnest($2::bigint[], $3::bigint[]) AS u(i, k))sql");
  conn.prepare("delete_takeovers",
               "DELETE FROM coexist.takeovers WHERE item_id = ANY ($1::bigint[])");
  // Takeovers no running run holds any more: the run ended, failed, was
  // killed (and marked abandoned) or its row is gone.
  conn.prepare("delete_orphaned_takeovers", R"sql(
    DELETE FROM coexist.takeovers t
     WHERE t.target = $1::regclass
       AND NOT EXISTS (SELECT 1 FROM coexist.runs r
                        WHERE r.run_id = t.run_id AND r.outcome = 'running')
    RETURNING t.record_key)sql");
  conn.prepare("act_as_batch", "SELECT set_config('coexist.actor', 'batch', true)");
  conn.prepare("find_edit_locks", R"sql(
    SELECT record_key, owner,
           (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint
      FROM coexist.edit_locks
     WHERE target = $1::regclass AND record_key = ANY ($2::bigint[])
       AND expires_at > clock_timestamp())sql");
  conn.prepare("revoke_edit_lock",
               "SELECT coalesce(coexist.revoke_edit_lock($1::regclass, $2, $3, $4, $5, $6), '')");
  // Who may be signalled ($2 the online pattern, $3 the batch's own
  // application_name): see Blocker::online. Without pg_read_all_stats the
  // batch role cannot see another role's backend_type and start times, so
  // its backends are never signalled.
  conn.prepare("find_blockers", R"sql(
    SELECT a.pid, coalesce(a.application_name, ''),
           coalesce(a.application_name LIKE $2::text
                    AND left(a.application_name, length($3::text)) <> $3::text
                    AND a.backend_type = 'client backend'
                    AND a.datname = current_database()
                    AND NOT r.rolsuper
                    AND a.pid NOT IN ($1, pg_backend_pid()), false),
           a.backend_start::text, a.xact_start::text, coalesce(a.state, '')
      FROM unnest(pg_blocking_pids($1)) AS b(pid)
      JOIN pg_stat_activity a ON a.pid = b.pid
      LEFT JOIN pg_roles r ON r.oid = a.usesysid)sql");
  // The same conditions again, and the same session (backend_start) in the
  // same transaction (xact_start) as seen, checked in the statement that
  // signals: nothing else can take the pid's place in between.
  conn.prepare("signal_blockers", R"sql(
    WITH seen AS (
      SELECT * FROM unnest($1::integer[], $2::timestamptz[], $3::timestamptz[])
                    AS s(pid, backend_start, xact_start)),
    b AS (
      SELECT a.pid, a.application_name, a.state, a.backend_start, a.xact_start, a.query_start,
             ($4 OR a.state LIKE 'idle in transaction%') AS terminate
        FROM seen s
        JOIN pg_stat_activity a ON a.pid = s.pid
        JOIN pg_roles r ON r.oid = a.usesysid
       WHERE a.backend_start = s.backend_start
         AND a.xact_start = s.xact_start
         AND a.application_name LIKE $5::text
         AND left(a.application_name, length($6::text)) <> $6::text
         AND a.backend_type = 'client backend'
         AND a.datname = current_database()
         AND NOT r.rolsuper
         AND a.pid NOT IN ($7, pg_backend_pid())),
    k AS (SELECT b.*,
                 CASE WHEN terminate THEN pg_terminate_backend(pid) ELSE pg_cancel_backend(pid) END
                   AS ok
            FROM b),
    e AS (
      INSERT INTO coexist.events (kind, job, run_id, item_id, target, record_key, actor, subject,
                                  details)
      SELECT CASE WHEN terminate THEN 'backend_terminated' ELSE 'backend_cancelled' END, $8,
             $9::bigint, $10::bigint, $12::regclass, $11::bigint, 'batch run ' || $9::bigint,
             application_name,
             jsonb_build_object('pid', pid, 'signalled', ok, 'state', state,
                                'backend_start', backend_start, 'xact_start', xact_start,
                                'query_start', query_start)
        FROM k
      RETURNING 1)
    SELECT count(*) FILTER (WHERE ok AND NOT terminate), count(*) FILTER (WHERE ok AND terminate)
      FROM k)sql");

  conn.prepare("hold_run", "SELECT coexist.hold_run($1)");
  conn.prepare("insert_run", R"sql(
    INSERT INTO coexist.runs (job, policy, host, pid, details, backend_pid)
    VALUES ($1, $2, $3, $4, $5::jsonb, pg_backend_pid())
    RETURNING run_id)sql");
  conn.prepare("lock_run",
               "SELECT pg_advisory_lock(coexist.run_lock_class(), ($1 % 2147483647)::integer)");
  conn.prepare("try_lock_job", "SELECT coexist.try_lock_job($1)");
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
  conn.prepare("heartbeat_run", R"sql(
    UPDATE coexist.runs SET heartbeat_at = now(), claimed = $2, done = $3, deferred = $4, dead = $5
     WHERE run_id = $1)sql");
  conn.prepare("finish_run", R"sql(
    UPDATE coexist.runs
       SET heartbeat_at = now(), ended_at = now(), outcome = $2, claimed = $3, done = $4,
           deferred = $5, dead = $6, details = details || $7::jsonb
     WHERE run_id = $1)sql");
  conn.prepare("insert_event", R"sql(
    INSERT INTO coexist.events (kind, job, run_id, actor, details)
    VALUES ($1, $2, $3::bigint, 'batch run ' || $3::bigint, $4::jsonb))sql");
  conn.prepare("count_queued",
               "SELECT count(*) FROM coexist.queue WHERE job = $1 AND state = 'queued'");
}

long long QueueSql::StartRun(pqxx::transaction_base& tx, const std::string& policy,
                             const std::string& details_json) {
  return tx
      .exec_prepared1("insert_run", config_.batch.job, policy, Hostname(),
                      static_cast<int>(getpid()), details_json)[0]
      .as<long long>();
}

void QueueSql::LockRun(pqxx::transaction_base& tx, long long run_id) {
  tx.exec_prepared("lock_run", run_id);
}

bool QueueSql::TryLockJob(pqxx::transaction_base& tx) {
  return tx.exec_prepared1("try_lock_job", config_.batch.job)[0].as<bool>();
}

std::optional<JobHolder> QueueSql::FindJobHolder(pqxx::transaction_base& tx) {
  auto rows = tx.exec_prepared("find_job_holder", config_.batch.job);
  if (rows.empty()) return std::nullopt;
  const auto& row = rows[0];
  JobHolder holder;
  holder.pid = row[0].as<int>();
  std::string who = "pid " + std::to_string(holder.pid) + ", role " + row[1].as<std::string>() +
                    ", application_name '" + row[2].as<std::string>() + "', client " +
                    row[3].as<std::string>() + ", " + row[4].as<std::string>();
  auto timeout_s = std::chrono::duration_cast<std::chrono::seconds>(config_.batch.busy_timeout);
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

bool QueueSql::HoldRun(pqxx::transaction_base& tx, long long run_id) {
  return tx.exec_prepared1("hold_run", run_id)[0].as<bool>();
}

std::vector<long long> QueueSql::AbandonStaleRuns(pqxx::transaction_base& tx) {
  return Keys(tx.exec_prepared("abandon_runs", config_.batch.job));
}

void QueueSql::HeartbeatRun(pqxx::transaction_base& tx, long long run_id, long long claimed,
                            long long done, long long deferred, long long dead) {
  tx.exec_prepared("heartbeat_run", run_id, claimed, done, deferred, dead);
}

void QueueSql::FinishRun(pqxx::transaction_base& tx, long long run_id, const std::string& outcome,
                         long long claimed, long long done, long long deferred, long long dead,
                         const std::string& details_json) {
  tx.exec_prepared("finish_run", run_id, outcome, claimed, done, deferred, dead, details_json);
}

void QueueSql::AddEvent(pqxx::transaction_base& tx, const std::string& kind, long long run_id,
                        const std::string& details_json) {
  tx.exec_prepared("insert_event", kind, config_.batch.job, run_id, details_json);
}

long long QueueSql::CountQueued(pqxx::transaction_base& tx) {
  return tx.exec_prepared1("count_queued", config_.batch.job)[0].as<long long>();
}

static std::vector<Item> ItemsOf(const pqxx::result& result) {
  std::vector<Item> items;
  items.reserve(result.size());
  for (const auto& row : result) {
    items.push_back({row[0].as<long long>(), row[1].as<long long>(), row[2].as<std::string>(),
                     row[3].as<int>(), row[4].as<int>()});
  }
  return items;
}

std::vector<Item> QueueSql::ClaimItems(pqxx::transaction_base& tx, long long run_id, int limit,
                                       long long after, const std::vector<long long>& exclude,
                                       bool untaken_only) {
  return ItemsOf(tx.exec_prepared(untaken_only ? "claim_untaken_items" : "claim_items",
                                  config_.batch.job, run_id, limit, after, ArrayLiteral(exclude)));
}

std::vector<Item> QueueSql::RelockItems(pqxx::transaction_base& tx,
                                        const std::vector<long long>& ids) {
  return ItemsOf(tx.exec_prepared("relock_items", ArrayLiteral(ids)));
}

std::vector<long long> QueueSql::StillClaimable(pqxx::transaction_base& tx, long long run_id,
                                                const std::vector<long long>& ids) {
  return Keys(tx.exec_prepared("find_claimable_items", ArrayLiteral(ids), run_id));
}

void QueueSql::CompleteItems(pqxx::transaction_base& tx, long long run_id,
                             const std::vector<long long>& ids) {
  if (!ids.empty()) tx.exec_prepared("complete_items", ArrayLiteral(ids), run_id);
}

long long QueueSql::FailItems(pqxx::transaction_base& tx, long long run_id,
                              const std::vector<Failure>& failures) {
  if (failures.empty()) return 0;
  std::vector<long long> ids;
  std::vector<std::optional<std::string>> errors;
  for (const auto& f : failures) {
    ids.push_back(f.item_id);
    errors.emplace_back(f.error);
  }
  return tx
      .exec_prepared1("fail_items", ArrayLiteral(ids), ArrayLiteral(errors), run_id,
                      config_.batch.max_attempts, config_.batch.job, target_)[0]
      .as<long long>();
}

void QueueSql::DeferItems(pqxx::transaction_base& tx, long long run_id,
                          const std::vector<Deferral>& deferrals) {
  if (deferrals.empty()) return;
  std::vector<long long> ids;
  std::vector<std::optional<std::string>> reasons;
  std::vector<std::optional<std::string>> escalated;
  for (const auto& d : deferrals) {
    ids.push_back(d.item_id);
    reasons.emplace_back(d.reason);
    escalated.emplace_back(d.escalated ? "t" : "f");
  }
  tx.exec_prepared("defer_items", ArrayLiteral(ids), ArrayLiteral(reasons), ArrayLiteral(escalated),
                   run_id, config_.batch.job, Ms(config_.policy.defer_delay), target_);
}

std::vector<long long> QueueSql::LockRecords(pqxx::transaction_base& tx,
                                             const std::vector<long long>& keys) {
  if (keys.empty()) return {};
  return Keys(tx.exec_prepared("lock_records", ArrayLiteral(keys)));
}

std::vector<long long> QueueSql::ExistingRecords(pqxx::transaction_base& tx,
                                                 const std::vector<long long>& keys) {
  if (keys.empty()) return {};
  return Keys(tx.exec_prepared("find_records", ArrayLiteral(keys)));
}

std::vector<long long> QueueSql::BatchOwnedRecords(pqxx::transaction_base& tx,
                                                   const std::vector<long long>& keys) {
  if (keys.empty() || !has_owner_) return {};
  return Keys(tx.exec_prepared("find_batch_owned_records", ArrayLiteral(keys)));
}

bool QueueSql::LockRecordStep(pqxx::transaction_base& tx, long long key,
                              std::chrono::milliseconds step) {
  try {
    Savepoint sub(tx, "lock_step");
    tx.exec_params("SELECT set_config('lock_timeout', $1, true)", Ms(step));
    tx.exec_prepared("lock_record", key);
    // The lock stays; the short timeout must not outlive the step.
    tx.exec("SELECT set_config('lock_timeout', '0', true)");
    sub.Release();
    return true;
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() == db::sqlstate::kLockNotAvailable) return false;
    throw;
  } catch (const pqxx::transaction_rollback&) {
    return false;  // 40P01: a deadlock with online broken in our disfavour; try again later
  }
}

std::vector<EditLock> QueueSql::LiveEditLocks(pqxx::transaction_base& tx,
                                              const std::vector<long long>& keys) {
  std::vector<EditLock> out;
  if (keys.empty()) return out;
  for (const auto& row : tx.exec_prepared("find_edit_locks", target_, ArrayLiteral(keys))) {
    out.push_back({row[0].as<long long>(), row[1].as<std::string>(),
                   std::chrono::milliseconds(row[2].as<long long>())});
  }
  return out;
}

std::optional<std::string> QueueSql::RevokeEditLock(pqxx::transaction_base& tx, long long key,
                                                    long long run_id, long long item_id,
                                                    std::chrono::milliseconds step) {
  try {
    Savepoint sub(tx, "revoke_step");
    tx.exec_params("SELECT set_config('lock_timeout', $1, true)", Ms(step));
    auto owner =
        tx.exec_prepared1("revoke_edit_lock", target_, key, "batch run " + std::to_string(run_id),
                          config_.batch.job, run_id, item_id)[0]
            .as<std::string>();
    tx.exec("SELECT set_config('lock_timeout', '0', true)");
    sub.Release();
    return owner;
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() == db::sqlstate::kLockNotAvailable) return std::nullopt;
    throw;
  } catch (const pqxx::transaction_rollback&) {
    return std::nullopt;
  }
}

std::vector<Blocker> QueueSql::Blockers(pqxx::transaction_base& tx, int pid,
                                        const std::string& online_pattern) {
  std::vector<Blocker> out;
  for (const auto& row :
       tx.exec_prepared("find_blockers", pid, online_pattern, config_.database.application_name)) {
    Blocker b;
    b.pid = row[0].as<int>();
    b.application_name = row[1].as<std::string>();
    b.online = row[2].as<bool>();
    if (!row[3].is_null()) b.backend_start = row[3].as<std::string>();
    if (!row[4].is_null()) b.xact_start = row[4].as<std::string>();
    b.state = row[5].as<std::string>();
    out.push_back(std::move(b));
  }
  return out;
}

Signalled QueueSql::SignalBlockers(pqxx::transaction_base& tx, const std::vector<Blocker>& blockers,
                                   const std::string& online_pattern, bool terminate,
                                   long long run_id, long long item_id, long long key,
                                   int batch_pid) {
  std::vector<long long> pids;
  std::vector<std::optional<std::string>> backend_starts;
  std::vector<std::optional<std::string>> xact_starts;
  for (const auto& b : blockers) {
    if (!b.online) continue;
    pids.push_back(b.pid);
    backend_starts.push_back(b.backend_start);
    xact_starts.push_back(b.xact_start);
  }
  if (pids.empty()) return {};
  auto row = tx.exec_prepared1("signal_blockers", ArrayLiteral(pids), ArrayLiteral(backend_starts),
                               ArrayLiteral(xact_starts), terminate, online_pattern,
                               config_.database.application_name, batch_pid, config_.batch.job,
                               run_id, item_id, key, target_);
  return {row[0].as<int>(), row[1].as<int>()};
}

namespace {

// The items' ids and record keys, as the two arrays the takeover statements bind.
std::pair<std::vector<long long>, std::vector<long long>> IdsAndKeys(
    const std::vector<Item>& items) {
  std::pair<std::vector<long long>, std::vector<long long>> out;
  for (const auto& item : items) {
    out.first.push_back(item.item_id);
    out.second.push_back(item.key);
  }
  return out;
}

}  // namespace

void QueueSql::TakeOver(pqxx::transaction_base& tx, long long run_id,
                        const std::vector<Item>& items) {
  if (items.empty()) return;
  auto [ids, keys] = IdsAndKeys(items);
  tx.exec_prepared("take_over_records", ArrayLiteral(keys));
  tx.exec_prepared("insert_takeovers", run_id, ArrayLiteral(ids), ArrayLiteral(keys), target_);
}

void QueueSql::HandBack(pqxx::transaction_base& tx, const std::vector<Item>& items) {
  if (items.empty()) return;
  auto [ids, keys] = IdsAndKeys(items);
  tx.exec_prepared("hand_back_records", ArrayLiteral(keys));
  tx.exec_prepared("delete_takeovers", ArrayLiteral(ids));
}

long long QueueSql::HandBackOrphaned(pqxx::transaction_base& tx) {
  auto keys = Keys(tx.exec_prepared("delete_orphaned_takeovers", target_));
  if (keys.empty()) return 0;
  if (has_owner_) {
    // The guard refuses anyone but the batch to write a batch-owned row
    // (CX004), this hand-back included: this transaction speaks as the batch.
    tx.exec_prepared("act_as_batch");
    tx.exec_prepared("hand_back_records", ArrayLiteral(keys));
  }
  return static_cast<long long>(keys.size());
}

bool JobLockHeld(pqxx::transaction_base& tx, const std::string& job) {
  if (!tx.exec1("SELECT to_regprocedure('coexist.job_lock_class()') IS NOT NULL")[0].as<bool>()) {
    return false;
  }
  return tx
      .exec_params1(R"sql(
    SELECT EXISTS (
      SELECT 1 FROM pg_locks
       WHERE locktype = 'advisory' AND granted AND objsubid = 2
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND classid = coexist.job_lock_class()::oid AND objid = hashtext($1)::oid))sql",
                    job)[0]
      .as<bool>();
}

}  // namespace coexist::batch
