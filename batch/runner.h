#pragma once

// `coexist batch run`: one run of a job. Claims queued items in chunks and
// applies the configured operation under the configured policy, with
// `batch.workers` threads, each on its own connection. Every item this run
// touches ends done, deferred (with a reason), dead (with its error) or
// queued again; a run that is killed leaves only row locks, which die with
// its connections, and a `runs` row the next run marks abandoned.
//
// Thread safety: Run() starts and joins its own threads; call it from one.

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "batch/run_counts.h"
#include "common/error.h"
#include "common/exit_codes.h"
#include "common/stop_reason.h"
#include "config/config.h"
#include "pacing/latency_summary.h"
#include "schema/runs_together.h"

namespace coexist::batch {

// A run's session ends a moment after the run returns, so a run started
// right after another (a daemon woken again by an enqueue, a cron run on
// the heels of a manual one) can find the job's lock still held by a
// session on its way out. A lock that goes within this time is taken (the
// run) or not counted as busy (the daemon's pre-check); one held longer is
// a run at work.
inline constexpr std::chrono::milliseconds kJobLockSettle{1000};

// Asks `held` every 50 ms until it says no or kJobLockSettle has passed (or
// *stop is set); true when the lock was still held at the end.
bool JobLockStaysHeld(const std::function<bool()>& held, const std::atomic<bool>* stop = nullptr);

// Where a range job's pass stands when a run ends (docs/batch.md, "Range
// jobs"): counts over the whole pass, by every run that worked it.
struct RangeProgress {
  long long pass = 0;
  bool resumed = false;      // the run went on from an earlier run's checkpoint
  bool finished = false;     // every segment walked: the next run starts a new pass
  long long applied = 0;     // rows the operation was applied to by the walk
  long long exceptions = 0;  // rows sent to the queue instead
};

struct RunSummary {
  long long run_id = 0;
  std::string job;
  std::string policy;
  // succeeded (every settled item done), incomplete (some deferred or dead,
  // or claiming stopped early), failed (an error ended it).
  std::string outcome;
  // Why claiming stopped (common/stop_reason.h). kFailuresInARow:
  // batch.max_consecutive_failures items failed their first attempt in a
  // row with none done; the operation or the payloads are likely wrong for
  // every item, and going on would kill the queue.
  StopReason stop_reason = StopReason::kDrained;
  RunCounts counts;              // what this run settled
  long long queued_left = 0;     // the job's items still queued at the end
  long long abandoned_runs = 0;  // stale runs this run marked abandoned
  double seconds = 0;
  double items_per_second = 0;  // done / seconds
  // What pacing.online_latency did; nullopt when it is not configured.
  std::optional<pacing::LatencySummary> latency;
  // The job's runs that worked alongside this one, this one included, as
  // the runs table says when it ended (shared runs: the job's figures).
  std::optional<db::RunsTogether> together;
  // A range job's pass; nullopt for a queued job.
  std::optional<RangeProgress> range;
};

// Another session holds the job's lock: this run did nothing. Exit status
// 4 (ExitCode::kJobBusy) for a run of the job at work; 5 (kJobStuck) when
// the holder has held it longer than batch.busy_timeout without being a
// live run (a squatting session, a run whose heartbeat stopped).
class JobBusyError : public Error {
 public:
  explicit JobBusyError(const std::string& message, std::string hint = {},
                        ExitCode code = ExitCode::kJobBusy)
      : Error(code, message, std::move(hint)) {}
};

// The JobBusyError a run starting now would throw, read without trying
// the job's lock: its holder named (pid, role, application_name, client,
// how long; the run it is, if one), 5 past batch.busy_timeout. For the
// daemon, whose pre-check saw the lock held in pg_locks.
JobBusyError DescribeBusyJob(const std::string& conninfo, const config::Config& config);

struct RunOptions {
  // Install migrations, the version and guard triggers and the windows first.
  bool install = true;
  // Set from another thread (a signal handler) to stop claiming; chunks in
  // flight finish.
  const std::atomic<bool>* stop = nullptr;
  // Called once a second on the run's control thread with the run's own
  // counts (the daemon's `systemctl status` line); must not block.
  std::function<void(const RunProgress&)> on_progress;
};

// Runs the job once against the server at `conninfo`. Throws JobBusyError,
// before touching anything, when another run of the job is in progress
// (on any host), or when another session holds the key of this run's own
// lock (tried for kJobLockSettle, or until options.stop); ConfigError
// for a configuration the database rejects (batch/check.h: checked after
// the migrations and before any trigger is installed on the target:
// a view, a key that is not unique, a missing version column, the rights,
// bad operation SQL), TempFailError when the
// database cannot be reached, and pqxx errors for the rest; the runs row
// then says failed when it can still be written.
RunSummary Run(const std::string& conninfo, const config::Config& config,
               const RunOptions& options = {});

// What a dead run of the job left (kill -9, a lost host or server, an OOM
// kill), cleared without starting a run: its runs row marked abandoned and
// its status_partition takeovers handed back (their records the online
// side's again). Every run does this when it starts; `coexist runs sweep`
// does it between runs. Throws JobBusyError (4, or 5 past busy_timeout)
// when a run of the job is at work: that run has done it already.
struct SweepResult {
  std::vector<long long> abandoned;  // run ids
  long long handed_back = 0;         // records
};
SweepResult SweepDeadRuns(const std::string& conninfo, const config::Config& config);

// 0 when every settled item is done and the queue was drained;
// kItemsDeferred when some were deferred, or when claiming stopped early
// (outside_window, drain_margin, stopped, operator, job_stop, stop_file,
// critical_load, max_duration, max_items) with items still queued;
// kItemsDead when some died (it wins over deferred). docs/batch.md.
ExitCode ExitCodeOf(const RunSummary& summary);

// The --json document: run_id, job, policy, outcome, done, deferred, dead,
// queued_left, seconds, items_per_second, and the other counters.
std::string SummaryJson(const RunSummary& summary);

}  // namespace coexist::batch
