// The transaction kinds: each is one small coroutine that says, in SQL, what
// a web request of that kind does. docs/online-sim.md quotes the SQL.

#include <spdlog/spdlog.h>

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
  std::vector<Statement> read{{engine.sql.read_record, {Text(engine.keys[key])}}};
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
  std::string id = Text(engine.keys[key]);
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
  std::string id = Text(engine.keys[key]);
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
      std::vector<Statement> renew{{engine.sql.renew_edit_lock,
                                    {engine.target_regclass, Text(engine.keys[key]), token, ttl}}};
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
  std::string id = Text(engine.keys[key]);
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
         {Text(engine.keys[key]), Text(config.atomic_delta), Text(config.atomic_floor)}}};
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
  std::string id = Text(engine.keys[key]);
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

Awaitable<End> Dispatch(Engine& engine, User& user, Kind kind, size_t key) {
  switch (kind) {
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

StatementIds AddStatements(Catalog& c, const config::TargetTable& target,
                           const std::string& value) {
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
  return ids;
}

Awaitable<> RunTransaction(Engine& engine, User& user, Kind kind, size_t key,
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
