#include "online-sim/reserve.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <stdexcept>

#include "db/connection.h"
#include "online-sim/simulator.h"
#include "schema/migrations.h"

namespace coexist::online_sim {
namespace {

constexpr const char* kSchema = "coexist_reserve";
constexpr const char* kTable = "product";

// Seed 001's method names, and the simulator kind that does the same.
config::OnlineMix MixFor(const std::string& method) {
  config::OnlineMix mix{0, 0, 0, 0, 0, 0};
  if (method == "nolock") {
    mix.nolock = 1;
  } else if (method == "optimistic") {
    mix.optimistic_edit = 1;
  } else if (method == "pessimistic") {
    mix.pessimistic_edit = 1;
  } else if (method == "atomic") {
    mix.atomic_decrement = 1;
  } else {
    throw std::invalid_argument("unknown reserve method '" + method +
                                "' (use nolock, optimistic, pessimistic, atomic)");
  }
  return mix;
}

void CreateProducts(pqxx::connection_base& conn, int items, long long stock) {
  pqxx::work tx(conn);
  tx.exec(std::string("CREATE SCHEMA IF NOT EXISTS ") + kSchema);
  tx.exec(std::string("DROP TABLE IF EXISTS ") + kSchema + "." + kTable);
  tx.exec(std::string("CREATE TABLE ") + kSchema + "." + kTable +
          " (id bigint PRIMARY KEY, stock bigint NOT NULL, version bigint NOT NULL DEFAULT 0)");
  tx.exec_params(std::string("INSERT INTO ") + kSchema + "." + kTable +
                     " (id, stock) SELECT g, $2 FROM generate_series(1, $1) g",
                 items, stock);
  tx.exec_params("SELECT coexist.install_version_trigger($1::regclass, 'version')",
                 std::string(kSchema) + "." + kTable);
  tx.commit();
}

void DropProducts(pqxx::connection_base& conn) {
  pqxx::work tx(conn);
  // The version trigger's function lives in the coexist schema: named
  // before the table goes, dropped after.
  auto function =
      tx.exec_params("SELECT coexist.trigger_function_name('bump_version', to_regclass($1))",
                     std::string(kSchema) + "." + kTable);
  tx.exec(std::string("DROP SCHEMA IF EXISTS ") + kSchema + " CASCADE");
  if (!function[0][0].is_null()) {
    tx.exec("DROP FUNCTION IF EXISTS " + function[0][0].as<std::string>() + "()");
  }
  tx.commit();
}

}  // namespace

Reserve::Reserve(std::string conninfo, ReserveOptions options)
    : conninfo_(std::move(conninfo)), options_(std::move(options)) {
  for (const auto& method : options_.methods) MixFor(method);
}

Reserve::~Reserve() = default;

void Reserve::Stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
  if (current_ != nullptr) current_->Stop();
}

bool Reserve::stopped() const {
  std::lock_guard lock(mutex_);
  return stopped_;
}

ReserveRow Reserve::RunOne(int items, const std::string& method) {
  {
    auto conn = db::Connect(conninfo_, "coexist-reserve");
    CreateProducts(*conn, items, options_.initial_stock);
  }
  config::OnlineConfig config;
  config.model = config::LoadModel::kClosed;
  config.users = options_.clients;
  config.pool_size = options_.clients;  // one connection per client, as in the seed
  config.think_time = std::chrono::milliseconds(0);
  config.think_distribution = config::ThinkDistribution::kFixed;
  config.key_distribution = config::KeyDistribution::kUniform;
  config.records = items;
  config.mix = MixFor(method);
  config.max_retries = options_.max_retries;
  // The seed retries at once; a backoff would change its figures.
  config.backoff_base = config.backoff_cap = std::chrono::milliseconds(0);
  config.lock_mode = config::LockMode::kLockTimeout;
  config.lock_timeout = std::chrono::milliseconds(0);  // wait as long as it takes
  config.app_work = options_.app_work;
  config.atomic_delta = 1;
  config.atomic_floor = 0;
  config.application_name = "coexist-reserve";
  config.seed = options_.seed;
  config::TargetTable target{kSchema, kTable, "id", "version", std::nullopt};
  RunOptions run;
  run.duration = std::chrono::hours(1);
  run.transactions_per_user = options_.per_client;
  Simulator simulator(conninfo_, target, config, run);
  simulator.Prepare();
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return {};
    current_ = &simulator;
  }
  Report report = simulator.Run();
  {
    std::lock_guard lock(mutex_);
    current_ = nullptr;
  }
  ReserveRow row;
  row.items = items;
  row.method = method;
  auto count = [&report](const char* outcome) {
    auto it = report.outcomes.find(outcome);
    return it == report.outcomes.end() ? 0LL : it->second;
  };
  row.ok = count("ok");
  row.gaveup = count("gave_up");
  for (const auto& kind : report.kinds) row.conflicts += kind.conflicts;
  row.stock_decreased = -report.lost_check.actual_change;
  row.lost = row.ok - row.stock_decreased;
  row.seconds = report.elapsed_seconds;
  if (report.transactions != row.ok + row.gaveup) {
    spdlog::warn("reserve unexpected outcomes items={} method={} transactions={} ok={} gaveup={}",
                 items, method, report.transactions, row.ok, row.gaveup);
  }
  return row;
}

std::vector<ReserveRow> Reserve::Run() {
  {
    auto conn = db::Connect(conninfo_, "coexist-reserve");
    db::InstallMigrations(*conn);
  }
  std::vector<ReserveRow> rows;
  for (int items : options_.items) {
    for (const auto& method : options_.methods) {
      if (stopped()) break;
      ReserveRow row = RunOne(items, method);
      if (stopped()) break;  // a partial pair is not a result
      rows.push_back(row);
    }
  }
  auto conn = db::Connect(conninfo_, "coexist-reserve");
  DropProducts(*conn);
  return rows;
}

void PrintReserve(std::ostream& out, const std::vector<ReserveRow>& rows) {
  for (const auto& r : rows) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "items=%-4d %-12s ok=%-4lld gaveup=%-4lld conflicts=%-5lld "
                  "stock_decreased=%-4lld lost=%-4lld time=%.2fs\n",
                  r.items, r.method.c_str(), r.ok, r.gaveup, r.conflicts, r.stock_decreased, r.lost,
                  r.seconds);
    out << line;
  }
}

std::string ReserveJson(const std::vector<ReserveRow>& rows) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& r : rows) {
    array.push_back({{"items", r.items},
                     {"method", r.method},
                     {"ok", r.ok},
                     {"gaveup", r.gaveup},
                     {"conflicts", r.conflicts},
                     {"stock_decreased", r.stock_decreased},
                     {"lost", r.lost},
                     {"seconds", r.seconds}});
  }
  return array.dump(2);
}

}  // namespace coexist::online_sim
