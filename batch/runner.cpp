#include "batch/runner.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <thread>

#include "batch/budget.h"
#include "batch/check.h"
#include "batch/guard.h"
#include "batch/operation.h"
#include "batch/range_walk.h"
#include "batch/record_sql.h"
#include "batch/worker.h"
#include "batch/worker_session.h"
#include "common/log.h"
#include "config_core/config_error.h"
#include "config_core/duration.h"
#include "db/connection.h"
#include "pacing/pacer.h"
#include "policies/policy.h"
#include "schema/migrations.h"
#include "schema/range_store.h"

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
  if (!holder->stuck && config.batch.runs == config::RunsMode::kShared) {
    return JobBusyError(job + " has an exclusive run at work: held by " + holder->description,
                        "shared runs of a job work side by side, never beside an exclusive one: "
                        "give every run of the job batch.runs: shared, or let that one finish. "
                        "This run did nothing and claimed nothing.");
  }
  if (!holder->stuck) {
    return JobBusyError(job + " is already running: held by " + holder->description,
                        "this run did nothing and claimed nothing; the next scheduled run "
                        "picks up what is left (shared runs of a job, batch.runs: shared, work "
                        "side by side but never beside an exclusive one).");
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

// The run's own key is held by another session (it was tried for
// kJobLockSettle): exit 4, or 5 once that session has been connected
// longer than batch.busy_timeout. Logged here, as the daemon logs a busy
// error only once a spell.
JobBusyError RunLockBusyError(const config::Config& config, long long run_id,
                              const std::optional<JobHolder>& holder) {
  std::string key = "pg_advisory_lock(coexist.run_lock_class(), " + std::to_string(run_id) + ")";
  std::string who = holder ? holder->description : "a session that let go of it a moment ago";
  spdlog::log(holder && holder->stuck ? spdlog::level::err : spdlog::level::warn,
              "run lock held by another session, run not started job={} run_id={} holder={}",
              config.batch.job, run_id, log::Value(who));
  std::string hint =
      "this run did nothing and claimed nothing. No coexist session takes a run's key before "
      "that run does: ";
  hint += holder ? "ask the session's owner, or end it: SELECT pg_terminate_backend(" +
                       std::to_string(holder->pid) + ");"
                 : "run again.";
  hint += " The next run has another run id.";
  return JobBusyError("job " + config.batch.job + "'s run " + std::to_string(run_id) +
                          " cannot take its own lock, " + key + ": held by " + who,
                      hint, holder && holder->stuck ? ExitCode::kJobStuck : ExitCode::kJobBusy);
}

std::string Outcome(const RunSummary& s) {
  if (s.counts.deferred > 0 || s.counts.dead > 0) return "incomplete";
  if (s.range && !s.range->finished) return "incomplete";
  if (s.stop_reason != StopReason::kDrained && s.queued_left > 0) return "incomplete";
  return "succeeded";
}

// What dead runs of the job left, cleared in `tx` (the caller holds the
// job's lock). Logged once `tx` has committed: LogSweep.
SweepResult ClearDeadRuns(pqxx::transaction_base& tx, db::QueueStore& queue, RecordSql& sql) {
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

// The run's control connection and what is prepared on it. It holds the
// job's lock (session-level, taken by OpenJob) and the run's (BeginRun):
// both are released when it closes, however the run ends.
struct Control {
  std::unique_ptr<pqxx::connection> conn;
  std::optional<CheckedConfig> job;  // the configuration as checked, its policy
  std::unique_ptr<RecordSql> sql;
  std::unique_ptr<db::QueueStore> queue;
  bool installed = false;  // InstallGuard ran, the job's windows with it
};

// Step 1: connect, install when asked, check what only the database can
// see, take the job's lock. Throws JobBusyError before touching anything.
// The schema first (the operation may call coexist's functions), then the
// check, then the triggers on the target: a configuration the database
// refuses installs nothing on the user's table.
Control OpenJob(const std::string& conninfo, const config::Config& config, bool install) {
  Control c;
  c.conn = db::Connect(conninfo, config.database.application_name);
  if (install) db::InstallMigrations(*c.conn);
  c.job = CheckConfig(*c.conn, config);
  if (install) InstallGuard(*c.conn, *c.job);
  c.installed = install;
  const config::Config& checked = c.job->config();
  c.sql = std::make_unique<RecordSql>(*c.conn, checked);
  c.queue = std::make_unique<db::QueueStore>(*c.conn, QueueJobOf(checked, c.sql->target()));
  pqxx::nontransaction tx(*c.conn);
  if (JobLockStaysHeld([&] { return !c.queue->TryLockJob(tx); })) {
    throw BusyError(checked, c.queue->FindJobHolder(tx));
  }
  return c;
}

// Step 2: clear what dead runs left, insert the run's row and lock it.
// Fills summary.run_id and abandoned_runs; returns the job's queued items
// (`ctl status`'s ETA).
long long BeginRun(Control& c, RunSummary& summary, const std::atomic<bool>* stop,
                   RangeWalk* range) {
  const config::Config& config = c.job->config();
  const policies::Policy& policy = c.job->policy();
  long long queued = 0;
  {
    pqxx::work tx(*c.conn);
    SweepResult swept = ClearDeadRuns(tx, *c.queue, *c.sql);
    queued = c.queue->CountQueued(tx);
    // A range job goes on with its pass from the checkpoints, or starts the
    // next one; it commits with the runs row.
    if (range != nullptr) {
      PreparePass(tx, config, *c.sql, db::HasPendingItems(tx, config.batch.job), *range);
    }
    nlohmann::json details = {{"workers", config.batch.workers},
                              {"chunk_size", config.batch.chunk_size},
                              {"adaptive", config.pacing.adaptive},
                              {"chunk_time_ms", config.pacing.chunk_time.count()}};
    if (config.batch.max_duration) details["max_duration_ms"] = config.batch.max_duration->count();
    if (config.batch.max_items) details["max_items"] = *config.batch.max_items;
    if (config.batch.max_rate) details["max_rate"] = *config.batch.max_rate;
    // What `coexist jobs` and the dashboard hold the measured ratio against.
    if (config.pacing.online_latency) {
      details["online_latency_objective"] = config.pacing.online_latency->objective;
    }
    summary.run_id = c.queue->StartRun(tx, policy.Name(), details.dump());
    // Session-level, so it outlives this transaction and lives as long as
    // the connection. Taken before the row commits: a shared sibling's
    // sweep, which abandons a running run whose lock is free, never sees
    // this row without it. Tried, not waited for (a session squatting the
    // key would hang the run, deaf to SIGTERM): a holder is named and the
    // transaction, row and sweep with it, rolls back.
    if (JobLockStaysHeld([&] { return !c.queue->TryLockRun(tx, summary.run_id); }, stop)) {
      auto holder = c.queue->FindRunLockHolder(tx, summary.run_id);
      if (holder || !c.queue->TryLockRun(tx, summary.run_id)) {
        throw RunLockBusyError(config, summary.run_id, holder);
      }
    }
    // Windows a drained run released (release_when_done) hold again while
    // this run works: InstallGuard wrote them, or (rows only, no DDL) here.
    if (!c.installed && !policy.Windows().empty()) WriteWindows(tx, *c.job);
    tx.commit();
    summary.abandoned_runs = static_cast<long long>(swept.abandoned.size());
    LogSweep(swept, config.batch.job);
  }
  return queued;
}

// How the workers ended (step 3).
struct WorkEnd {
  RunCounts counts;
  StopReason stop_reason = StopReason::kDrained;
  std::exception_ptr error;   // the first worker's, or the control connection's
  bool control_lost = false;  // the runs row can no longer be written
};

// Step 3: the workers, each on its own thread and connection, and the
// control loop on this one until they have all stopped: heartbeat,
// progress and the pacer's status once a second, the stop flag and
// batch.max_duration (either also wakes workers held by a pause or
// throttle). The control connection
// holds the job's and the run's locks: when it fails, another run may take
// the job, so the workers stop at once (a chunk in flight commits or rolls
// back, none starts) and the run fails.
WorkEnd Work(Control& c, const std::string& conninfo, long long run_id, long long queued,
             pacing::Pacer& pacer, const RunOptions& options, Clock::time_point started,
             RangeWalk* range) {
  const config::Config& config = c.job->config();
  WorkEnd end;
  Counters counters;
  KeysInFlight keys;
  std::atomic<bool> workers_stop{false};
  std::mutex error_mutex;
  RunBudget budget(config.batch, started);
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < config.batch.workers; ++i) {
    workers.push_back(std::make_unique<Worker>(i, conninfo, config, c.job->policy(), run_id,
                                               counters, workers_stop, pacer, keys, budget));
    workers.back()->SetRange(range);
  }
  if (range != nullptr) range->walking = config.batch.workers;
  std::atomic<int> running{config.batch.workers};
  {
    std::vector<std::jthread> threads;
    for (auto& worker : workers) {
      threads.emplace_back([&, w = worker.get()] {
        try {
          w->Run();
        } catch (...) {
          std::lock_guard lock(error_mutex);
          if (!end.error) end.error = std::current_exception();
          workers_stop = true;  // the others finish their chunk and stop
        }
        --running;
      });
    }
    auto next = Clock::now();
    bool pacer_stopped = false;
    bool job_stop_seen = false;
    while (running > 0) {
      if (options.stop != nullptr && *options.stop) workers_stop = true;
      if (workers_stop && !pacer_stopped) {
        pacer.RequestStop();
        pacer_stopped = true;
      }
      // The workers see the deadline before each claim; a worker held by
      // a pause or throttle is woken by the pacer's stop.
      if (!pacer_stopped && budget.OutOfTime(Clock::now())) {
        pacer.RequestStop(StopReason::kMaxDuration);
        pacer_stopped = true;
      }
      if (Clock::now() >= next && !end.control_lost) {
        RunCounts now = counters.Snapshot();
        double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
        double rate = elapsed > 0 ? now.done / elapsed : 0;
        pacer.PublishStatus(now.done, queued, rate);
        if (options.on_progress) options.on_progress({run_id, now, queued, rate});
        try {
          pqxx::work tx(*c.conn);
          auto beat =
              c.queue->HeartbeatRun(tx, run_id, now.claimed, now.done, now.deferred, now.dead,
                                    pacer.OnlineLatencyRatio(), pacer.PacingJson());
          // A shared run rescues a sibling that died (its run lock is free)
          // while it works: its items and takeovers do not wait for the
          // next run of the job.
          SweepResult swept;
          if (config.batch.runs == config::RunsMode::kShared)
            swept = ClearDeadRuns(tx, *c.queue, *c.sql);
          tx.commit();
          LogSweep(swept, config.batch.job);
          // `coexist ctl --job J stop` reaches every run of the job through
          // its runs row: stop claiming as a socket `stop` would.
          if (beat.stop_by && !job_stop_seen) {
            job_stop_seen = true;
            spdlog::info("job stop requested run_id={} job={} actor={}", run_id, config.batch.job,
                         log::Value(*beat.stop_by));
            pacer.RequestStop(StopReason::kJobStop);
          }
          // `coexist jobs pause J` holds every run of the job after its
          // chunk in hand; the first heartbeat lets the workers start.
          pacer.SetJobPause(std::move(beat.pause));
        } catch (const std::exception& e) {
          spdlog::error("control connection failed, stopping the workers run_id={} error={}",
                        run_id, log::Value(e.what()));
          std::lock_guard lock(error_mutex);
          end.error = std::current_exception();  // the cause, not a worker's later broken chunk
          end.control_lost = true;
          workers_stop = true;
        }
        next = Clock::now() + std::chrono::seconds(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  end.counts = counters.Snapshot();
  for (const auto& w : workers) {
    if (w->stop_reason()) end.stop_reason = *w->stop_reason();
  }
  return end;
}

// Step 4: the run's row says how it ended; what a failed worker took over
// is handed back; a refused claim leaves an event.
void FinishRun(Control& c, RunSummary& summary, bool failed) {
  const config::Config& config = c.job->config();
  pqxx::work tx(*c.conn);
  summary.queued_left = c.queue->CountQueued(tx);
  summary.outcome = failed ? "failed" : Outcome(summary);
  c.queue->FinishRun(tx, summary.run_id, summary.outcome, summary.counts.claimed,
                     summary.counts.done, summary.counts.deferred, summary.counts.dead,
                     SummaryJson(summary));
  summary.together = c.queue->ReadRunsTogether(tx, summary.run_id);
  c.sql->HandBackOrphaned(tx, c.queue->DeleteOrphanedTakeovers(tx));
  if (summary.stop_reason == StopReason::kOutsideWindow ||
      summary.stop_reason == StopReason::kDrainMargin) {
    c.queue->AddEvent(tx, EventKind::kClaimRefused, summary.run_id,
                      nlohmann::json{{"reason", ToString(summary.stop_reason)}}.dump());
  }
  if (summary.stop_reason == StopReason::kFailuresInARow) {
    c.queue->AddEvent(
        tx, EventKind::kRunStoppedFailing, summary.run_id,
        nlohmann::json{{"max_consecutive_failures", config.batch.max_consecutive_failures},
                       {"dead", summary.counts.dead}}
            .dump());
  }
  // The batch is done: online users need not wait for the window's end.
  if (!failed && summary.stop_reason == StopReason::kDrained &&
      c.job->policy().ReleasesWindowsWhenDone()) {
    auto released = ReleaseWindows(tx, config.batch.job);
    if (released > 0) {
      c.queue->AddEvent(tx, EventKind::kWindowsReleased, summary.run_id,
                        nlohmann::json{{"windows", released}}.dump());
      spdlog::info("read-only windows released run_id={} job={} windows={}", summary.run_id,
                   config.batch.job, released);
    }
  }
  tx.commit();
}

}  // namespace

bool JobLockStaysHeld(const std::function<bool()>& held, const std::atomic<bool>* stop) {
  auto deadline = Clock::now() + kJobLockSettle;
  while (held()) {
    if ((stop != nullptr && stop->load()) || Clock::now() >= deadline) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

JobBusyError DescribeBusyJob(const std::string& conninfo, const config::Config& config) {
  auto conn = db::Connect(conninfo, config.database.application_name);
  db::QueueStore queue(*conn, QueueJobOf(config, ""));
  pqxx::read_transaction tx(*conn);
  return BusyError(config, queue.FindJobHolder(tx));
}

SweepResult SweepDeadRuns(const std::string& conninfo, const config::Config& config) {
  Control c = OpenJob(conninfo, config, /*install=*/false);
  pqxx::work tx(*c.conn);
  SweepResult result = ClearDeadRuns(tx, *c.queue, *c.sql);
  tx.commit();
  LogSweep(result, config.batch.job);
  return result;
}

namespace {

// Steps 2 to 4, for the job OpenJob checked and locked: every step reads
// the checked configuration and its one policy object.
RunSummary RunOpenJob(Control& control, const std::string& conninfo, const RunOptions& options,
                      Clock::time_point started) {
  const config::Config& config = control.job->config();
  const policies::Policy& policy = control.job->policy();
  // Before the runs row: a control socket already in use ends the run
  // here, with nothing to clean up.
  pacing::Pacer pacer(pacing::PacerOptionsFrom(config, conninfo));

  RunSummary summary;
  summary.job = config.batch.job;
  summary.policy = policy.Name();
  std::unique_ptr<RangeWalk> range;
  if (config.batch.range) range = std::make_unique<RangeWalk>();
  long long queued = BeginRun(control, summary, options.stop, range.get());
  pacer.SetRunId(summary.run_id);
  RecordPriorityUnavailable(*control.conn, *control.queue, config, summary.run_id);
  spdlog::info("run started run_id={} job={} policy={} workers={} chunk_size={}", summary.run_id,
               config.batch.job, policy.Name(), config.batch.workers, config.batch.chunk_size);
  if (range) {
    spdlog::info("range pass {} run_id={} job={} pass={} segments={}",
                 range->resumed ? "resumed from its checkpoint" : "started", summary.run_id,
                 config.batch.job, range->pass, range->segments.size());
  }

  WorkEnd end =
      Work(control, conninfo, summary.run_id, queued, pacer, options, started, range.get());
  // The runs row cannot be written without the control connection; the next
  // run marks it abandoned (its lock went with the connection).
  if (end.control_lost) std::rethrow_exception(end.error);
  if (range) {
    pqxx::read_transaction tx(*control.conn);
    summary.range = ReadProgress(tx, config, *range);
    tx.commit();
    spdlog::info("range pass {} run_id={} job={} pass={} applied={} exceptions={}",
                 summary.range->finished ? "finished" : "not finished, resumes from its checkpoint",
                 summary.run_id, config.batch.job, summary.range->pass, summary.range->applied,
                 summary.range->exceptions);
  }
  summary.counts = std::move(end.counts);
  summary.stop_reason = end.stop_reason;
  if (end.stop_reason == StopReason::kMaxDuration || end.stop_reason == StopReason::kMaxItems) {
    spdlog::info("run budget spent, claiming stopped run_id={} job={} reason={} claimed={}",
                 summary.run_id, config.batch.job, ToString(end.stop_reason),
                 summary.counts.claimed);
  }
  summary.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  summary.items_per_second = summary.seconds > 0 ? summary.counts.done / summary.seconds : 0;
  summary.latency = pacer.Latency();
  FinishRun(control, summary, end.error != nullptr);
  if (end.error) std::rethrow_exception(end.error);
  spdlog::info(
      "run finished run_id={} outcome={} done={} deferred={} dead={} missing={} queued_left={}",
      summary.run_id, summary.outcome, summary.counts.done, summary.counts.deferred,
      summary.counts.dead, summary.counts.missing, summary.queued_left);
  return summary;
}

}  // namespace

RunSummary Run(const std::string& conninfo, const config::Config& config,
               const RunOptions& options) {
  auto started = Clock::now();
  Control control = OpenJob(conninfo, config, options.install);
  return RunOpenJob(control, conninfo, options, started);
}

ExitCode ExitCodeOf(const RunSummary& summary) {
  if (summary.counts.dead > 0) return ExitCode::kItemsDead;
  if (summary.counts.deferred > 0) return ExitCode::kItemsDeferred;
  // Claiming stopped early (window closed, drain margin, signal, ctl stop,
  // ctl --job stop, stop file, critical load, a run budget spent) with items
  // still queued: not a full success.
  if (summary.stop_reason != StopReason::kDrained && summary.queued_left > 0) {
    return ExitCode::kItemsDeferred;
  }
  // A range pass that stopped before its end: the next run goes on with it.
  if (summary.range && !summary.range->finished) return ExitCode::kItemsDeferred;
  return ExitCode::kOk;
}

std::string SummaryJson(const RunSummary& s) {
  nlohmann::json j = {{"run_id", s.run_id},
                      {"job", s.job},
                      {"policy", s.policy},
                      {"outcome", s.outcome},
                      {"stop_reason", ToString(s.stop_reason)},
                      {"claimed", s.counts.claimed},
                      {"done", s.counts.done},
                      {"deferred", s.counts.deferred},
                      {"dead", s.counts.dead},
                      {"missing", s.counts.missing},
                      {"escalated", s.counts.escalated},
                      {"revoked", s.counts.revoked},
                      {"signalled", s.counts.signalled},
                      {"deferrals_by_reason", s.counts.deferrals_by_reason},
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
  if (s.range) {
    j["range"] = {{"pass", s.range->pass},
                  {"resumed", s.range->resumed},
                  {"finished", s.range->finished},
                  {"applied", s.range->applied},
                  {"exceptions", s.range->exceptions}};
  }
  if (s.together) {
    j["runs_together"] = {{"runs", s.together->runs},         {"running", s.together->running},
                          {"failed", s.together->failed},     {"done", s.together->done},
                          {"deferred", s.together->deferred}, {"dead", s.together->dead},
                          {"seconds", s.together->seconds}};
  }
  return j.dump();
}

}  // namespace coexist::batch
