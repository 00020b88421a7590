#include "batch/runner.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <thread>

#include "batch/check.h"
#include "batch/guard.h"
#include "batch/operation.h"
#include "batch/queue_sql.h"
#include "batch/worker.h"
#include "common/log.h"
#include "config/config_error.h"
#include "config/duration.h"
#include "db/connection.h"
#include "db/migrations.h"
#include "pacing/pacer.h"
#include "policies/policy.h"

namespace coexist::batch {
namespace {

using Clock = std::chrono::steady_clock;

// Exit 4 for a run of the job at work; 5 when the holder looks stuck.
JobBusyError BusyError(const config::Config& config, const std::optional<JobHolder>& holder) {
  std::string job = "job " + config.batch.job;
  if (!holder) {
    return JobBusyError(job + " was busy a moment ago",
                        "this run did nothing; the next scheduled run goes ahead.");
  }
  if (!holder->stuck) {
    return JobBusyError(job + " is already running: held by " + holder->description,
                        "this run did nothing and claimed nothing; the next scheduled run "
                        "picks up what is left.");
  }
  std::string limit = config::FormatDuration(config.batch.busy_timeout);
  if (holder->run_id == 0) {
    return JobBusyError(job + "'s lock is held by " + holder->description,
                        "no run of the job can start while it holds the lock (for longer than "
                        "batch.busy_timeout, " +
                            limit + "); ask its owner, or end it: SELECT pg_terminate_backend(" +
                            std::to_string(holder->pid) + ");",
                        ExitCode::kJobStuck);
  }
  return JobBusyError(job + " is held by a run that stopped beating: " + holder->description,
                      "its heartbeat is older than batch.busy_timeout (" + limit +
                          "); if its process hangs, kill it, or end its session: SELECT "
                          "pg_terminate_backend(" +
                          std::to_string(holder->pid) + ");",
                      ExitCode::kJobStuck);
}

std::string Outcome(const RunSummary& s) {
  if (s.deferred > 0 || s.dead > 0) return "incomplete";
  if (s.stop_reason != "drained" && s.queued_left > 0) return "incomplete";
  return "succeeded";
}

void Snapshot(const Counters& c, RunSummary& s) {
  s.claimed = c.claimed;
  s.done = c.done;
  s.deferred = c.deferred;
  s.dead = c.dead;
  s.escalated = c.escalated;
  s.revoked = c.revoked;
  s.signalled = c.signalled;
  s.deferrals_by_reason = c.DeferralsByReason();
}

}  // namespace

namespace {

// What dead runs of the job left, cleared in `tx` (the caller holds the
// job's lock). Logged once `tx` has committed: LogSweep.
SweepResult ClearDeadRuns(pqxx::transaction_base& tx, db::QueueStore& queue, QueueSql& sql) {
  SweepResult result;
  result.abandoned = queue.AbandonStaleRuns(tx);
  result.handed_back = sql.HandBackOrphaned(tx, queue.DeleteOrphanedTakeovers(tx));
  return result;
}

void LogSweep(const SweepResult& result, const std::string& job) {
  for (long long id : result.abandoned) {
    spdlog::warn("stale run abandoned run_id={} job={}", id, job);
  }
  if (result.handed_back > 0) spdlog::warn("records handed back count={}", result.handed_back);
}

}  // namespace

SweepResult SweepDeadRuns(const std::string& conninfo, const config::Config& config) {
  auto control = db::Connect(conninfo, config.database.application_name);
  CheckConfig(*control, config);
  QueueSql sql(*control, config);
  db::QueueStore queue(*control, QueueJobOf(config, sql.target()));
  {
    // Session-level, like a run's: released when `control` closes.
    pqxx::nontransaction tx(*control);
    if (!queue.TryLockJob(tx)) throw BusyError(config, queue.FindJobHolder(tx));
  }
  pqxx::work tx(*control);
  SweepResult result = ClearDeadRuns(tx, queue, sql);
  tx.commit();
  LogSweep(result, config.batch.job);
  return result;
}

RunSummary Run(const std::string& conninfo, const config::Config& config,
               const RunOptions& options) {
  auto started = Clock::now();
  auto policy = policies::Create(config.policy);
  auto control = db::Connect(conninfo, config.database.application_name);
  // The schema first (the operation may call coexist's functions), then
  // the check, then the triggers on the target: a configuration the
  // database refuses installs nothing on the user's table.
  if (options.install) db::InstallMigrations(*control);
  CheckConfig(*control, config);
  if (options.install) InstallGuard(*control, config);
  QueueSql sql(*control, config);
  db::QueueStore queue(*control, QueueJobOf(config, sql.target()));
  {
    // Session-level: held until `control` closes, however the run ends.
    pqxx::nontransaction tx(*control);
    if (!queue.TryLockJob(tx)) throw BusyError(config, queue.FindJobHolder(tx));
  }

  // Before the runs row: a control socket already in use ends the run
  // here, with nothing to clean up.
  pacing::Pacer pacer(pacing::PacerOptionsFrom(config, conninfo));

  RunSummary summary;
  summary.job = config.batch.job;
  summary.policy = policy->Name();
  long long total = 0;  // queued when the run started: `ctl status`'s ETA
  {
    pqxx::work tx(*control);
    SweepResult swept = ClearDeadRuns(tx, queue, sql);
    total = queue.CountQueued(tx);
    nlohmann::json details = {{"workers", config.batch.workers},
                              {"chunk_size", config.batch.chunk_size},
                              {"adaptive", config.pacing.adaptive},
                              {"chunk_time_ms", config.pacing.chunk_time.count()}};
    summary.run_id = queue.StartRun(tx, policy->Name(), details.dump());
    tx.commit();
    summary.abandoned_runs = static_cast<long long>(swept.abandoned.size());
    LogSweep(swept, config.batch.job);
  }
  {
    pqxx::nontransaction tx(*control);
    queue.LockRun(tx, summary.run_id);  // lives as long as this connection
  }
  pacer.SetRunId(summary.run_id);
  spdlog::info("run started run_id={} job={} policy={} workers={} chunk_size={}", summary.run_id,
               config.batch.job, policy->Name(), config.batch.workers, config.batch.chunk_size);

  Counters counters;
  KeysInFlight keys;
  std::atomic<bool> workers_stop{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  bool control_lost = false;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < config.batch.workers; ++i) {
    workers.push_back(std::make_unique<Worker>(i, conninfo, config, *policy, summary.run_id,
                                               counters, workers_stop, pacer, keys));
  }
  std::atomic<int> running{config.batch.workers};
  {
    std::vector<std::jthread> threads;
    for (auto& worker : workers) {
      threads.emplace_back([&, w = worker.get()] {
        try {
          w->Run();
        } catch (...) {
          std::lock_guard lock(error_mutex);
          if (!error) error = std::current_exception();
          workers_stop = true;  // the others finish their chunk and stop
        }
        --running;
      });
    }
    // The control thread: heartbeat, counts and progress once a second, and
    // the stop flag (which also wakes workers held by a pause or throttle).
    // The control connection holds the job's and the run's locks: when it
    // fails, another run may take the job, so the workers stop at once (a
    // chunk in flight commits or rolls back, none starts) and the run fails.
    auto next = Clock::now();
    bool pacer_stopped = false;
    while (running > 0) {
      if (options.stop != nullptr && *options.stop) workers_stop = true;
      if (workers_stop && !pacer_stopped) {
        pacer.RequestStop();
        pacer_stopped = true;
      }
      if (Clock::now() >= next && !control_lost) {
        double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
        pacer.PublishStatus(counters.done, total, elapsed > 0 ? counters.done / elapsed : 0);
        try {
          pqxx::work tx(*control);
          queue.HeartbeatRun(tx, summary.run_id, counters.claimed, counters.done, counters.deferred,
                             counters.dead);
          tx.commit();
        } catch (const std::exception& e) {
          spdlog::error("control connection failed, stopping the workers run_id={} error={}",
                        summary.run_id, log::Value(e.what()));
          std::lock_guard lock(error_mutex);
          error = std::current_exception();  // the cause, not a worker's later broken chunk
          control_lost = true;
          workers_stop = true;
        }
        next = Clock::now() + std::chrono::seconds(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // The runs row cannot be written without the control connection; the next
  // run marks it abandoned (its lock went with the connection).
  if (control_lost) std::rethrow_exception(error);
  Snapshot(counters, summary);
  summary.stop_reason = "drained";
  for (const auto& w : workers) {
    if (!w->stop_reason().empty()) summary.stop_reason = w->stop_reason();
  }
  summary.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  summary.items_per_second = summary.seconds > 0 ? summary.done / summary.seconds : 0;
  summary.latency = pacer.Latency();
  {
    pqxx::work tx(*control);
    summary.queued_left = queue.CountQueued(tx);
    summary.outcome = error ? "failed" : Outcome(summary);
    queue.FinishRun(tx, summary.run_id, summary.outcome, summary.claimed, summary.done,
                    summary.deferred, summary.dead, SummaryJson(summary));
    sql.HandBackOrphaned(tx, queue.DeleteOrphanedTakeovers(
                                 tx));  // a failed worker's takeovers, now that the run has ended
    if (summary.stop_reason == "outside_window" || summary.stop_reason == "drain_margin") {
      queue.AddEvent(tx, "claim_refused", summary.run_id,
                     nlohmann::json{{"reason", summary.stop_reason}}.dump());
    }
    tx.commit();
  }
  if (error) std::rethrow_exception(error);
  spdlog::info("run finished run_id={} outcome={} done={} deferred={} dead={} queued_left={}",
               summary.run_id, summary.outcome, summary.done, summary.deferred, summary.dead,
               summary.queued_left);
  return summary;
}

ExitCode ExitCodeOf(const RunSummary& summary) {
  if (summary.dead > 0) return ExitCode::kItemsDead;
  if (summary.deferred > 0) return ExitCode::kItemsDeferred;
  // Claiming stopped early (window closed, drain margin, signal, ctl stop,
  // stop file, critical load) with items still queued: not a full success.
  if (summary.stop_reason != "drained" && summary.queued_left > 0) return ExitCode::kItemsDeferred;
  return ExitCode::kOk;
}

std::string SummaryJson(const RunSummary& s) {
  nlohmann::json j = {{"run_id", s.run_id},
                      {"job", s.job},
                      {"policy", s.policy},
                      {"outcome", s.outcome},
                      {"stop_reason", s.stop_reason},
                      {"claimed", s.claimed},
                      {"done", s.done},
                      {"deferred", s.deferred},
                      {"dead", s.dead},
                      {"escalated", s.escalated},
                      {"revoked", s.revoked},
                      {"signalled", s.signalled},
                      {"deferrals_by_reason", s.deferrals_by_reason},
                      {"queued_left", s.queued_left},
                      {"abandoned_runs", s.abandoned_runs},
                      {"seconds", s.seconds},
                      {"items_per_second", s.items_per_second}};
  if (s.latency) {
    j["online_latency"] = {{"on", s.latency->on},
                           {"objective", s.latency->objective},
                           {"baseline_ms", s.latency->baseline_ms},
                           {"slowdowns", s.latency->slowdowns},
                           {"seconds_over", s.latency->seconds_over}};
    if (!s.latency->on) j["online_latency"]["reason"] = s.latency->off_reason;
  }
  return j.dump();
}

}  // namespace coexist::batch
