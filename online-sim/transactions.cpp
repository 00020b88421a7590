// The transaction kinds: each is one small coroutine that says, in SQL, what
// a web request of that kind does. docs/online-sim.md quotes the SQL.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <random>

#include "common/log.h"
#include "db/sqlstate.h"
#include "online-sim/engine.h"

namespace coexist::online_sim {
namespace {

std::string Text(long long value) { return std::to_string(value); }

// How a transaction ended, before it is counted.
struct End {
  Outcome outcome;
  std::string sqlstate;  // for kOther and kConnectionLost
  bool retried = false;
};

End Ok(bool retried = false) { return End{Outcome::kOk, "", retried}; }

// The shared error path: classify, roll back what is open, and remember a
// write whose commit we never heard back about (it may or may not count).
Awaitable<End> Failed(Engine& engine, Lease& lease, const RoundTrip& trip, size_t key,
                      bool nowait_statement = false, bool write_in_flight = false) {
  if (trip.connection_lost) {
    if (write_in_flight) engine.in_doubt[key] = 1;
    if (trip.sqlstate == db::sqlstate::kAdminShutdown) co_return End{Outcome::kTerminated, ""};
    co_return End{Outcome::kConnectionLost, trip.sqlstate.empty() ? "none" : trip.sqlstate};
  }
  if (lease->in_transaction()) {
    std::vector<Statement> rollback_tx{{engine.sql.rollback, {}}};
    RoundTrip rollback = co_await lease->Run(std::move(rollback_tx));
    if (!rollback.ok()) lease->Close();  // the pool reconnects it
  }
  co_return End{OutcomeOf(trip.sqlstate, nowait_statement), trip.sqlstate};
}

End MissingRow(const std::string& what) {
  spdlog::warn("record missing during {}", what);
  return End{Outcome::kOther, "no_row"};
}

Awaitable<End> View(Engine& engine, User&, size_t key) {
  Lease lease = co_await engine.pool->Acquire();
  std::vector<Statement> read{{engine.sql.read_record, {engine.keys[key]}}};
  RoundTrip trip = co_await lease->Run(std::move(read));
  if (!trip.ok()) co_return co_await Failed(engine, lease, trip, key);
  if (trip.results[0].rows() != 1) co_return MissingRow("view");
  co_return Ok();
}

// Seed 000/001: read with the version, work, UPDATE only if the version is
// unchanged. The UPDATE returns the current row when it loses, so a retry
// needs no extra read (seed 000's ALL_OLD); when that row is the statement's
// own stale snapshot (same version), the retry reads afresh.
Awaitable<End> OptimisticEdit(Engine& engine, User& user, size_t key) {
  const auto& config = engine.config;
  KindStats& stats = engine.stats.kind(Kind::kOptimisticEdit);
  const std::string& id = engine.keys[key];
  Lease lease = co_await engine.pool->Acquire();
  bool reread = true;
  long long value = 0;
  long long version = 0;
  for (int attempt = 0;; ++attempt) {
    if (reread) {
      std::vector<Statement> read{{engine.sql.read_record, {id}}};
      RoundTrip trip = co_await lease->Run(std::move(read));
      if (!trip.ok()) co_return co_await Failed(engine, lease, trip, key);
      if (trip.results[0].rows() != 1) co_return MissingRow("optimistic edit");
      value = trip.results[0].Int(0, 0);
      version = trip.results[0].Int(0, 1);
    }
    co_await Sleep(config.app_work);
    std::vector<Statement> write{{engine.sql.write_checked, {id, Text(value - 1), Text(version)}}};
    RoundTrip trip = co_await lease->Run(std::move(write));
    if (!trip.ok()) co_return co_await Failed(engine, lease, trip, key, false, true);
    const Result& row = trip.results[0];
    if (row.rows() != 1) co_return MissingRow("optimistic edit");
    if (row.Bool(0, 0)) {
      engine.expected_delta[key] -= 1;
      if (attempt > 0) ++stats.retried;
      co_return Ok(attempt > 0);
    }
    ++stats.conflicts;
    if (attempt >= config.max_retries) {
      if (attempt > 0) ++stats.retried;
      co_return End{Outcome::kGaveUp, ""};
    }
    long long current = row.Int(0, 2);
    reread = current == version;
    value = row.Int(0, 1);
    version = current;
    co_await Sleep(Backoff(config.backoff_base, config.backoff_cap, attempt, user.random));
  }
}

// Seed 001's pessimistic reservation: lock the row, work, write, commit.
// BEGIN rides with the SELECT and COMMIT with the UPDATE, so the row lock is
// held for one round trip plus the work, not three.
Awaitable<End> PessimisticEdit(Engine& engine, User&, size_t key) {
  bool nowait = engine.config.lock_mode == config::LockMode::kNowait;
  const std::string& id = engine.keys[key];
  Lease lease = co_await engine.pool->Acquire();
  std::vector<Statement> lock{
      {engine.sql.begin, {}},
      {nowait ? engine.sql.lock_record_nowait : engine.sql.lock_record, {id}}};
  RoundTrip trip = co_await lease->Run(std::move(lock));
  if (!trip.ok())
    co_return co_await Failed(engine, lease, trip, key, nowait && trip.failed_statement == 1);
  if (trip.results[1].rows() != 1) {
    std::vector<Statement> rollback_tx{{engine.sql.rollback, {}}};
    co_await lease->Run(std::move(rollback_tx));
    co_return MissingRow("pessimistic edit");
  }
  long long value = trip.results[1].Int(0, 0);
  co_await Sleep(engine.config.app_work);
  std::vector<Statement> write{{engine.sql.write_blind, {id, Text(value - 1)}},
                               {engine.sql.commit, {}}};
  trip = co_await lease->Run(std::move(write));
  if (!trip.ok()) co_return co_await Failed(engine, lease, trip, key, false, true);
  engine.expected_delta[key] -= 1;
  co_return Ok();
}

// The lock is held across a human think time with no connection in use;
// it is renewed at half its ttl while the user still edits.
Awaitable<End> HoldEditLock(Engine& engine, User& user, size_t key, const std::string& token) {
  const auto& config = engine.config;
  // The human's edit time has the think-time distribution's shape.
  auto remaining = ThinkTime(config.think_distribution, config.offline_hold, config.think_sigma)
                       .Next(user.random);
  auto step = std::chrono::duration_cast<std::chrono::microseconds>(config.offline_ttl) / 2;
  std::string ttl = Text(config.offline_ttl.count()) + " milliseconds";
  while (remaining.count() > 0 && !engine.stopping) {
    auto slice = std::min({remaining, step, std::chrono::microseconds(200'000)});
    co_await Sleep(slice);
    user.human_time += slice;
    remaining -= slice;
    step -= slice;
    if (step.count() <= 0 && remaining.count() > 0) {
      step = std::chrono::duration_cast<std::chrono::microseconds>(config.offline_ttl) / 2;
      Lease lease = co_await engine.pool->Acquire();
      std::vector<Statement> renew{
          {engine.sql.renew_edit_lock, {engine.target_regclass, engine.keys[key], token, ttl}}};
      RoundTrip trip = co_await lease->Run(std::move(renew));
      if (!trip.ok()) co_return co_await Failed(engine, lease, trip, key);
      ++engine.stats.kind(Kind::kOfflineEdit).renewals;
    }
  }
  co_return Ok();
}

// Seed 002's offline lock: acquire through the coexist API, read, let the
// user think (no connection held), then save in one round trip: check the
// lock inside the transaction, UPDATE on the version read, COMMIT, release.
Awaitable<End> OfflineEdit(Engine& engine, User& user, size_t key) {
  const auto& config = engine.config;
  const std::string& id = engine.keys[key];
  std::string ttl = Text(config.offline_ttl.count()) + " milliseconds";
  std::string token;
  long long value = 0;
  long long version = 0;
  {
    Lease lease = co_await engine.pool->Acquire();
    std::vector<Statement> acquire{
        {engine.sql.acquire_edit_lock, {engine.target_regclass, id, user.owner, ttl}},
        {engine.sql.read_record, {id}}};
    RoundTrip trip = co_await lease->Run(std::move(acquire));
    if (!trip.ok()) co_return co_await Failed(engine, lease, trip, key);
    if (trip.results[1].rows() != 1) co_return MissingRow("offline edit");
    token = std::string(trip.results[0].Text(0, 0));
    value = trip.results[1].Int(0, 0);
    version = trip.results[1].Int(0, 1);
  }
  bool abandon = std::uniform_real_distribution<double>(0, 1)(user.random) < config.offline_abandon;
  End held = co_await HoldEditLock(engine, user, key, token);
  if (held.outcome != Outcome::kOk) co_return held;
  if (abandon) co_return End{Outcome::kAbandoned, ""};
  Lease lease = co_await engine.pool->Acquire();
  std::vector<Statement> save{{engine.sql.begin, {}},
                              {engine.sql.check_edit_lock, {engine.target_regclass, id, token}},
                              {engine.sql.save_checked, {id, Text(value - 1), Text(version)}},
                              {engine.sql.commit, {}},
                              {engine.sql.release_edit_lock, {engine.target_regclass, id, token}}};
  RoundTrip trip = co_await lease->Run(std::move(save));
  if (!trip.ok()) {
    bool committed = trip.failed_statement == 4;  // only the release failed
    End end = co_await Failed(engine, lease, trip, key, false, true);
    if (!committed) co_return end;
  }
  if (trip.results[2].affected() != 1) co_return End{Outcome::kConflict, ""};
  engine.expected_delta[key] -= 1;
  co_return Ok();
}

// Seed 000: the delta and the floor are separate parameters; reusing the
// delta as the floor would make the guard always true.
Awaitable<End> AtomicDecrement(Engine& engine, User&, size_t key) {
  const auto& config = engine.config;
  End end = Ok();
  {
    Lease lease = co_await engine.pool->Acquire();
    std::vector<Statement> decrement{
        {engine.sql.decrement_floor,
         {engine.keys[key], Text(config.atomic_delta), Text(config.atomic_floor)}}};
    RoundTrip trip = co_await lease->Run(std::move(decrement));
    if (!trip.ok()) co_return co_await Failed(engine, lease, trip, key, false, true);
    if (trip.results[0].rows() == 1) {
      engine.expected_delta[key] -= config.atomic_delta;
    } else {
      end = End{Outcome::kFloor, ""};
    }
  }
  co_await Sleep(config.app_work);
  co_return end;
}

// Seed 001's "no lock": read, work, write back what was read minus one.
// Concurrent users overwrite each other: the lost-update check shows it.
Awaitable<End> Nolock(Engine& engine, User&, size_t key) {
  const std::string& id = engine.keys[key];
  Lease lease = co_await engine.pool->Acquire();
  std::vector<Statement> read{{engine.sql.begin, {}}, {engine.sql.read_record, {id}}};
  RoundTrip trip = co_await lease->Run(std::move(read));
  if (!trip.ok()) co_return co_await Failed(engine, lease, trip, key);
  if (trip.results[1].rows() != 1) {
    std::vector<Statement> rollback_tx{{engine.sql.rollback, {}}};
    co_await lease->Run(std::move(rollback_tx));
    co_return MissingRow("nolock");
  }
  long long value = trip.results[1].Int(0, 0);
  co_await Sleep(engine.config.app_work);
  std::vector<Statement> write{{engine.sql.write_blind, {id, Text(value - 1)}},
                               {engine.sql.commit, {}}};
  trip = co_await lease->Run(std::move(write));
  if (!trip.ok()) co_return co_await Failed(engine, lease, trip, key, false, true);
  engine.expected_delta[key] -= 1;
  co_return Ok();
}

// multi_edit's records: `first` and count - 1 more drawn like any key, all
// distinct, in ascending index order, which is the key column's order (the
// batch's ORDER BY key): every multi_edit locks in one global order.
std::vector<size_t> DistinctKeys(Engine& engine, User& user, size_t first, size_t count) {
  std::vector<size_t> picked{first};
  for (size_t draws = 0; picked.size() < count && draws < 1000 * count; ++draws) {
    size_t next = engine.chooser->Next(user.random);
    if (std::find(picked.begin(), picked.end(), next) == picked.end()) picked.push_back(next);
  }
  // A skewed distribution over few records may keep drawing the same ones:
  // the lowest unused indexes fill up.
  for (size_t i = 0; picked.size() < count && i < engine.keys.size(); ++i) {
    if (std::find(picked.begin(), picked.end(), i) == picked.end()) picked.push_back(i);
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

// The values and versions of `keys` from a result of K, V, Ver rows in key
// order; false when a record is missing.
bool ReadRecords(const Result& result, const std::vector<std::string>& keys,
                 std::vector<long long>& values, std::vector<long long>& versions) {
  if (result.rows() != static_cast<int>(keys.size())) return false;
  for (int row = 0; row < result.rows(); ++row) {
    if (result.Text(row, 0) != keys[static_cast<size_t>(row)]) return false;
    values[static_cast<size_t>(row)] = result.Int(row, 1);
    versions[static_cast<size_t>(row)] = result.Int(row, 2);
  }
  return true;
}

std::string IntArray(const std::vector<long long>& numbers, long long add = 0) {
  std::string out = "{";
  for (long long n : numbers) out += (out.size() > 1 ? "," : "") + Text(n + add);
  return out + "}";
}

// multi_edit's records as one transaction sees them.
struct Records {
  std::vector<size_t> picked;     // indexes into engine.keys, ascending
  std::vector<std::string> keys;  // their keys
  std::string ids;                // the keys as an array literal
  std::vector<long long> values, versions;
};

// One save of multi_edit: lock the records in key order and update each
// whose version is unchanged; commit only when all were, else roll back
// and take the rows the lock returned for the next try. nullopt: saved or
// conflicting (`saved` says which); an End: failed.
Awaitable<std::optional<End>> SaveAll(Engine& engine, Lease& lease, Records& records, bool& saved) {
  bool nowait = engine.config.lock_mode == config::LockMode::kNowait;
  size_t first = records.picked.front();
  std::vector<Statement> write{
      {engine.sql.begin, {}},
      {nowait ? engine.sql.lock_records_nowait : engine.sql.lock_records, {records.ids}},
      {engine.sql.write_records,
       {records.ids, IntArray(records.versions), IntArray(records.values, -1)}}};
  RoundTrip trip = co_await lease->Run(std::move(write));
  if (!trip.ok())
    co_return co_await Failed(engine, lease, trip, first, nowait && trip.failed_statement == 1);
  // Nothing is committed yet: all or nothing is decided here.
  saved = trip.results[2].affected() == static_cast<int>(records.keys.size());
  std::vector<Statement> end{{saved ? engine.sql.commit : engine.sql.rollback, {}}};
  RoundTrip done = co_await lease->Run(std::move(end));
  if (!done.ok()) {
    if (saved && done.connection_lost) {
      for (size_t i : records.picked) engine.in_doubt[i] = 1;
    }
    co_return co_await Failed(engine, lease, done, first);
  }
  if (!saved && !ReadRecords(trip.results[1], records.keys, records.values, records.versions)) {
    co_return MissingRow("multi edit");
  }
  co_return std::nullopt;
}

// An application's form over several records: read them with their
// versions, work, then in one transaction lock them in key order and
// update each only if its version is unchanged. All are saved or none: on
// any conflict the transaction rolls back and retries, after a backoff,
// with the rows the lock returned (optimistic_edit's policy).
Awaitable<End> MultiEdit(Engine& engine, User& user, size_t first) {
  const auto& config = engine.config;
  KindStats& stats = engine.stats.kind(Kind::kMultiEdit);
  Records records;
  records.picked = DistinctKeys(engine, user, first, static_cast<size_t>(config.multi_edit_keys));
  for (size_t i : records.picked) records.keys.push_back(engine.keys[i]);
  records.ids = ArrayLiteral(records.keys);
  records.values.resize(records.keys.size());
  records.versions.resize(records.keys.size());
  Lease lease = co_await engine.pool->Acquire();
  std::vector<Statement> read{{engine.sql.read_records, {records.ids}}};
  RoundTrip trip = co_await lease->Run(std::move(read));
  if (!trip.ok()) co_return co_await Failed(engine, lease, trip, first);
  if (!ReadRecords(trip.results[0], records.keys, records.values, records.versions)) {
    co_return MissingRow("multi edit");
  }
  for (int attempt = 0;; ++attempt) {
    co_await Sleep(config.app_work);
    bool saved = false;
    std::optional<End> failed = co_await SaveAll(engine, lease, records, saved);
    if (failed) co_return *failed;
    if (saved) {
      for (size_t i : records.picked) engine.expected_delta[i] -= 1;
    } else {
      ++stats.conflicts;
    }
    if (attempt > 0 && (saved || attempt >= config.max_retries)) ++stats.retried;
    if (saved) co_return Ok(attempt > 0);
    if (attempt >= config.max_retries) co_return End{Outcome::kGaveUp, ""};
    co_await Sleep(Backoff(config.backoff_base, config.backoff_cap, attempt, user.random));
  }
}

// A custom kind (online.custom_kinds): its script line by line on one
// connection, each statement a round trip of its own, as an application
// that waits for each answer sends it. An error rolls back what is open
// and is counted like the built-in kinds'; a script that ends inside a
// transaction is rolled back and counted other (open_transaction).
Awaitable<End> Custom(Engine& engine, User& user, size_t index) {
  using Type = config::ScriptStep::Type;
  const config::CustomKind& kind = engine.config.custom_kinds[index];
  const std::vector<int>& ids = engine.custom_sql[index];
  std::vector<std::string> values(kind.variables.size());
  Lease lease = co_await engine.pool->Acquire();
  for (size_t line = 0; line < kind.script.size(); ++line) {
    const config::ScriptStep& step = kind.script[line];
    if (step.type == Type::kSetKey) {
      values[static_cast<size_t>(step.variable)] = engine.keys[engine.chooser->Next(user.random)];
    } else if (step.type == Type::kSetRandom) {
      values[static_cast<size_t>(step.variable)] =
          Text(std::uniform_int_distribution<long long>(step.min, step.max)(user.random));
    } else if (step.type == Type::kSleep) {
      co_await Sleep(step.sleep);
    } else {
      std::vector<std::string> params;
      for (int variable : step.params) params.push_back(values[static_cast<size_t>(variable)]);
      std::vector<Statement> statement{{ids[line], std::move(params)}};
      RoundTrip trip = co_await lease->Run(std::move(statement));
      if (!trip.ok()) co_return co_await Failed(engine, lease, trip, 0);
    }
  }
  if (lease->in_transaction()) {
    std::vector<Statement> rollback{{engine.sql.rollback, {}}};
    RoundTrip undone = co_await lease->Run(std::move(rollback));
    if (!undone.ok()) lease->Close();
    co_return End{Outcome::kOther, "open_transaction"};
  }
  co_return Ok();
}

Awaitable<End> Dispatch(Engine& engine, User& user, size_t index, size_t key) {
  if (index >= static_cast<size_t>(kKindCount)) {
    return Custom(engine, user, index - static_cast<size_t>(kKindCount));
  }
  switch (static_cast<Kind>(index)) {
    case Kind::kView:
      return View(engine, user, key);
    case Kind::kOptimisticEdit:
      return OptimisticEdit(engine, user, key);
    case Kind::kPessimisticEdit:
      return PessimisticEdit(engine, user, key);
    case Kind::kOfflineEdit:
      return OfflineEdit(engine, user, key);
    case Kind::kAtomicDecrement:
      return AtomicDecrement(engine, user, key);
    case Kind::kMultiEdit:
      return MultiEdit(engine, user, key);
    case Kind::kNolock:
      break;
  }
  return Nolock(engine, user, key);
}

}  // namespace

std::string QuoteIdentifier(const std::string& name) {
  std::string out = "\"";
  for (char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string ArrayLiteral(std::span<const std::string> elements) {
  std::string out = "{";
  for (const std::string& element : elements) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : element) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

StatementIds AddStatements(Catalog& c, const config::TargetTable& target, const std::string& value,
                           const std::string& key_type) {
  std::string table = QuoteIdentifier(target.schema) + "." + QuoteIdentifier(target.table);
  std::string k = QuoteIdentifier(target.key_column);
  std::string v = QuoteIdentifier(value);
  std::string ver = QuoteIdentifier(target.version_column);
  std::string read = "SELECT " + v + ", " + ver + " FROM " + table + " WHERE " + k + " = $1";
  StatementIds ids{};
  ids.begin = c.Add("begin", "BEGIN", 0);
  ids.commit = c.Add("commit", "COMMIT", 0);
  ids.rollback = c.Add("rollback", "ROLLBACK", 0);
  ids.read_record = c.Add("read_record", read, 1);
  ids.lock_record = c.Add("lock_record", read + " FOR UPDATE", 1);
  ids.lock_record_nowait = c.Add("lock_record_nowait", read + " FOR UPDATE NOWAIT", 1);
  // The version is never set here: the database's trigger bumps it.
  ids.write_checked =
      c.Add("write_checked",
            "WITH saved AS (UPDATE " + table + " SET " + v + " = $2 WHERE " + k + " = $1 AND " +
                ver + " = $3 RETURNING " + v + ", " + ver + ") SELECT true, " + v + ", " + ver +
                " FROM saved UNION ALL SELECT false, " + v + ", " + ver + " FROM " + table +
                " WHERE " + k + " = $1 AND NOT EXISTS (SELECT FROM saved)",
            3);
  ids.write_blind =
      c.Add("write_blind", "UPDATE " + table + " SET " + v + " = $2 WHERE " + k + " = $1", 2);
  ids.decrement_floor = c.Add("decrement_floor",
                              "UPDATE " + table + " SET " + v + " = " + v + " - $2 WHERE " + k +
                                  " = $1 AND " + v + " - $2 >= $3 RETURNING " + v,
                              3);
  ids.save_checked =
      c.Add("save_checked",
            "UPDATE " + table + " SET " + v + " = $2 WHERE " + k + " = $1 AND " + ver + " = $3", 3);
  ids.acquire_edit_lock =
      c.Add("acquire_edit_lock",
            "SELECT coexist.acquire_edit_lock($1::regclass, $2, $3, $4::interval)", 4);
  ids.renew_edit_lock = c.Add(
      "renew_edit_lock", "SELECT coexist.renew_edit_lock($1::regclass, $2, $3, $4::interval)", 4);
  ids.check_edit_lock =
      c.Add("check_edit_lock", "SELECT coexist.check_edit_lock($1::regclass, $2, $3)", 3);
  ids.release_edit_lock =
      c.Add("release_edit_lock", "SELECT coexist.release_edit_lock($1::regclass, $2, $3)", 3);
  ids.set_lock_timeout =
      c.Add("set_lock_timeout", "SELECT set_config('lock_timeout', $1, false)", 1);
  // multi_edit: $1 the records' keys in key order, $2 the versions read,
  // $3 the new values. The lock's ORDER BY takes the row locks in key order.
  std::string any =
      " FROM " + table + " WHERE " + k + " = ANY($1::" + key_type + "[]) ORDER BY " + k;
  std::string records = "SELECT " + k + ", " + v + ", " + ver + any;
  ids.read_records = c.Add("read_records", records, 1);
  ids.lock_records = c.Add("lock_records", records + " FOR UPDATE", 1);
  ids.lock_records_nowait = c.Add("lock_records_nowait", records + " FOR UPDATE NOWAIT", 1);
  ids.write_records =
      c.Add("write_records",
            "UPDATE " + table + " AS t SET " + v + " = e.v FROM unnest($1::" + key_type +
                "[], $2::bigint[], $3::bigint[]) AS e(k, ver, v) WHERE t." + k + " = e.k AND t." +
                ver + " = e.ver",
            3);
  return ids;
}

std::vector<std::vector<int>> AddCustomStatements(Catalog& c,
                                                  const std::vector<config::CustomKind>& kinds) {
  std::vector<std::vector<int>> ids;
  for (const config::CustomKind& kind : kinds) {
    // Named by the kind's position, not its name: a long name would make
    // statement names that PostgreSQL cuts at 63 bytes, and collide.
    std::string prefix = "custom_" + std::to_string(ids.size()) + "_";
    auto& lines = ids.emplace_back();
    for (size_t line = 0; line < kind.script.size(); ++line) {
      const config::ScriptStep& step = kind.script[line];
      lines.push_back(step.type != config::ScriptStep::Type::kSql
                          ? -1
                          : c.Add(prefix + std::to_string(line + 1), step.sql,
                                  static_cast<int>(step.params.size())));
    }
  }
  return ids;
}

Awaitable<> RunTransaction(Engine& engine, User& user, size_t kind, size_t key,
                           Clock::time_point start) {
  End end = co_await Dispatch(engine, user, kind, key);
  KindStats& stats = engine.stats.kind(kind);
  ++stats.outcomes[static_cast<size_t>(end.outcome)];
  if (end.outcome == Outcome::kOther || end.outcome == Outcome::kConnectionLost) {
    ++stats.other_sqlstates[end.sqlstate];
  }
  // Latency is what the system made the user wait: an offline edit's human
  // think time between loading and saving the screen does not count.
  auto latency = Clock::now() - start - user.human_time;
  user.human_time = std::chrono::microseconds(0);
  stats.latency.Add(latency);
  engine.stats.recent.Add(latency);
  engine.stats.all.Add(latency);
  if (engine.config.latency_limit.count() > 0 && latency > engine.config.latency_limit) {
    ++engine.stats.late;
  }
}

}  // namespace coexist::online_sim
