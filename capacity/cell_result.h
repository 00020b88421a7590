#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/stop_reason.h"
#include "config/scenario.h"
#include "pacing/latency_summary.h"

namespace coexist::capacity {

// Online latency and throughput over one phase of a cell's run.
struct PhaseStats {
  double seconds = 0;
  long long transactions = 0;
  double tps = 0;
  double p50_ms = 0;
  double p95_ms = 0;
  double p99_ms = 0;
};

// One tick of the online load, for the charts over time: a second before
// and after the batch, 100 ms while it runs (the report bins these to the
// batch's length).
struct TimePoint {
  double at_seconds = 0;     // since the cell's start, at the tick's end
  double width_seconds = 0;  // the tick's length
  long long transactions = 0;
  long long not_ok = 0;  // transactions in the tick whose outcome was not ok
  double tps = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

// One chunk of the batch done, from the database: the completing
// transaction's items and when it set them done.
struct ChunkPoint {
  double at_seconds = 0;  // since the run's start (runs.started_at)
  long long items = 0;
};

// One run of the job in a cell (scenario.batch_processes of them run at
// once): its share of the cell's batch, from its own summary.
struct RunShare {
  long long run_id = 0;
  long long done = 0;
  long long deferred = 0;
  long long dead = 0;
  double start_seconds = 0;  // since the cell's start
  double seconds = 0;        // the run's own duration
  StopReason stop_reason = StopReason::kDrained;
};

// Everything measured in one cell of a scenario's sweep: one batch (one
// run, or scenario.batch_processes runs side by side) with online load
// before, during and after it, on fresh data.
struct CellResult {
  int index = 0;       // 1-based, in the order the cells ran
  int sweep_cell = 0;  // the sweep's cell it ran (config::ScenarioCell::index)
  // The swept keys and their values in this cell ("online.users" -> "40").
  std::map<std::string, std::string> parameters;
  std::string policy;
  // A label for the online load level ("users=50"), used to group the
  // recommendation; "" when the load is not swept.
  std::string load_level;
  // A projection check cell (scenario.projection_check) repeats the cell of
  // this index with more items; 0 for the sweep's own cells.
  int check_of = 0;
  // The sweep's cell is measured scenario.repeat times, each on fresh data:
  // this is its `repeat`th measurement (1-based).
  int repeat = 1;
  // When scenario.min_batch_time grew this cell's queue: the queue it was
  // grown from (scenario.queue_items); 0 when it was not grown.
  long long grown_from = 0;
  // Rows of the target in this cell: public.products seeded with
  // scenario.records, grown with the queue for a grown cell; the user's
  // table as scenario.data and scenario.sample filled it.
  long long records = 0;
  // The window this cell's batch had, in seconds: scenario.window, scaled
  // with the queue for a grown cell or a projection check cell.
  double window_seconds = 0;
  // A range job's cell (batch.range): its predicate as the scenario wrote
  // it; "" for a queued job. A range cell queues nothing: `items` are the
  // rows it walks (docs/capacity.md, "Range jobs against queued jobs").
  std::string range_where;
  bool Range() const { return !range_where.empty(); }
  // How long queuing the items took while the cell's data was made (not
  // part of batch_seconds); 0 for a range cell, which queues nothing.
  double enqueue_seconds = 0;
  // "range" or "queued", as the report labels the cell.
  const char* JobKind() const { return Range() ? "range" : "queued"; }

  // The batch: its runs together. batch_seconds is one run's own duration,
  // or from the first run's start to the last one's end; items_per_second
  // is done / batch_seconds.
  double batch_seconds = 0;
  double items_per_second = 0;
  int batch_processes = 1;     // runs of the job started at once
  int cpu_nice = 0;            // pacing.cpu_priority the cell ran at (19: low)
  std::vector<RunShare> runs;  // in the order they were started
  long long items = 0;         // queued for this cell; a range cell: its rows
  long long done = 0;
  long long deferred = 0;
  long long dead = 0;
  long long queued_left = 0;
  bool batch_finished = false;      // every item ended done/deferred/dead
  bool finished_in_window = false;  // and within scenario.window
  // Done chunks in the order they ended; with several runs, each chunk's
  // time is since its own run's start (the runs start together).
  std::vector<ChunkPoint> chunks;
  // What pacing.online_latency did (the first run's, with several);
  // nullopt when the cell's config does not set it.
  std::optional<pacing::LatencySummary> latency;

  // The online side.
  PhaseStats before;
  PhaseStats during;
  PhaseStats after;
  long long conflicts = 0;      // optimistic version conflicts
  long long gave_up = 0;        // optimistic edits that exhausted their retries
  long long refusals = 0;       // CX003/CX004/CX005: the database refused an online write
  long long revocations = 0;    // CX002 after a batch revoked an edit lock
  long long lock_timeouts = 0;  // 55P03
  long long other_errors = 0;
  double pool_wait_p99_ms = 0;
  // Online transactions that failed while the batch ran, by outcome
  // ("refused_window" -> 12): what the error-rate objective counts
  // (config::Objectives::max_error_percent), the users' own version
  // conflicts and edit-lock waits on each other left out.
  std::map<std::string, long long> during_errors;
  // What the users did to each other while the batch ran, not counted:
  // offline edits whose row changed, edit locks busy, writes refused under
  // another user's edit lock ("refused_edit_locked" -> 20).
  std::map<std::string, long long> during_user_conflicts;
  long long lost_updates = 0;   // must be 0 for every policy
  long long applied_twice = 0;  // batch items applied more than once: must be 0
  // The demo's `settled` total, to cross-check `done`; 0 with the user's job.
  long long rows_changed_by_batch = 0;

  std::vector<TimePoint> timeline;
  double batch_start_seconds = 0;
  double batch_end_seconds = 0;
};

// The scenario-level facts a report needs besides the cells.
struct ScenarioSummary {
  std::string name;
  std::string description;
  long long records = 0;  // the demo table's rows; 0 with the user's tables

  long long queue_items = 0;
  double window_seconds = 0;             // the batch must finish inside this
  long long production_queue_items = 0;  // for the projection; 0: none
  double production_window_seconds = 0;  // the production window it must fit
  long long projection_check = 0;        // items of the check cells; 0: none
  double min_batch_seconds = 0;          // cells grown to a batch this long; 0: none
  int repeat = 1;                        // measurements of each cell of the sweep
  config::Objectives objectives;         // what a recommended policy must meet
  // What the cells run ("table", "online", "batch", "checks" -> text), from
  // the first cell: the demo's or the user's table, kinds and job.
  std::vector<std::pair<std::string, std::string>> workload;
  std::string started_at;  // ISO-8601
  std::string host;
};

}  // namespace coexist::capacity
