#include "batch/record_sql.h"

#include <algorithm>

#include "db/failure.h"
#include "db/sql_values.h"
#include "db/sqlstate.h"
#include "db/target_table.h"
#include "schema/edit_locks.h"
#include "schema/events.h"

namespace coexist::batch {
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

void Savepoint::Rollback() {
  tx_.exec("ROLLBACK TO SAVEPOINT " + name_);
  tx_.exec("RELEASE SAVEPOINT " + name_);
  done_ = true;
}

RowFacts GatherFacts(RecordSql& lock_sql, pqxx::transaction_base& lock_tx, RecordSql& read_sql,
                     pqxx::transaction_base& read_tx, const std::vector<RecordKey>& keys,
                     bool owner) {
  RowFacts facts;
  auto locked = lock_sql.LockRecords(lock_tx, keys);
  facts.locked.insert(locked.begin(), locked.end());
  std::vector<RecordKey> unlocked;
  for (const auto& key : keys) {
    if (!facts.locked.count(key)) unlocked.push_back(key);
  }
  for (auto& key : read_sql.ExistingRecords(read_tx, unlocked)) {
    facts.row_locked.insert(std::move(key));
  }
  if (owner) {
    for (auto& key : read_sql.BatchOwnedRecords(read_tx, locked)) {
      facts.owned_by_batch.insert(std::move(key));
    }
  }
  return facts;
}

policies::RecordFacts ItemFacts(const Item& item, const RowFacts& rows) {
  policies::RecordFacts facts;
  facts.row_locked = std::any_of(item.keys.begin(), item.keys.end(),
                                 [&](const RecordKey& k) { return rows.row_locked.count(k) > 0; });
  facts.owned_by_batch = std::all_of(item.keys.begin(), item.keys.end(), [&](const RecordKey& k) {
    return rows.owned_by_batch.count(k) > 0;
  });
  return facts;
}

db::QueueJob QueueJobOf(const config::Config& config, const std::string& target) {
  return {config.batch.job,
          config.batch.max_attempts,
          config.policy.defer_delay,
          config.batch.busy_timeout,
          target,
          config.batch.max_timeouts,
          config.batch.runs == config::RunsMode::kShared};
}

RecordSql::RecordSql(pqxx::connection_base& conn, const config::Config& config)
    : conn_(conn), config_(config), has_owner_(config.target.owner_column.has_value()) {
  const auto& t = config.target;
  std::string table = conn.quote_name(t.schema) + "." + conn.quote_name(t.table);
  std::string key = conn.quote_name(t.key_column);
  target_ = table;
  {
    pqxx::nontransaction tx(conn);
    key_type_ = db::KeyTypeOf(tx, t);
  }
  // Keys travel as text and are cast to the column's type here, so the
  // key's index serves every lookup; they come back in canonical text.
  std::string keys = " = ANY ($1::text[]::" + key_type_ + "[])";
  // Named apart from the key column: ORDER BY the column's name would
  // otherwise sort by this text (10 before 9), and lock in that order.
  std::string key_text = key + "::text AS coexist_k";

  // In the key column's order, the global lock order (SKIP LOCKED never
  // waits, but the order costs a sort of one chunk's keys and keeps the rule
  // simple: coexist takes row locks in key order).
  conn.prepare("lock_records", "SELECT " + key_text + " FROM " + table + " WHERE " + key + keys +
                                   " ORDER BY " + key + " FOR UPDATE SKIP LOCKED");
  conn.prepare("lock_record", "SELECT 1 FROM " + table + " WHERE " + key +
                                  " = $1::text::" + key_type_ + " FOR UPDATE");
  conn.prepare("find_records", "SELECT " + key_text + " FROM " + table + " WHERE " + key + keys +
                                   " ORDER BY " + key);
  if (has_owner_) {
    std::string owner = conn.quote_name(*t.owner_column);
    conn.prepare("find_batch_owned_records", "SELECT " + key_text + " FROM " + table + " WHERE " +
                                                 key + keys + " AND " + owner + " = 'batch'");
    conn.prepare("take_over_records",
                 "UPDATE " + table + " SET " + owner + " = 'batch' WHERE " + key + keys);
    conn.prepare("hand_back_records",
                 "UPDATE " + table + " SET " + owner + " = 'online' WHERE " + key + keys);
  }
  if (config.batch.range) PrepareRange(conn, table, key);
  db::PrepareBatchStatements(conn);  // takeovers and edit locks: the schema's
  conn.prepare("act_as_batch", "SELECT set_config('coexist.actor', 'batch', true)");
  conn.prepare(
      "revoke_edit_lock",
      "SELECT coalesce(coexist.revoke_edit_lock($1::regclass, $2::text, $3, $4, $5, $6), '')");
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
  conn.prepare(
      "signal_blockers",
      R"sql(
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
      )sql" +
          db::InsertEventsSql("kind, job, run_id, item_id, target, record_key, actor, subject,"
                              " details") +
          R"sql(
      SELECT CASE WHEN terminate THEN )sql" +
          SqlLiteral(EventKind::kBackendTerminated) + R"sql( ELSE )sql" +
          SqlLiteral(EventKind::kBackendCancelled) + R"sql( END, $8,
             $9::bigint, $10::bigint, $12::regclass, $11::text, 'batch run ' || $9::bigint,
             application_name,
             jsonb_build_object('pid', pid, 'signalled', ok, 'state', state,
                                'backend_start', backend_start, 'xact_start', xact_start,
                                'query_start', query_start)
        FROM k
      RETURNING 1)
    SELECT count(*) FILTER (WHERE ok AND NOT terminate), count(*) FILTER (WHERE ok AND terminate)
      FROM k)sql");
}

std::vector<RecordKey> RecordSql::LockRecords(pqxx::transaction_base& tx,
                                              const std::vector<RecordKey>& keys) {
  if (keys.empty()) return {};
  return db::TextColumn(tx.exec_prepared("lock_records", ArrayLiteral(keys)));
}

void RecordSql::PrepareRange(pqxx::connection_base& conn, const std::string& table,
                             const std::string& key) {
  // The line break ends a `--` comment the predicate may end with.
  const std::string where = "(" + config_.batch.range->where + "\n)";
  // One statement per bound shape, so each plan uses the key's index for
  // the bounds it has. The plain read picks the keys; the lock takes what it
  // can of them and checks the condition again on the row it locked.
  for (int shape = 0; shape < 4; ++shape) {
    bool after = (shape & 1) != 0;
    bool upper = (shape & 2) != 0;
    std::string bounds;
    int n = 1;
    if (after) bounds += key + " > $" + std::to_string(n++) + "::text::" + key_type_ + " AND ";
    if (upper) bounds += key + " <= $" + std::to_string(n++) + "::text::" + key_type_ + " AND ";
    std::string limit = "$" + std::to_string(n);
    conn.prepare("read_range_chunk_" + std::to_string(shape),
                 "WITH coexist_r AS (SELECT " + key + " AS coexist_k FROM " + table + " WHERE " +
                     bounds + where + " ORDER BY " + key + " LIMIT " + limit +
                     "), coexist_l AS (SELECT " + key + " AS coexist_k FROM " + table + " WHERE " +
                     key + " IN (SELECT coexist_k FROM coexist_r) AND " + where +
                     " FOR UPDATE SKIP LOCKED) "
                     "SELECT r.coexist_k::text, l.coexist_k IS NOT NULL FROM coexist_r r "
                     "LEFT JOIN coexist_l l ON l.coexist_k = r.coexist_k ORDER BY r.coexist_k");
    // The lock under the limit: a row another transaction changed so that
    // it no longer matches is passed by (the condition is checked again on
    // the locked version) and the next one taken.
    conn.prepare("lock_free_range_chunk_" + std::to_string(shape),
                 "SELECT " + key + "::text AS coexist_k FROM " + table + " WHERE " + bounds +
                     where + " ORDER BY " + key + " LIMIT " + limit + " FOR UPDATE NOWAIT");
  }
  conn.prepare("find_matching_records", "SELECT " + key + "::text AS coexist_k FROM " + table +
                                            " WHERE " + key + " = ANY ($1::text[]::" + key_type_ +
                                            "[]) AND " + where + " ORDER BY " + key);
  conn.prepare("range_bounds", "SELECT percentile_disc($1::float8[]) WITHIN GROUP (ORDER BY " +
                                   key + ")::text[], count(*) FROM " + table + " WHERE " + where);
}

namespace {

// A range chunk statement's parameters, and which of PrepareRange's bound
// shapes they fit (its name's suffix).
struct RangeParams {
  std::string shape;
  std::vector<std::string> values;
};

RangeParams RangeChunkParams(const std::optional<RecordKey>& after,
                             const std::optional<RecordKey>& upper, int limit) {
  RangeParams params{std::to_string((after ? 1 : 0) | (upper ? 2 : 0)), {}};
  if (after) params.values.push_back(*after);
  if (upper) params.values.push_back(*upper);
  params.values.push_back(std::to_string(limit));
  return params;
}

}  // namespace

RecordSql::RangeChunk RecordSql::ReadRangeChunk(pqxx::transaction_base& tx,
                                                const std::optional<RecordKey>& after,
                                                const std::optional<RecordKey>& upper, int limit) {
  auto params = RangeChunkParams(after, upper, limit);
  RangeChunk chunk;
  for (const auto& row : tx.exec_prepared("read_range_chunk_" + params.shape,
                                          pqxx::prepare::make_dynamic_params(params.values))) {
    chunk.keys.push_back(row[0].as<std::string>());
    if (row[1].as<bool>()) chunk.locked.push_back(chunk.keys.back());
  }
  return chunk;
}

std::optional<std::vector<RecordKey>> RecordSql::LockFreeRangeChunk(
    pqxx::transaction_base& tx, const std::optional<RecordKey>& after,
    const std::optional<RecordKey>& upper, int limit) {
  auto params = RangeChunkParams(after, upper, limit);
  try {
    return db::TextColumn(tx.exec_prepared("lock_free_range_chunk_" + params.shape,
                                           pqxx::prepare::make_dynamic_params(params.values)));
  } catch (const pqxx::sql_error& e) {
    if (db::SqlStateOf(e) == db::sqlstate::kLockNotAvailable) return std::nullopt;
    throw;
  }
}

std::vector<RecordKey> RecordSql::MatchingRecords(pqxx::transaction_base& tx,
                                                  const std::vector<RecordKey>& keys) {
  if (keys.empty()) return {};
  return db::TextColumn(tx.exec_prepared("find_matching_records", ArrayLiteral(keys)));
}

RecordSql::RangeSplit RecordSql::RangeBounds(pqxx::transaction_base& tx, int parts) {
  std::vector<std::string> fractions;
  for (int i = 1; i < parts; ++i) fractions.push_back(std::to_string(double(i) / parts));
  auto row = tx.exec_prepared1("range_bounds", ArrayLiteral(fractions));
  RangeSplit split;
  split.rows = row[1].as<long long>();
  if (row[0].is_null()) return split;
  for (auto& key : db::ParseArrayLiteral(row[0].as<std::string>())) {
    // Few rows give the same key more than once: one segment each.
    if (split.bounds.empty() || split.bounds.back() != key) split.bounds.push_back(std::move(key));
  }
  return split;
}

std::vector<RecordKey> RecordSql::ExistingRecords(pqxx::transaction_base& tx,
                                                  const std::vector<RecordKey>& keys) {
  if (keys.empty()) return {};
  return db::TextColumn(tx.exec_prepared("find_records", ArrayLiteral(keys)));
}

std::vector<RecordKey> RecordSql::BatchOwnedRecords(pqxx::transaction_base& tx,
                                                    const std::vector<RecordKey>& keys) {
  if (keys.empty() || !has_owner_) return {};
  return db::TextColumn(tx.exec_prepared("find_batch_owned_records", ArrayLiteral(keys)));
}

bool RecordSql::LockRecordStep(pqxx::transaction_base& tx, const RecordKey& key,
                               std::chrono::milliseconds step) {
  try {
    Savepoint sub(tx, "lock_step");
    tx.exec_params("SELECT set_config('lock_timeout', $1, true)", db::SettingMilliseconds(step));
    tx.exec_prepared("lock_record", key);
    // The lock stays; the short timeout must not outlive the step.
    tx.exec("SELECT set_config('lock_timeout', '0', true)");
    sub.Release();
    return true;
  } catch (const pqxx::failure& e) {
    // The step's lock_timeout (55P03), or a deadlock with online broken in
    // our disfavour (40P01): not locked this time; the policy decides.
    if (db::Classify(e) == db::FailureKind::kRetryable) return false;
    throw;
  }
}

std::vector<EditLock> RecordSql::LiveEditLocks(pqxx::transaction_base& tx,
                                               const std::vector<RecordKey>& keys) {
  std::vector<EditLock> out;
  for (auto& lock : db::ReadLiveEditLocks(tx, target_, keys)) {
    out.push_back({std::move(lock.record_key), std::move(lock.owner), lock.expires_in});
  }
  return out;
}

std::optional<std::string> RecordSql::RevokeEditLock(pqxx::transaction_base& tx,
                                                     const RecordKey& key, long long run_id,
                                                     long long item_id,
                                                     std::chrono::milliseconds step) {
  try {
    Savepoint sub(tx, "revoke_step");
    tx.exec_params("SELECT set_config('lock_timeout', $1, true)", db::SettingMilliseconds(step));
    auto owner =
        tx.exec_prepared1("revoke_edit_lock", target_, key, "batch run " + std::to_string(run_id),
                          config_.batch.job, run_id, item_id)[0]
            .as<std::string>();
    tx.exec("SELECT set_config('lock_timeout', '0', true)");
    sub.Release();
    return owner;
  } catch (const pqxx::failure& e) {
    // Its owner is saving right now (the row is locked past the step).
    if (db::Classify(e) == db::FailureKind::kRetryable) return std::nullopt;
    throw;
  }
}

std::vector<Blocker> RecordSql::Blockers(pqxx::transaction_base& tx, int pid,
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

Signalled RecordSql::SignalBlockers(pqxx::transaction_base& tx,
                                    const std::vector<Blocker>& blockers,
                                    const std::string& online_pattern, bool terminate,
                                    long long run_id, long long item_id, const RecordKey& key,
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

// One (item id, record key) pair per record of the items, as the two
// arrays the takeover statements bind.
std::pair<std::vector<long long>, std::vector<RecordKey>> IdsAndKeys(
    const std::vector<Item>& items) {
  std::pair<std::vector<long long>, std::vector<RecordKey>> out;
  for (const auto& item : items) {
    for (const auto& key : item.keys) {
      out.first.push_back(item.item_id);
      out.second.push_back(key);
    }
  }
  return out;
}

}  // namespace

void RecordSql::TakeOver(pqxx::transaction_base& tx, long long run_id,
                         const std::vector<Item>& items) {
  if (items.empty()) return;
  auto [ids, keys] = IdsAndKeys(items);
  tx.exec_prepared("take_over_records", ArrayLiteral(keys));
  db::InsertTakeovers(tx, run_id, ids, keys, target_);
}

void RecordSql::HandBack(pqxx::transaction_base& tx, const std::vector<Item>& items) {
  if (items.empty()) return;
  auto [ids, keys] = IdsAndKeys(items);
  tx.exec_prepared("hand_back_records", ArrayLiteral(keys));
  db::DeleteTakeovers(tx, ids);
}

long long RecordSql::HandBackOrphaned(pqxx::transaction_base& tx,
                                      const std::vector<RecordKey>& keys) {
  if (keys.empty()) return 0;
  if (has_owner_) {
    // The guard refuses anyone but the batch to write a batch-owned row
    // (CX004), this hand-back included: this transaction speaks as the batch.
    tx.exec_prepared("act_as_batch");
    tx.exec_prepared("hand_back_records", ArrayLiteral(keys));
  }
  return static_cast<long long>(keys.size());
}

}  // namespace coexist::batch
