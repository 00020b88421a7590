#include "daemon/daemon_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <chrono>

#include "common/error.h"
#include "dashboard/server.h"

namespace coexist::daemon {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

struct DaemonMetrics::Impl {
  explicit Impl(const std::string& job_name)
      : job(job_name),
        registry(std::make_shared<prometheus::Registry>()),
        runs(BuildCounter()
                 .Name("coexist_daemon_runs_total")
                 .Help("Runs the daemon started, by outcome (succeeded, incomplete, failed, busy).")
                 .Register(*registry)),
        items(BuildCounter()
                  .Name("coexist_daemon_items_total")
                  .Help("Items the daemon's runs settled, by outcome (done, deferred, dead).")
                  .Register(*registry)),
        deferrals(BuildCounter()
                      .Name("coexist_daemon_deferrals_total")
                      .Help("Items the daemon's runs deferred, by reason.")
                      .Register(*registry)),
        revocations(BuildCounter()
                        .Name("coexist_daemon_revocations_total")
                        .Help("Edit locks the daemon's runs revoked.")
                        .Register(*registry)
                        .Add({{"job", job}})),
        escalations(BuildCounter()
                        .Name("coexist_daemon_escalations_total")
                        .Help("Items the daemon's runs escalated (skip_locked).")
                        .Register(*registry)
                        .Add({{"job", job}})),
        reloads(BuildCounter()
                    .Name("coexist_daemon_reloads_total")
                    .Help("Configuration reloads on SIGHUP, by result (applied, rejected).")
                    .Register(*registry)),
        last_success(BuildGauge()
                         .Name("coexist_daemon_last_success_timestamp_seconds")
                         .Help("When the daemon's last run that worked ended (0: none yet).")
                         .Register(*registry)
                         .Add({{"job", job}})),
        connected(BuildGauge()
                      .Name("coexist_daemon_database_connected")
                      .Help("1 while the daemon is connected to the database, else 0.")
                      .Register(*registry)
                      .Add({{"job", job}})),
        queued(BuildGauge()
                   .Name("coexist_daemon_queued_items")
                   .Help("Items of the job waiting (queued) at the daemon's last look.")
                   .Register(*registry)
                   .Add({{"job", job}})) {
    // Every outcome shows from the start, at 0, so rate() works at once.
    for (const char* outcome : {"succeeded", "incomplete", "failed", "busy"}) Runs(outcome);
    for (const char* outcome : {"done", "deferred", "dead"}) Items(outcome);
    for (const char* result : {"applied", "rejected"})
      reloads.Add({{"job", job}, {"result", result}});
  }

  prometheus::Counter& Runs(const std::string& outcome) {
    return runs.Add({{"job", job}, {"outcome", outcome}});
  }
  prometheus::Counter& Items(const std::string& outcome) {
    return items.Add({{"job", job}, {"outcome", outcome}});
  }

  std::string job;
  std::shared_ptr<prometheus::Registry> registry;
  prometheus::Family<prometheus::Counter>& runs;
  prometheus::Family<prometheus::Counter>& items;
  prometheus::Family<prometheus::Counter>& deferrals;
  prometheus::Counter& revocations;
  prometheus::Counter& escalations;
  prometheus::Family<prometheus::Counter>& reloads;
  prometheus::Gauge& last_success;
  prometheus::Gauge& connected;
  prometheus::Gauge& queued;
  std::unique_ptr<prometheus::Exposer> exposer;
  std::unique_ptr<dashboard::DashboardServer> dashboard;
};

DaemonMetrics::DaemonMetrics(const std::string& job, const config::MetricsConfig& metrics,
                             const std::string& conninfo)
    : impl_(std::make_unique<Impl>(job)) {
  const std::string& listen = metrics.listen;
  if (listen.empty()) return;
  if (metrics.dashboard) {
    // One server for both: the page and /metrics on the one port.
    dashboard::DashboardOptions options;
    options.listen = listen;
    options.conninfo = conninfo;
    if (!metrics.dashboard_token_file.empty()) {
      options.control_token = dashboard::ReadControlToken(metrics.dashboard_token_file);
    }
    options.metrics = [registry = impl_->registry] {
      return prometheus::TextSerializer().Serialize(registry->Collect());
    };
    impl_->dashboard = std::make_unique<dashboard::DashboardServer>(options);
    return;
  }
  try {
    impl_->exposer = std::make_unique<prometheus::Exposer>(listen, 2);
  } catch (const std::exception& e) {
    throw UnavailableError("cannot serve /metrics on " + listen + ": " + e.what(),
                           "is the port taken? change metrics.listen.");
  }
  impl_->exposer->RegisterCollectable(impl_->registry);
}

DaemonMetrics::~DaemonMetrics() = default;

int DaemonMetrics::port() const {
  if (impl_->dashboard) return impl_->dashboard->port();
  if (!impl_->exposer) return 0;
  auto ports = impl_->exposer->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void DaemonMetrics::RecordRun(const batch::RunSummary& summary) {
  impl_->Runs(summary.outcome).Increment();
  impl_->Items("done").Increment(static_cast<double>(summary.counts.done));
  impl_->Items("deferred").Increment(static_cast<double>(summary.counts.deferred));
  impl_->Items("dead").Increment(static_cast<double>(summary.counts.dead));
  for (const auto& [reason, n] : summary.counts.deferrals_by_reason) {
    impl_->deferrals.Add({{"job", impl_->job}, {"reason", reason}})
        .Increment(static_cast<double>(n));
  }
  impl_->revocations.Increment(static_cast<double>(summary.counts.revoked));
  impl_->escalations.Increment(static_cast<double>(summary.counts.escalated));
  impl_->queued.Set(static_cast<double>(summary.queued_left));
  if (summary.outcome != "failed") {
    impl_->last_success.Set(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  }
}

void DaemonMetrics::RecordRunWithoutSummary(const std::string& outcome) {
  impl_->Runs(outcome).Increment();
}

void DaemonMetrics::SetConnected(bool connected) { impl_->connected.Set(connected ? 1 : 0); }

void DaemonMetrics::SetQueued(long long queued) { impl_->queued.Set(static_cast<double>(queued)); }

void DaemonMetrics::RecordReload(bool ok) {
  impl_->reloads.Add({{"job", impl_->job}, {"result", ok ? "applied" : "rejected"}}).Increment();
}

}  // namespace coexist::daemon
