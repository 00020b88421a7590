#include "daemon/daemon.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <pqxx/except>
#include <thread>

#include "batch/runner.h"
#include "common/log.h"
#include "common/signals.h"
#include "config_core/config_error.h"
#include "config_core/duration.h"
#include "daemon/daemon_metrics.h"
#include "daemon/run_report.h"
#include "daemon/systemd_notifier.h"
#include "daemon/work_waiter.h"
#include "db/connection.h"
#include "db/failure.h"
#include "policies/policy.h"
#include "schema/queue_store_ops.h"

namespace coexist::daemon {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The longest a daemon holds its runs after one stopped on items failing
// in a row: long enough not to grind through the queue overnight, short
// enough that a fixed payload or table is picked up within the hour.
constexpr milliseconds kLongestFailingHold = std::chrono::hours(1);

// The database went away or cannot be reached: logged as unavailable, not
// as a failed run. A commit in doubt is one too: the queue's states tell,
// next run.
bool IsConnectionLoss(const std::exception& e) {
  auto kind = db::Classify(e);
  return kind == db::FailureKind::kConnectionLost || kind == db::FailureKind::kInDoubt;
}

struct Totals {
  long long runs = 0;
  batch::RunCounts counts;
  long long queued = 0;
};

class Daemon {
 public:
  Daemon(const DaemonSettings& settings, config::Config config)
      : settings_(settings),
        config_(std::move(config)),
        policy_(policies::Create(config_.policy)),
        install_pending_(settings.install),
        backoff_(config_.daemon.reconnect_initial),
        metrics_(config_.batch.job, config_.metrics, settings.conninfo) {}

  int Run();

 private:
  void OnSignal(int signo);
  void Reload();
  void OnBusy(const batch::JobBusyError& e);
  void RestorePrevious(const config::ConfigError& e);
  void Connect();
  void Cycle();
  void RunOnce();
  bool JobLockStaysHeld();
  void Recover(const std::exception& e);
  void Wait(milliseconds timeout);
  void PurgeIfDue();
  void Status(const std::string& state, const batch::RunProgress& live = {});

  DaemonSettings settings_;
  config::Config config_;
  std::optional<config::Config> previous_;  // before the last reload, until a run accepts it
  std::unique_ptr<policies::Policy> policy_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> reload_{false};
  bool ready_ = false;
  bool run_pending_ = true;  // run once at start and after a reload, work or not
  bool install_pending_;
  bool refused_logged_ = false;
  bool busy_logged_ = false;
  bool stuck_logged_ = false;  // the busy spell went past batch.busy_timeout
  // A run stopped on batch.max_consecutive_failures: no run before this
  // (each would charge more items for the same fault); the wait doubles
  // from poll_interval up to kLongestFailingHold, and a reload ends it.
  Clock::time_point hold_runs_until_{};
  milliseconds failing_hold_{0};
  Clock::time_point next_purge_{};  // retention: at start, then every retention.interval
  milliseconds backoff_;
  Totals totals_;
  WorkWaiter waiter_;
  SystemdNotifier notifier_;
  DaemonMetrics metrics_;
};

int Daemon::Run() {
  signals::Handler handler([this](int signo) { OnSignal(signo); });
  if (metrics_.port() > 0) {
    spdlog::info("metrics endpoint listening address={} port={} dashboard={}",
                 config_.metrics.listen, metrics_.port(),
                 !config_.metrics.dashboard                     ? "off"
                 : config_.metrics.dashboard_token_file.empty() ? "read-only"
                                                                : "with pause and resume");
  }
  spdlog::info("daemon started job={} policy={} poll_interval={} pid={}", config_.batch.job,
               policy_->Name(), config::FormatDuration(config_.daemon.poll_interval), getpid());
  bool wait_first = false;  // wait for work before the next look at the queue
  while (!stop_) {
    if (reload_.exchange(false)) Reload();
    try {
      if (wait_first) {
        // Inside the try: a connection that breaks while idle is recovered.
        wait_first = false;
        Wait(config_.daemon.poll_interval);
        continue;  // a signal may have woken it: stop and reload come first
      }
      Connect();
      Cycle();
      PurgeIfDue();
      wait_first = true;
    } catch (const batch::JobBusyError& e) {
      OnBusy(e);
      wait_first = true;
    } catch (const config::ConfigError& e) {
      if (!previous_) throw;  // the starting configuration: exit 78
      RestorePrevious(e);
    } catch (const db::ConnectionSettingsError& e) {
      // sslmode=bogus, PGCONNECT_TIMEOUT=abc: no retry can pass.
      spdlog::error("database connection settings are wrong, daemon stopping error={}",
                    log::Value(e.what()));
      notifier_.Stopping();
      throw;  // exit 78
    } catch (const std::exception& e) {
      Recover(e);
    }
  }
  spdlog::info("daemon stopped runs={} done={} deferred={} dead={}", totals_.runs,
               totals_.counts.done, totals_.counts.deferred, totals_.counts.dead);
  return 0;
}

// Once per busy spell: a standby daemon on a second host waits quietly.
// The holder is named (pid, role, application_name; the run it is, if
// one). Once it has held the job past batch.busy_timeout without being a
// live run (kJobStuck: a squatting session, a run that stopped beating),
// once more at error level, with what ends it, and in STATUS=.
void Daemon::OnBusy(const batch::JobBusyError& e) {
  bool stuck = e.code() == ExitCode::kJobStuck;
  if (stuck && !stuck_logged_) {
    spdlog::error(
        "job stuck: its lock is held past batch.busy_timeout by no live run, no run can start "
        "job={} busy_timeout={} holder={} hint={}",
        config_.batch.job, config::FormatDuration(config_.batch.busy_timeout), log::Value(e.what()),
        log::Value(e.hint()));
    stuck_logged_ = true;
    busy_logged_ = true;
  } else if (!busy_logged_) {
    spdlog::warn("job busy, waiting job={} poll_interval={} holder={}", config_.batch.job,
                 config::FormatDuration(config_.daemon.poll_interval), log::Value(e.what()));
    busy_logged_ = true;
  }
  metrics_.RecordRunWithoutSummary("busy");
  Status(stuck ? "stuck: the job's lock is held past busy_timeout by no live run"
               : "waiting: another run holds the job");
}

// A reloaded configuration the database rejected (bad operation SQL).
void Daemon::RestorePrevious(const config::ConfigError& e) {
  spdlog::error("reloaded configuration rejected by the database, previous one restored error={}",
                log::Value(e.what()));
  metrics_.RecordReload(false);
  config_ = std::move(*previous_);
  previous_.reset();
  db::WatchForStalls(config_.database.stall_timeout);
  policy_ = policies::Create(config_.policy);
  install_pending_ = settings_.install;
}

// On the signal watcher thread: set a flag, wake the main thread, never block.
void Daemon::OnSignal(int signo) {
  if (signo == SIGHUP) {
    reload_ = true;
  } else {
    if (!stop_.exchange(true)) {
      spdlog::info("daemon stopping, draining signal={}", signo);
      notifier_.Stopping();
    }
  }
  waiter_.Wake();
}

void Daemon::Reload() {
  config::Config fresh;
  try {
    fresh = config::LoadFile(settings_.config_path);
  } catch (const config::ConfigError& e) {
    spdlog::error("configuration reload rejected, old configuration kept error={}",
                  log::Value(e.what()));
    metrics_.RecordReload(false);
    return;
  }
  for (const auto& [changed, key] :
       {std::pair{fresh.batch.job != config_.batch.job, "batch.job"},
        {fresh.database.url != config_.database.url, "database.url"},
        {fresh.metrics.listen != config_.metrics.listen, "metrics.listen"}}) {
    if (changed) {
      spdlog::error(
          "configuration reload rejected, old configuration kept file={} key={} "
          "error={}",
          settings_.config_path, key, log::Value("changing it needs a restart"));
      metrics_.RecordReload(false);
      return;
    }
  }
  previous_ = std::move(config_);
  config_ = std::move(fresh);
  db::WatchForStalls(config_.database.stall_timeout);
  policy_ = policies::Create(config_.policy);
  run_pending_ = true;  // the database checks the operation at once
  install_pending_ = settings_.install;
  hold_runs_until_ = {};  // the new configuration may have fixed the operation
  failing_hold_ = milliseconds(0);
  refused_logged_ = false;
  backoff_ = config_.daemon.reconnect_initial;
  metrics_.RecordReload(true);
  spdlog::info("configuration reloaded file={} policy={}", settings_.config_path, policy_->Name());
}

void Daemon::Connect() {
  if (waiter_.connected()) return;
  waiter_.Connect(settings_.conninfo, config_.database.application_name);
  metrics_.SetConnected(true);
  backoff_ = config_.daemon.reconnect_initial;
  spdlog::info("database connected job={}", config_.batch.job);
  if (!ready_) {
    ready_ = true;
    notifier_.Ready();
  }
}

// One look at the queue: run when there is claimable work and the policy
// lets the batch claim now. One run per wake, so items deferred by a run
// wait for the next notification or poll instead of spinning.
void Daemon::Cycle() {
  if (!run_pending_ && Clock::now() < hold_runs_until_) {
    auto left = std::chrono::duration_cast<milliseconds>(hold_runs_until_ - Clock::now());
    Status("holding after items failed in a row: next run in " + config::FormatDuration(left));
    return;
  }
  if (!run_pending_) {
    auto counts = waiter_.Counts(config_.batch.job);
    totals_.queued = counts.queued;
    metrics_.SetQueued(counts.queued);
    if (counts.queued + counts.deferred == 0) {
      Status("idle");
      return;
    }
    auto gate = policy_->MayClaim(std::chrono::system_clock::now());
    if (!gate.allowed) {
      if (!refused_logged_) {
        spdlog::info("claiming not allowed now, waiting reason={} queued={}", ToString(gate.reason),
                     counts.queued);
        refused_logged_ = true;
      }
      Status("waiting: " + std::string(ToString(gate.reason)));
      return;
    }
    refused_logged_ = false;
  }
  // Read from pg_locks, so a standby daemon does not connect, install and
  // start a run every poll only to be refused.
  // A shared run goes ahead beside other shared runs of the job.
  if (JobLockStaysHeld()) throw batch::DescribeBusyJob(settings_.conninfo, config_);
  busy_logged_ = false;  // a new spell, if any, is logged again
  stuck_logged_ = false;
  RunOnce();
}

// Right after this daemon's own run (woken again by an enqueue meanwhile)
// that run's lock could still show, and the daemon waited a whole
// poll_interval (seen once in daemon_test's log: "held by another session",
// then no holder): a lock released within batch::kJobLockSettle was a
// session on its way out.
bool Daemon::JobLockStaysHeld() {
  bool shared = config_.batch.runs == config::RunsMode::kShared;
  return batch::JobLockStaysHeld([&] { return waiter_.JobLockHeld(config_.batch.job, shared); },
                                 &stop_);
}

void Daemon::RunOnce() {
  Status("running");
  batch::RunOptions options;
  options.install = install_pending_;
  options.stop = &stop_;
  auto started = Clock::now();
  batch::RunSummary summary;
  try {
    if (notifier_.enabled()) {  // live counts for `systemctl status`
      options.on_progress = [this](const batch::RunProgress& live) { Status("running", live); };
    }
    summary = batch::Run(settings_.conninfo, config_, options);
  } catch (const batch::JobBusyError&) {
    throw;
  } catch (const config::ConfigError&) {
    throw;
  } catch (const std::exception&) {
    metrics_.RecordRunWithoutSummary("failed");
    WriteRunTextfileOrWarn(
        config_,
        FailedRunMetrics(config_, std::chrono::duration<double>(Clock::now() - started).count()));
    throw;
  }
  run_pending_ = false;
  install_pending_ = false;
  busy_logged_ = false;
  previous_.reset();  // the database accepted the reloaded configuration
  ++totals_.runs;
  totals_.counts += summary.counts;
  totals_.queued = summary.queued_left;
  metrics_.RecordRun(summary);
  WriteRunTextfileOrWarn(config_, MetricsOf(summary));
  if (summary.stop_reason == StopReason::kFailuresInARow) {
    failing_hold_ = failing_hold_.count() == 0
                        ? config_.daemon.poll_interval
                        : std::min<milliseconds>(failing_hold_ * 2, kLongestFailingHold);
    hold_runs_until_ = Clock::now() + failing_hold_;
    spdlog::error(
        "run stopped: items fail in a row, holding runs run_id={} hold={} (fix the operation or "
        "the payloads, then reload; `coexist queue retry --dead` first if any died)",
        summary.run_id, config::FormatDuration(failing_hold_));
  } else {
    failing_hold_ = milliseconds(0);
  }
  Status("idle");
}

// After an error: a lost database is retried with capped exponential
// backoff; anything else is logged and retried the same way, so a daemon
// never spins on a failure and never dies of a transient one.
void Daemon::Recover(const std::exception& e) {
  bool lost = IsConnectionLoss(e);
  waiter_.Disconnect();
  metrics_.SetConnected(false);
  if (lost) {
    spdlog::warn("database unavailable, retrying retry_in={} error={}",
                 config::FormatDuration(backoff_), log::Value(e.what()));
  } else {
    spdlog::error("daemon run failed, retrying retry_in={} error={}",
                  config::FormatDuration(backoff_), log::Value(e.what()));
  }
  Status("retrying in " + config::FormatDuration(backoff_) +
         (lost ? ": database unavailable" : ": run failed"));
  Wait(backoff_);
  backoff_ = std::min(backoff_ * 2, config_.daemon.reconnect_max);
}

void Daemon::Wait(milliseconds timeout) {
  auto why = waiter_.Wait(timeout, config_.batch.job);
  if (why == WorkWaiter::Reason::kNotified) {
    spdlog::debug("woken by enqueue job={}", config_.batch.job);
  }
}

// Retention (`retention:`), between runs: a purge that fails is logged and
// tried again next interval; it never stops the daemon.
void Daemon::PurgeIfDue() {
  if (Clock::now() < next_purge_) return;
  next_purge_ = Clock::now() + config_.retention.interval;
  const auto& r = config_.retention;
  try {
    auto conn = db::Connect(settings_.conninfo, config_.database.application_name);
    auto purged = db::PurgeOldRows(*conn, {r.done_items, r.events, r.runs},
                                   "daemon:" + config_.batch.job, &stop_);
    if (purged.done_items + purged.events + purged.runs > 0) {
      spdlog::info("old rows purged done_items={} events={} runs={}", purged.done_items,
                   purged.events, purged.runs);
    }
  } catch (const std::exception& e) {
    spdlog::warn("purge failed, retrying later retry_in={} error={}",
                 config::FormatDuration(r.interval), log::Value(e.what()));
  }
}

// Cumulative counts since start, plus those of the run in progress
// (`live`, from the run's progress callback on its control thread:
// totals_ do not change during a run).
void Daemon::Status(const std::string& state, const batch::RunProgress& live) {
  auto counts = totals_.counts;
  counts += live.counts;
  notifier_.Status(state + "; runs " + std::to_string(totals_.runs + (live.run_id > 0)) +
                   ", done " + std::to_string(counts.done) + ", deferred " +
                   std::to_string(counts.deferred) + ", dead " + std::to_string(counts.dead) +
                   ", queued " + std::to_string(totals_.queued));
}

}  // namespace

int RunDaemon(const DaemonSettings& settings, config::Config config) {
  Daemon daemon(settings, std::move(config));
  return daemon.Run();
}

}  // namespace coexist::daemon
