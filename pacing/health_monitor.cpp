#include "pacing/health_monitor.h"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>

#include "common/log.h"
#include "db/connection.h"
#include "schema/events.h"

namespace coexist::pacing {
namespace {

using std::chrono::milliseconds;

// Sessions of this database only: a shared cluster's other databases are
// someone else's load. The monitor's own backend never counts.
constexpr const char* kReadHealthSql = R"(
SELECT (SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()
           AND wait_event_type = 'Lock'),
       (SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()
           AND state = 'active'),
       (SELECT count(*) FROM pg_stat_replication),
       (SELECT coalesce(round(extract(epoch FROM max(replay_lag)) * 1000), 0)::bigint
          FROM pg_stat_replication),
       (SELECT count(*) FROM pg_stat_progress_vacuum WHERE relid = $1::oid))";

}  // namespace

struct HealthMonitor::Impl {
  HealthMonitorOptions options;
  std::unique_ptr<pqxx::connection> conn;
  long long target_oid = 0;  // 0: the target table does not exist (yet)
  milliseconds batch_lock_wait{0};
  milliseconds statement_latency{0};

  pqxx::connection& Conn() {
    if (conn && conn->is_open()) return *conn;
    conn = db::Connect(options.conninfo, options.application_name);
    pqxx::nontransaction tx(*conn);
    tx.exec0("SET statement_timeout = " + std::to_string(options.statement_timeout.count()));
    // The target's oid, for the vacuum signal and events.target.
    auto row = tx.exec_params1(
        "SELECT coalesce(to_regclass(format('%I.%I', $1::text, $2::text))"
        "::oid, 0)::bigint",
        options.target.schema, options.target.table);
    target_oid = row[0].as<long long>();
    return *conn;
  }

  // Runs one statement, reopening the connection once when it was lost.
  template <typename F>
  auto WithRetry(F&& work) {
    try {
      return work(Conn());
    } catch (const pqxx::broken_connection&) {
      spdlog::warn("pacing monitor reconnecting");
      conn.reset();
      return work(Conn());
    }
  }

  std::optional<double> ThrottleQuery() {
    if (options.throttle_query.empty()) return std::nullopt;
    try {
      return WithRetry([&](pqxx::connection& c) {
        pqxx::nontransaction tx(c);
        auto result = tx.exec(options.throttle_query);
        if (result.empty() || result[0].empty() || result[0][0].is_null()) return 0.0;
        return result[0][0].as<double>();
      });
    } catch (const pqxx::broken_connection&) {
      throw;
    } catch (const std::exception& e) {
      // Fail safe: a broken throttle query holds the batch until it is fixed.
      spdlog::warn("throttle query failed error={}", log::Value(e.what()));
      return 1.0;
    }
  }
};

HealthMonitor::HealthMonitor(HealthMonitorOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->Conn();
}

HealthMonitor::~HealthMonitor() = default;

Signals HealthMonitor::Read() {
  Signals s;
  impl_->WithRetry([&](pqxx::connection& c) {
    pqxx::nontransaction tx(c);
    auto row = tx.exec_params1(kReadHealthSql, impl_->target_oid);
    s.lock_waiters = row[0].as<int>();
    s.active_sessions = row[1].as<int>();
    s.replicas = row[2].as<int>();
    s.replication_lag = milliseconds(row[3].as<long long>());
    s.vacuum = row[4].as<int>();
    return 0;
  });
  s.batch_lock_wait = impl_->batch_lock_wait;
  s.statement_latency = impl_->statement_latency;
  s.throttle_query = impl_->ThrottleQuery();
  return s;
}

void HealthMonitor::ReportBatch(milliseconds lock_wait, milliseconds latency) {
  impl_->batch_lock_wait = lock_wait;
  impl_->statement_latency = latency;
}

void HealthMonitor::RecordEvent(EventKind kind, const std::string& job,
                                std::optional<long long> run_id, const std::string& details_json) {
  impl_->WithRetry([&](pqxx::connection& c) {
    pqxx::nontransaction tx(c);
    db::RecordEvent(
        tx, {.kind = kind,
             .job = job,
             .run_id = run_id,
             .target = impl_->target_oid == 0 ? std::nullopt
                                              : std::optional(std::to_string(impl_->target_oid)),
             .actor = "pacing",
             .details_json = details_json});
    return 0;
  });
}

}  // namespace coexist::pacing
