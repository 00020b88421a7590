#include "online-sim/simulator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <list>
#include <pqxx/pqxx>
#include <regex>
#include <unordered_map>

#include "common/error.h"
#include "common/log.h"
#include "config_core/config_error.h"
#include "db/connection.h"
#include "db/target_table.h"
#include "online-sim/engine.h"

namespace coexist::online_sim {
namespace {

std::string Milliseconds(std::chrono::milliseconds value) {
  return std::to_string(value.count()) + "ms";
}

LatencyFigures Figures(const LatencyHistogram& histogram) {
  LatencySummary s = histogram.Summarize();
  return {s.count, s.mean_ms, s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms};
}

// By kind index: the built-in kinds, then the custom kinds in file order.
std::vector<double> Weights(const config::OnlineConfig& config) {
  const config::OnlineMix& mix = config.mix;
  std::vector<double> weights{mix.view,         mix.optimistic_edit,  mix.pessimistic_edit,
                              mix.offline_edit, mix.atomic_decrement, mix.nolock,
                              mix.multi_edit};
  for (const config::CustomKind& kind : config.custom_kinds) weights.push_back(kind.weight);
  return weights;
}

std::string KindNameOf(const config::OnlineConfig& config, size_t index) {
  if (index < static_cast<size_t>(kKindCount)) return KindName(static_cast<Kind>(index));
  return config.custom_kinds[index - static_cast<size_t>(kKindCount)].name;
}

// Custom kinds write what the simulator cannot follow, so the lost-update
// check cannot say what their changes should have been.
bool CustomKindsRun(const config::OnlineConfig& config) {
  return std::any_of(config.custom_kinds.begin(), config.custom_kinds.end(),
                     [](const config::CustomKind& kind) { return kind.weight > 0; });
}

// Only the built-in kinds read or write online.value_column: a mix of
// custom kinds alone works on a table without it.
bool BuiltInKindsRun(const config::OnlineConfig& config) {
  auto weights = Weights(config);
  return std::any_of(weights.begin(), weights.begin() + kKindCount,
                     [](double weight) { return weight > 0; });
}

}  // namespace

struct Simulator::State {
  State(std::string conninfo_in, config::TargetTable target_in, config::OnlineConfig config_in,
        RunOptions options_in)
      : conninfo(std::move(conninfo_in)),
        target(std::move(target_in)),
        config(std::move(config_in)),
        options(options_in),
        engine(config, target),
        deadline(engine.io),
        ticker(engine.io) {}

  std::string conninfo;
  config::TargetTable target;
  config::OnlineConfig config;
  RunOptions options;
  Engine engine;
  std::vector<long long> initial_values;
  std::discrete_distribution<size_t> mix;
  asio::steady_timer deadline;
  asio::steady_timer ticker;
  std::list<asio::steady_timer*> sleepers;  // cancelled when the run stops
  std::deque<Clock::time_point> arrivals;   // open model: scheduled, not started
  std::list<asio::steady_timer*> idle_workers;
  int active = 0;
  bool interrupted = false;
  Clock::time_point started, finished;

  void BeginStop(bool by_signal);
  Awaitable<> Nap(Clock::duration duration);
  Awaitable<> ClosedUser(int id);
  Awaitable<> Arrivals();
  Awaitable<> OpenWorker(int id);
  Awaitable<> Progress();
  void UserDone();
  Awaitable<> OpenPool(std::string& error);
  void ReadTarget(pqxx::connection_base& conn);
  LostUpdateCheck CheckLostUpdates();
  Report Build() const;
};

void Simulator::State::BeginStop(bool by_signal) {
  if (by_signal && !engine.stopping) interrupted = true;
  engine.stopping = true;
  for (auto* timer : sleepers) timer->cancel();
  for (auto* timer : idle_workers) timer->cancel();
  deadline.cancel();
}

Awaitable<> Simulator::State::Nap(Clock::duration duration) {
  if (duration <= Clock::duration::zero() || engine.stopping) co_return;
  asio::steady_timer timer(engine.io, duration);
  auto it = sleepers.insert(sleepers.end(), &timer);
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
  sleepers.erase(it);
}

void Simulator::State::UserDone() {
  if (--active > 0) return;
  finished = Clock::now();
  engine.stopping = true;
  deadline.cancel();
  ticker.cancel();
  engine.stats.arrivals_dropped += static_cast<long long>(arrivals.size());
  engine.pool->Close();
}

Awaitable<> Simulator::State::ClosedUser(int id) {
  std::seed_seq seq{config.seed, static_cast<long long>(id)};
  User user{id, "online-user-" + std::to_string(id), Random(seq)};
  ThinkTime think(config);
  // Users arrive spread over one think time, not all in the first instant.
  co_await Nap(think.Next(user.random) / 2);
  for (long long done = 0; !engine.stopping;) {
    size_t kind = mix(user.random);
    size_t key = engine.chooser->Next(user.random);
    co_await RunTransaction(engine, user, kind, key, Clock::now());
    if (options.transactions_per_user && ++done >= *options.transactions_per_user) break;
    co_await Nap(think.Next(user.random));
  }
  UserDone();
}

Awaitable<> Simulator::State::Arrivals() {
  std::seed_seq seq{config.seed, -1LL};
  Random random(seq);
  std::exponential_distribution<double> gap(config.rate);
  auto next = started;
  while (!engine.stopping) {
    next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(random)));
    co_await Nap(next - Clock::now());
    if (engine.stopping) break;
    arrivals.push_back(next);
    if (!idle_workers.empty()) idle_workers.front()->cancel();
  }
}

// Open model: `users` workers take arrivals in order; an arrival's latency
// counts from its scheduled time, so a slow server cannot hide its queue
// (no coordinated omission).
Awaitable<> Simulator::State::OpenWorker(int id) {
  std::seed_seq seq{config.seed, static_cast<long long>(id)};
  User user{id, "online-user-" + std::to_string(id), Random(seq)};
  while (!engine.stopping) {
    if (arrivals.empty()) {
      asio::steady_timer timer(engine.io, Clock::time_point::max());
      auto it = idle_workers.insert(idle_workers.end(), &timer);
      boost::system::error_code ec;
      co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
      idle_workers.erase(it);
      continue;
    }
    Clock::time_point scheduled = arrivals.front();
    arrivals.pop_front();
    engine.stats.schedule_lag.Add(Clock::now() - scheduled);
    size_t kind = mix(user.random);
    size_t key = engine.chooser->Next(user.random);
    co_await RunTransaction(engine, user, kind, key, scheduled);
  }
  UserDone();
}

Awaitable<> Simulator::State::Progress() {
  long long last_total = 0;
  auto last = Clock::now();
  while (true) {
    ticker.expires_after(options.tick_interval);
    boost::system::error_code ec;
    co_await ticker.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec || active == 0) co_return;
    auto now = Clock::now();
    const Stats& s = engine.stats;
    long long total = s.total();
    long long errors = 0;
    for (size_t k = 0; k < s.kinds(); ++k) errors += s.kind(k).total() - s.kind(k).outcomes[0];
    LatencySummary recent = s.recent.Summarize();
    Tick tick;
    tick.seconds = std::chrono::duration<double>(now - started).count();
    tick.transactions = total;
    tick.tps =
        static_cast<double>(total - last_total) / std::chrono::duration<double>(now - last).count();
    tick.not_ok = errors;
    tick.p50_ms = recent.p50_ms;
    tick.p95_ms = recent.p95_ms;
    tick.p99_ms = recent.p99_ms;
    tick.pool_wait_p95_ms = s.pool_wait.Summarize().p95_ms;
    if (options.on_tick) options.on_tick(tick);
    if (options.progress != nullptr) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "[%5.0fs] tx=%lld tps=%.1f not_ok=%lld p50=%.2fms p95=%.2fms p99=%.2fms "
                    "pool_wait_p95=%.2fms reconnects=%lld\n",
                    tick.seconds, tick.transactions, tick.tps, tick.not_ok, tick.p50_ms,
                    tick.p95_ms, tick.p99_ms, tick.pool_wait_p95_ms, s.reconnects);
      *options.progress << line << std::flush;
    }
    engine.stats.recent = LatencyHistogram();
    last_total = total;
    last = now;
  }
}

Simulator::Simulator(std::string conninfo, config::TargetTable target, config::OnlineConfig config,
                     RunOptions options)
    : state_(std::make_unique<State>(std::move(conninfo), std::move(target), std::move(config),
                                     options)) {}

Simulator::~Simulator() = default;

// The server must be able to give the pool its connections at all; that it
// has them free right now shows when the pool opens.
void CheckPoolFits(pqxx::connection_base& conn, int pool_size) {
  pqxx::read_transaction tx(conn);
  auto row = tx.exec(
      "SELECT current_setting('max_connections')::int, "
      "current_setting('superuser_reserved_connections')::int, "
      "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')")[0];
  int max_connections = row[0].as<int>();
  int reserved = row[1].as<int>();
  long long in_use = row[2].as<long long>();
  if (pool_size > max_connections - reserved) {
    throw UnavailableError(
        "the pool needs " + std::to_string(pool_size) + " connections but the server allows " +
            std::to_string(max_connections - reserved) + " (max_connections " +
            std::to_string(max_connections) + " minus " + std::to_string(reserved) +
            " reserved for superusers; " + std::to_string(in_use) + " in use now)",
        "lower online.pool_size (or --pool), or raise max_connections on the server.");
  }
}

void Simulator::State::ReadTarget(pqxx::connection_base& conn) {
  pqxx::read_transaction tx(conn);
  std::string table = tx.quote_name(target.schema) + "." + tx.quote_name(target.table);
  if (!db::TargetExists(tx, target)) {
    throw UnavailableError("target table " + target.Name() + " does not exist",
                           "create it, or run 'coexist db seed' for the demo table.");
  }
  auto type_of = [&](const std::string& column) {
    auto type = tx.exec_params(
        "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = $1::regclass "
        "AND attname = $2 AND NOT attisdropped",
        table, column);
    if (type.empty()) {
      throw UnavailableError("target table " + target.Name() + " has no column " + column,
                             "set target.key_column and online.value_column to its columns.");
    }
    return type[0][0].as<std::string>();
  };
  engine.key_type = type_of(target.key_column);
  if (!db::IsSupportedKeyType(engine.key_type)) {
    throw UnavailableError("column " + target.key_column + " of " + target.Name() + " is " +
                               engine.key_type + ", not a supported key type",
                           "the key must be smallint, integer, bigint, text, varchar or uuid.");
  }
  // Without a built-in kind nothing reads the value column: 0 stands in.
  std::string value = "0";
  if (BuiltInKindsRun(config)) {
    std::string value_type = type_of(config.value_column);
    if (!db::IsIntegerType(value_type)) {
      throw UnavailableError("column " + config.value_column + " of " + target.Name() + " is " +
                                 value_type + ", not an integer type",
                             "the simulator edits an integer column (online.value_column).");
    }
    value = tx.quote_name(config.value_column);
  }
  auto rows = tx.exec_params("SELECT " + tx.quote_name(target.key_column) + ", " + value +
                                 " FROM " + table + " ORDER BY 1 LIMIT NULLIF($1, 0)",
                             config.records);
  if (rows.empty()) {
    throw UnavailableError("target table " + target.Name() + " has no rows",
                           "the simulator edits existing records; seed some first.");
  }
  for (const auto& row : rows) {
    engine.keys.push_back(row[0].as<std::string>());
    initial_values.push_back(row[1].is_null() ? 0 : row[1].as<long long>());
  }
  engine.target_regclass = table;
}

Awaitable<> Simulator::State::OpenPool(std::string& error) {
  try {
    co_await engine.pool->Open();
  } catch (const std::exception& e) {
    error = e.what();
    co_return;
  }
  // A fresh backend's first write compiles the target's trigger functions
  // and fills its caches: ~20 ms each, which would otherwise land in the
  // first measured transactions (an application server's pool is warm). A
  // rolled-back write of one record does it before the clock starts; a
  // refusal (a guard trigger) is fine, the caches are warm all the same.
  // A mix of custom kinds alone has no built-in write to warm up with.
  if (!BuiltInKindsRun(config)) co_return;
  std::vector<Lease> leases;
  for (int i = 0; i < engine.pool->size(); ++i) leases.push_back(co_await engine.pool->Acquire());
  std::string id = engine.keys.front();  // ReadTarget found at least one
  std::vector<Statement> write{
      {engine.sql.begin, {}}, {engine.sql.write_blind, {id, "0"}}, {engine.sql.rollback, {}}};
  std::vector<Statement> rollback{{engine.sql.rollback, {}}};
  for (auto& lease : leases) {
    co_await lease->Run(write);
    if (lease->in_transaction()) co_await lease->Run(rollback);
  }
  leases.clear();
  engine.stats.pool_wait = LatencyHistogram();  // the warm-up's leases are not load
}

// Each custom statement that SQL's PREPARE takes (SELECT, INSERT, UPDATE,
// DELETE, MERGE, VALUES, WITH) is prepared once before any load, so a typo
// is a located configuration error (78) instead of a run of failures.
void CheckCustomStatements(pqxx::connection_base& conn, const config::OnlineConfig& config) {
  static const std::regex kPreparable(R"(^\s*(select|insert|update|delete|merge|values|with)\b)",
                                      std::regex::icase);
  int count = 0;
  for (const config::CustomKind& kind : config.custom_kinds) {
    for (const config::ScriptStep& step : kind.script) {
      if (step.type != config::ScriptStep::Type::kSql) continue;
      if (!std::regex_search(step.sql, kPreparable)) continue;
      try {
        pqxx::nontransaction tx(conn);
        std::string name = "coexist_check_" + std::to_string(++count);
        tx.exec("PREPARE " + name + " AS " + step.sql);
        tx.exec("DEALLOCATE " + name);
      } catch (const pqxx::sql_error& e) {
        std::string message = e.what();
        message = message.substr(0, message.find('\n'));
        if (message.starts_with("ERROR:  ")) message.erase(0, 8);
        throw config::ConfigError(step.at, "online.custom_kinds." + kind.name + ".script",
                                  "the statement does not prepare: " + message,
                                  "fix the statement; it is prepared against the target "
                                  "database as written, :name placeholders as $1, $2, ...");
      }
    }
  }
}

void Simulator::Prepare() {
  State& s = *state_;
  auto conn = db::Connect(s.conninfo, s.config.application_name);
  CheckPoolFits(*conn, s.config.pool_size);
  s.ReadTarget(*conn);
  Engine& engine = s.engine;
  engine.expected_delta.assign(engine.keys.size(), 0);
  engine.in_doubt.assign(engine.keys.size(), 0);
  engine.chooser = std::make_unique<KeyChooser>(s.config, engine.keys.size());
  auto weights = Weights(s.config);
  s.mix = std::discrete_distribution<size_t>(weights.begin(), weights.end());
  if (s.config.mix.multi_edit > 0 &&
      engine.keys.size() < static_cast<size_t>(s.config.multi_edit_keys)) {
    throw UnavailableError("multi_edit edits " + std::to_string(s.config.multi_edit_keys) +
                               " records at a time but the simulator has " +
                               std::to_string(engine.keys.size()),
                           "lower online.multi_edit_keys, or raise online.records (or --records) "
                           "or the target's rows.");
  }
  CheckCustomStatements(*conn, s.config);
  engine.sql = AddStatements(engine.catalog, s.target, s.config.value_column, engine.key_type);
  engine.custom_sql = AddCustomStatements(engine.catalog, s.config.custom_kinds);
  std::vector<Statement> setup{
      {engine.sql.set_lock_timeout, {Milliseconds(s.config.lock_timeout)}}};
  engine.pool =
      std::make_unique<Pool>(engine.io, engine.catalog, s.conninfo, s.config.application_name,
                             setup, s.config.pool_size, engine.stats);
  std::string error;
  Spawn(engine.io, s.OpenPool(error), "open pool");
  engine.io.run();
  engine.io.restart();
  if (!error.empty()) {
    throw TempFailError("cannot open the connection pool (" + std::to_string(s.config.pool_size) +
                            " connections to " + db::DescribeConninfo(s.conninfo) + "): " + error,
                        "check that the server accepts that many connections now.");
  }
  spdlog::info("online-sim ready records={} pool_size={} model={}", engine.keys.size(),
               s.config.pool_size, config::ToString(s.config.model));
}

Report Simulator::Run() {
  State& s = *state_;
  Engine& engine = s.engine;
  std::exception_ptr failure;
  auto on_error = [&s, &failure](std::exception_ptr e) {
    if (!failure) failure = e;
    s.BeginStop(false);
    s.UserDone();
  };
  s.started = Clock::now();
  s.deadline.expires_after(s.options.duration);
  s.deadline.async_wait([&s](boost::system::error_code ec) {
    if (!ec) s.BeginStop(false);
  });
  bool open = s.config.model == config::LoadModel::kOpen;
  s.active = s.config.users;
  for (int id = 0; id < s.config.users; ++id) {
    Spawn(engine.io, open ? s.OpenWorker(id) : s.ClosedUser(id), "virtual user", on_error);
  }
  if (open) Spawn(engine.io, s.Arrivals(), "arrivals");
  Spawn(engine.io, s.Progress(), "progress");
  engine.io.run();
  if (failure) std::rethrow_exception(failure);
  Report report = s.Build();
  if (s.options.check_lost_updates && CustomKindsRun(s.config)) {
    report.lost_check.skipped = "custom kinds ran";
  } else if (s.options.check_lost_updates) {
    report.lost_check = s.CheckLostUpdates();
  }
  return report;
}

LostUpdateCheck Simulator::State::CheckLostUpdates() {
  LostUpdateCheck check;
  auto conn = db::Connect(conninfo, config.application_name);
  pqxx::read_transaction tx(*conn);
  std::string table = tx.quote_name(target.schema) + "." + tx.quote_name(target.table);
  std::string key = tx.quote_name(target.key_column);
  auto rows =
      tx.exec_params("SELECT " + key + ", " + tx.quote_name(config.value_column) + " FROM " +
                         table + " WHERE " + key + " = ANY($1::" + engine.key_type + "[])",
                     ArrayLiteral(engine.keys));
  std::unordered_map<std::string, long long> now;
  for (const auto& row : rows) now[row[0].as<std::string>()] = row[1].as<long long>(0);
  check.performed = true;
  for (size_t i = 0; i < engine.keys.size(); ++i) {
    if (engine.in_doubt[i]) {
      ++check.keys_in_doubt;
      continue;
    }
    auto found = now.find(engine.keys[i]);
    long long actual = found == now.end() ? initial_values[i] : found->second;
    ++check.keys_checked;
    check.expected_change += engine.expected_delta[i];
    check.actual_change += actual - initial_values[i];
    long long gap = std::llabs(initial_values[i] + engine.expected_delta[i] - actual);
    if (gap != 0) ++check.keys_mismatched;
    check.lost += gap;
  }
  return check;
}

Report Simulator::State::Build() const {
  Report r;
  r.model = config.model;
  r.users = config.users;
  r.rate = config.rate;
  r.pool_size = config.pool_size;
  r.seed = config.seed;
  r.interrupted = interrupted;
  r.elapsed_seconds = std::chrono::duration<double>(finished - started).count();
  auto weights = Weights(config);
  const Stats& stats = engine.stats;
  for (size_t k = 0; k < stats.kinds(); ++k) {
    const KindStats& ks = stats.kind(k);
    KindReport kr;
    kr.kind = KindNameOf(config, k);
    kr.weight = weights[k];
    kr.transactions = ks.total();
    for (int o = 0; o < kOutcomeCount; ++o) {
      long long n = ks.outcomes[static_cast<size_t>(o)];
      if (n == 0) continue;
      kr.outcomes[OutcomeName(static_cast<Outcome>(o))] = n;
      r.outcomes[OutcomeName(static_cast<Outcome>(o))] += n;
    }
    kr.other_sqlstates = ks.other_sqlstates;
    kr.conflicts = ks.conflicts;
    kr.retried = ks.retried;
    kr.renewals = ks.renewals;
    kr.latency = Figures(ks.latency);
    r.transactions += kr.transactions;
    r.kinds.push_back(std::move(kr));
  }
  r.throughput =
      r.elapsed_seconds > 0 ? static_cast<double>(r.transactions) / r.elapsed_seconds : 0;
  r.latency = Figures(stats.all);
  r.pool_wait = Figures(stats.pool_wait);
  r.schedule_lag = Figures(stats.schedule_lag);
  r.late = stats.late;
  r.latency_limit = config.latency_limit;
  r.reconnects = stats.reconnects;
  return r;
}

void Simulator::Stop() {
  State* state = state_.get();
  asio::post(state->engine.io, [state] { state->BeginStop(true); });
}

}  // namespace coexist::online_sim
