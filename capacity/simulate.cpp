#include "capacity/simulate.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <optional>
#include <pqxx/pqxx>
#include <thread>

#include "batch/enqueue.h"
#include "capacity/batch_runs.h"
#include "capacity/workload.h"
#include "common/log.h"
#include "db/backend_priority.h"
#include "db/connection.h"
#include "db/target_table.h"
#include "online-sim/simulator.h"
#include "online-sim/stats.h"
#include "schema/guard_rows.h"
#include "schema/install.h"
#include "schema/migrations.h"
#include "schema/queue_store_ops.h"
#include "schema/range_store.h"

namespace coexist::capacity {
namespace {

using Clock = std::chrono::steady_clock;
using online_sim::Outcome;
using online_sim::OutcomeName;

constexpr const char* kDefaultItemSql =
    "WITH u AS (UPDATE public.products SET settled = settled + 1 WHERE id = $1 RETURNING id) "
    "INSERT INTO public.batch_ledger (record_key) SELECT id FROM u";

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool DemoLedger(const config::Workload& workload) {
  return !workload.UserTables() && workload.job_file.empty();
}

// A range cell's rows (docs/capacity.md, "Range jobs against queued jobs"):
// those its predicate matches among the keys a queued cell of `items` items
// would queue, the first `items` keys in key order (every row when `items`
// reaches the rows). The predicate gets that bound (the checkpoints of an
// earlier cell went with EmptyCoexistTables), and the demo's ledger check
// gets the rows in public.batch_range_rows. Each chunk's applied rows and
// its time are recorded by db::RecordRangeChunks (a range chunk leaves no
// done_chunks row): the chunks of the report and of the projection model.
// Returns the rows.
long long PrepareRange(pqxx::connection_base& conn, const config::ScenarioSettings& settings,
                       config::Config& config, const std::string& key_type, long long items,
                       long long records) {
  config::BatchConfig::Range& range = *config.batch.range;
  pqxx::work tx(conn);
  std::string table =
      tx.quote_name(config.target.schema) + "." + tx.quote_name(config.target.table);
  std::string key = tx.quote_name(config.target.key_column);
  if (items < records) {
    auto bound = tx.exec_params1(
        // Named apart from the column: ORDER BY would take the text otherwise.
        fmt::format("SELECT {0}::text AS bound FROM {1} ORDER BY {0} OFFSET $1 LIMIT 1", key,
                    table),
        items - 1);
    range.where = fmt::format("({}) AND {} <= {}::{}", range.where, key,
                              tx.quote(bound[0].as<std::string>()), key_type);
  }
  long long rows = 0;
  try {
    pqxx::subtransaction counting(tx, "range_rows");
    if (DemoLedger(settings.workload)) {
      counting.exec("DROP TABLE IF EXISTS public.batch_range_rows");
      rows = static_cast<long long>(
          counting
              .exec("CREATE TABLE public.batch_range_rows AS SELECT id AS record_key FROM "
                    "public.products WHERE " +
                    range.where)
              .affected_rows());
    } else {
      rows = counting.exec1("SELECT count(*) FROM " + table + " WHERE " + range.where)[0]
                 .as<long long>();
    }
    counting.commit();
  } catch (const pqxx::sql_error& e) {
    throw config::ConfigError(
        range.where_at, "batch.range.where",
        "the condition does not run on the cell's table: " + FirstLine(e),
        "write a boolean condition over " + config.target.Name() + "'s columns, e.g. id <= 1000.");
  }
  db::RecordRangeChunks(tx);
  tx.commit();
  return rows;
}

// Fresh data for one cell: the demo target reseeded (or the user's tables
// made afresh and filled), coexist's tables empty, the ledger empty, the
// queue filled (a range cell's queue left empty, its predicate bounded:
// PrepareRange). Returns the items queued (a range cell: its rows) and, in
// `records`, the target's rows; in `enqueue_seconds`, how long queuing took.
long long PrepareData(const std::string& conninfo, const config::ScenarioSettings& settings,
                      config::Config& config, long long items, long long& records,
                      double& enqueue_seconds) {
  auto conn = db::Connect(conninfo, "coexist-simulate");
  db::InstallMigrations(*conn);
  if (config.pacing.cpu_nice > 0) {
    // Measured as the operator would run it: with the extension, when the
    // server has it. Without it the cell still runs (its own threads are
    // lowered) and the run's cpu_priority_unavailable event says so.
    try {
      if (!db::CreatePrioritizeIfAvailable(*conn).schema) {
        spdlog::warn("cell runs without the prioritize extension: the server lacks it fix={}",
                     log::Value(db::PrioritizeFix({})));
      }
    } catch (const pqxx::sql_error& e) {
      spdlog::warn("prioritize extension not created error={}",
                   log::Value(std::string(e.what()).substr(0, std::string(e.what()).find('\n'))));
    }
  }
  const config::Workload& workload = settings.workload;
  if (workload.UserTables()) {
    records = PrepareUserTables(*conn, workload, config);
  } else {
    db::SeedDemoTable(*conn, settings.records);
    records = settings.records;
  }
  {
    pqxx::work tx(*conn);
    db::EmptyCoexistTables(tx);
    if (!workload.UserTables()) {
      tx.exec(
          "CREATE TABLE IF NOT EXISTS public.batch_ledger ("
          "  record_key bigint NOT NULL, applied_at timestamptz NOT NULL DEFAULT "
          "clock_timestamp());"
          "TRUNCATE public.batch_ledger");
    }
    tx.commit();
  }
  // Statistics of the empty queue before it is filled. Otherwise the
  // previous cell's changes let autoanalyze sample the queue while the
  // enqueue's uncommitted rows fill it (pages, no live rows), and the
  // enqueue trigger (mark_followers) plans for an empty queue: a scan of the
  // queue per item. Seen once: 300,000 items still queueing after 4 minutes.
  {
    pqxx::nontransaction analyze(*conn);
    db::AnalyzeQueue(analyze);
  }
  std::string select, key_type = "bigint";
  {
    pqxx::read_transaction tx(*conn);
    key_type = db::KeyTypeOf(tx, config.target);
  }
  if (config.batch.range) {
    long long rows = PrepareRange(*conn, settings, config, key_type, items, records);
    pqxx::nontransaction analyze(*conn);
    if (!workload.UserTables()) analyze.exec0("ANALYZE public.products");
    return rows;
  }
  {
    pqxx::read_transaction tx(*conn);
    select = workload.UserTables() || !workload.job_file.empty()
                 ? EnqueueQuery(tx, config, items)
                 : fmt::format("SELECT 1 + (g - 1) % {} FROM generate_series(1, {}) g",
                               settings.records, items);
  }
  batch::EnqueueResult queued;
  auto enqueue_start = Clock::now();
  try {
    queued = batch::EnqueueSelect(conninfo, config.batch.job, select, key_type);
    enqueue_seconds = Since(enqueue_start);
  } catch (const pqxx::sql_error& e) {
    if (config.enqueue.select.empty()) throw;
    throw config::ConfigError(config.enqueue.select_at, "enqueue.select",
                              "the query does not run on the cell's tables: " + FirstLine(e),
                              "fix the job's enqueue.select; it runs as written on the tables "
                              "scenario.schema creates.");
  }
  // Fresh statistics for the tables just filled, so that every cell's plans
  // are the ones the data calls for, not those of autovacuum's timing.
  pqxx::nontransaction analyze(*conn);
  if (!workload.UserTables()) analyze.exec0("ANALYZE public.products");
  if (queued.added < batch::kAnalyzeQueueAfter) db::AnalyzeQueue(analyze);  // else enqueue did
  return queued.added;
}

// The online application's rights as docs/operations.md ("Database roles")
// grants them, for the simulation's online role; again in every cell, as
// PrepareData recreates the target.
void GrantOnlineRole(const std::string& conninfo, const config::Workload& workload,
                     const std::string& role) {
  auto conn = db::Connect(conninfo, "coexist-simulate");
  pqxx::work tx(*conn);
  std::string name = tx.quote_name(role);
  db::GrantOnlineUse(tx, role);
  if (workload.UserTables()) {
    GrantUserTables(tx, workload, role);
  } else {
    tx.exec("GRANT SELECT, INSERT, UPDATE, DELETE ON public.products TO " + name);
  }
  tx.commit();
}

void CreateOnlineRole(const std::string& conninfo, const std::string& role) {
  auto conn = db::Connect(conninfo, "coexist-simulate");
  pqxx::work tx(*conn);
  if (tx.exec_params("SELECT 1 FROM pg_roles WHERE rolname = $1", role).empty()) {
    tx.exec("CREATE ROLE " + tx.quote_name(role) + " LOGIN");
  }
  tx.commit();
}

// A time_window batch writes its windows when it starts; the simulation's
// window ends when the batch does (see config/scenarios/demo.yaml). A batch
// that drained released them already (release_when_done); this closes them
// for one stopped at the window's end or with release_when_done: false.
void CloseWindows(const std::string& conninfo) {
  auto conn = db::Connect(conninfo, "coexist-simulate");
  pqxx::work tx(*conn);
  db::DeleteAllWindows(tx);
  tx.commit();
}

config::Config CellConfig(const config::ScenarioSettings& settings, config::Config config) {
  if (!config.operation.Configured()) {
    config.operation.item_sql = kDefaultItemSql;
  }
  if (config.online.records == 0 && !settings.workload.UserTables())
    config.online.records = settings.records;
  return config;
}

long long Count(const online_sim::Report& r, Outcome outcome) {
  auto it = r.outcomes.find(OutcomeName(outcome));
  return it == r.outcomes.end() ? 0 : it->second;
}

PhaseStats PhaseOf(const online_sim::Report& r) {
  return {.seconds = r.elapsed_seconds,
          .transactions = r.transactions,
          .tps = r.throughput,
          .p50_ms = r.latency.p50_ms,
          .p95_ms = r.latency.p95_ms,
          .p99_ms = r.latency.p99_ms};
}

// Adds one phase's online counters to the cell.
void AddOnline(CellResult& cell, const online_sim::Report& r) {
  for (const auto& kind : r.kinds) cell.conflicts += kind.conflicts;
  cell.gave_up += Count(r, Outcome::kGaveUp);
  cell.refusals += Count(r, Outcome::kRefusedWindow) + Count(r, Outcome::kRefusedOwner) +
                   Count(r, Outcome::kRefusedEditLocked);
  cell.revocations += Count(r, Outcome::kLockRevoked);
  cell.lock_timeouts += Count(r, Outcome::kLockTimeout) + Count(r, Outcome::kNowait);
  cell.other_errors += Count(r, Outcome::kDeadlock) + Count(r, Outcome::kSerialization) +
                       Count(r, Outcome::kCanceled) + Count(r, Outcome::kTerminated) +
                       Count(r, Outcome::kConnectionLost) + Count(r, Outcome::kOther);
  cell.pool_wait_p99_ms = std::max(cell.pool_wait_p99_ms, r.pool_wait.p99_ms);
  cell.lost_updates += r.lost_check.lost;
}

// What the error-rate objective counts, from the phase while the batch runs,
// and what the users did to each other meanwhile (reported, not counted: a
// write refused because another user edit-locks the row (CX005) happens
// without a batch too; the batch never holds an edit lock).
void AddDuringErrors(CellResult& cell, const online_sim::Report& r) {
  for (Outcome outcome : {Outcome::kGaveUp, Outcome::kLockTimeout, Outcome::kNowait,
                          Outcome::kLockRevoked, Outcome::kRefusedWindow, Outcome::kRefusedOwner,
                          Outcome::kDeadlock, Outcome::kSerialization, Outcome::kCanceled,
                          Outcome::kTerminated, Outcome::kConnectionLost, Outcome::kOther}) {
    if (long long n = Count(r, outcome); n > 0) cell.during_errors[OutcomeName(outcome)] = n;
  }
  for (Outcome outcome :
       {Outcome::kRefusedEditLocked, Outcome::kEditLockBusy, Outcome::kConflict}) {
    if (long long n = Count(r, outcome); n > 0)
      cell.during_user_conflicts[OutcomeName(outcome)] = n;
  }
}

// One online phase of `duration` (or until Stop()), its ticks (every
// `tick`) on the timeline.
class OnlinePhase {
 public:
  OnlinePhase(const std::string& conninfo, const config::Config& config,
              std::chrono::milliseconds duration, std::chrono::milliseconds tick,
              Clock::time_point cell_start, CellResult& cell)
      : simulator_(conninfo, config.target, config.online,
                   online_sim::RunOptions{.duration = duration,
                                          .on_tick = TickRecorder(cell, cell_start),
                                          .tick_interval = tick}) {
    simulator_.Prepare();
  }
  online_sim::Report Run() { return simulator_.Run(); }
  void Stop() { simulator_.Stop(); }

 private:
  // The simulator's ticks carry totals since its start: each point gets the
  // tick's own transactions and failures.
  static std::function<void(const online_sim::Tick&)> TickRecorder(CellResult& cell,
                                                                   Clock::time_point start) {
    return [&cell, start, last_seconds = 0.0, last_transactions = 0LL,
            last_not_ok = 0LL](const online_sim::Tick& tick) mutable {
      cell.timeline.push_back({.at_seconds = Since(start),
                               .width_seconds = tick.seconds - last_seconds,
                               .transactions = tick.transactions - last_transactions,
                               .not_ok = tick.not_ok - last_not_ok,
                               .tps = tick.tps,
                               .p50_ms = tick.p50_ms,
                               .p99_ms = tick.p99_ms});
      last_seconds = tick.seconds;
      last_transactions = tick.transactions;
      last_not_ok = tick.not_ok;
    };
  }

  online_sim::Simulator simulator_;
};

// Ticks while the batch runs: fine enough for a batch of a second.
constexpr std::chrono::milliseconds kBatchTick{100};
constexpr std::chrono::milliseconds kQuietTick{1000};

// After the batch: its figures from the database, not from its counters.
void CheckBatch(const std::string& conninfo, const config::ScenarioSettings& settings,
                const config::Config& config, CellResult& cell) {
  const std::string& job = config.batch.job;
  const config::Workload& workload = settings.workload;
  auto conn = db::Connect(conninfo, "coexist-simulate");
  pqxx::read_transaction tx(*conn);
  auto counts = db::CountJobItems(tx, job);
  cell.done = counts.done;
  cell.deferred = counts.deferred;
  cell.dead = counts.dead;
  cell.queued_left = counts.queued;
  bool walked = true;  // a range cell: every segment of its pass walked
  if (config.batch.range) {
    // The rows the walk applied, and the exceptions the queue settled.
    auto segments = db::ReadSegments(tx, job);
    walked = !segments.empty();
    for (const auto& segment : segments) {
      cell.done += segment.applied;
      walked = walked && segment.finished;
    }
    // Rows not reached yet count as left, as queued items do.
    cell.queued_left = std::max(0LL, cell.items - cell.done - cell.deferred - cell.dead);
    cell.batch_finished = cell.batch_finished && walked;
    cell.finished_in_window = cell.finished_in_window && walked;
  }
  if (!workload.applied_check.empty()) {
    // The user's own check of their operation.
    cell.applied_twice = AppliedCheck(tx, workload);
  } else if (DemoLedger(workload)) {
    // Each done item must appear exactly once in the ledger: per record,
    // the ledger rows equal the done items, and `settled` equals both.
    cell.applied_twice = config.batch.range ? db::RangeLedgerMismatch(tx, job, cell.batch_finished)
                                            : db::LedgerMismatch(tx, job, "public.batch_ledger");
    cell.rows_changed_by_batch =
        tx.exec("SELECT coalesce(sum(settled), 0) FROM public.products")[0][0].as<long long>();
  }
  // The chunks as the database saw them: the items one transaction set done
  // share its xid (xmin), and done_at says when.
  if (config.batch.range) {
    for (const auto& chunk : db::ReadRangeChunks(tx, job)) {
      cell.chunks.push_back({chunk.at_seconds, chunk.items});
    }
    return;
  }
  for (const auto& chunk : db::ReadDoneChunks(tx, job)) {
    cell.chunks.push_back({chunk.at_seconds, chunk.items});
  }
}

std::string Invariant(const std::string& conninfo, const config::Workload& workload) {
  if (workload.invariant.empty()) return "";
  auto conn = db::Connect(conninfo, "coexist-simulate");
  pqxx::read_transaction tx(*conn);
  return ReadInvariant(tx, workload);
}

// A cell's size: the sweep's cells queue scenario.queue_items within
// scenario.window; a projection check cell more, with a longer window.
struct CellSize {
  long long items = 0;
  std::chrono::milliseconds window{0};
  int check_of = 0;
  int repeat = 1;
  long long grown_from = 0;  // scenario.queue_items when min_batch_time grew the queue
  long long records = 0;     // rows seeded; 0: scenario.records
};

CellResult RunCell(const std::string& conninfo, const config::ScenarioCell& spec,
                   const CellSize& size, const SimulateOptions& options) {
  config::ScenarioSettings settings = spec.settings;
  if (size.records > 0) settings.records = size.records;
  config::Config config = CellConfig(settings, spec.config);
  long long records = 0;
  double enqueue_seconds = 0;
  long long items = PrepareData(conninfo, settings, config, size.items, records, enqueue_seconds);
  std::string invariant_before = Invariant(conninfo, settings.workload);
  std::string online_conninfo = conninfo;
  if (!options.online_role.empty()) {
    GrantOnlineRole(conninfo, settings.workload, options.online_role);
    // libpq takes the last value of a repeated keyword.
    online_conninfo += " user=" + options.online_role;
  }

  CellResult cell;
  cell.index = spec.index;
  cell.parameters = spec.parameters;
  cell.policy = config.policy.name;
  cell.cpu_nice = config.pacing.cpu_nice;
  cell.load_level = spec.load_level;
  cell.check_of = size.check_of;
  cell.repeat = size.repeat;
  cell.grown_from = size.grown_from;
  cell.window_seconds = std::chrono::duration<double>(size.window).count();
  if (spec.config.batch.range) cell.range_where = spec.config.batch.range->where;
  cell.records = records;
  cell.items = items;
  cell.enqueue_seconds = enqueue_seconds;
  auto start = Clock::now();

  {
    OnlinePhase before(online_conninfo, config, settings.warmup, kQuietTick, start, cell);
    auto report = before.Run();
    cell.before = PhaseOf(report);
    AddOnline(cell, report);
  }

  // The batch's runs on their own threads while the online load goes on;
  // the load ends when the last run does, or when the window closes.
  OnlinePhase during(online_conninfo, config, size.window, kBatchTick, start, cell);
  cell.batch_start_seconds = Since(start);
  BatchRuns runs(conninfo, config, settings.batch_processes, start, [&during] { during.Stop(); });
  std::jthread stop_watch([&](std::stop_token token) {
    while (!token.stop_requested()) {
      if (options.stop != nullptr && options.stop->load()) {
        runs.Stop();
        during.Stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  auto during_report = during.Run();
  runs.Stop();  // the window closed, or the runs are done already
  stop_watch.request_stop();
  stop_watch.join();
  runs.Finish(cell, std::chrono::duration<double>(size.window).count());
  cell.batch_end_seconds = Since(start);
  cell.during = PhaseOf(during_report);
  AddOnline(cell, during_report);
  AddDuringErrors(cell, during_report);

  // The batch's window closes with the batch: time_window's refusals stop.
  CloseWindows(conninfo);
  if (options.stop == nullptr || !options.stop->load()) {
    OnlinePhase after(online_conninfo, config, settings.cooldown, kQuietTick, start, cell);
    auto report = after.Run();
    cell.after = PhaseOf(report);
    AddOnline(cell, report);
  }
  CheckBatch(conninfo, settings, config, cell);
  if (!settings.workload.invariant.empty()) {
    // What neither side may change, e.g. the sum of the balances: a change
    // is an update lost (or made twice) somewhere.
    std::string after = Invariant(conninfo, settings.workload);
    long long drift = InvariantDrift(invariant_before, after);
    if (drift != 0) {
      spdlog::warn("invariant changed cell={} before={} after={}", spec.index, invariant_before,
                   after);
    }
    cell.lost_updates += drift;
  }
  cell.items_per_second =
      cell.batch_seconds > 0 ? static_cast<double>(cell.done) / cell.batch_seconds : 0;
  return cell;
}

std::string Now() {
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

constexpr long long kMaxItems = 100'000'000;
// A cell is grown at most this many times: a batch whose time does not grow
// with its queue (setup, waits) would otherwise be grown without end.
constexpr int kMaxGrowths = 3;

// The batch time a cell is grown to: min_batch_time, or a quarter more with
// scenario.repeat: the repeats run the first measurement's queue, and one
// that ran faster by the machine's noise would fall under the time a model
// needs (the projection benchmark at 3 s: 10 of 30 checks lost their
// figure to a repeat of 2.7-3.0 s).
double GrowthTargetSeconds(const config::ScenarioSettings& s) {
  double min_seconds = std::chrono::duration<double>(s.min_batch_time).count();
  return s.repeat > 1 ? 1.25 * min_seconds : min_seconds;
}

bool NeedsGrowth(const CellResult& cell, const config::ScenarioSettings& s) {
  double min_seconds = GrowthTargetSeconds(s);
  return min_seconds > 0 && cell.batch_finished && cell.batch_seconds < min_seconds &&
         cell.items < kMaxItems;
}

// A queue large enough for the batch to run min_batch_time (with a fifth
// more): after one measurement at the rate it measured; after two, at the
// rate between them, since the fixed costs (setup, the first chunks, the
// tail) that make a small batch look slow do not grow with the queue. The
// records and the window are scaled with the queue (at most 100,000,000
// rows and 24 h), so that each row has as many items as the scenario gave
// it: more items per row would change what the batch does (same-key items
// wait for each other), and with it the figures.
CellSize Grown(const CellSize& size, const config::ScenarioSettings& s, const CellResult& cell,
               const CellResult* previous) {
  double min_seconds = GrowthTargetSeconds(s);
  double wanted =
      1.2 * static_cast<double>(size.items) * min_seconds / std::max(cell.batch_seconds, 0.05);
  if (previous != nullptr && cell.batch_seconds > previous->batch_seconds) {
    double rate = static_cast<double>(cell.items - previous->items) /
                  (cell.batch_seconds - previous->batch_seconds);
    wanted = static_cast<double>(cell.items) + 1.2 * (min_seconds - cell.batch_seconds) * rate;
  }
  if (previous != nullptr && cell.Range() && cell.items > 0) {
    // A range cell's items are its rows, fewer than the keys it was sized
    // by when its predicate skips some: the same share of the keys grows.
    wanted *= static_cast<double>(size.items) / static_cast<double>(cell.items);
  }
  // Two close timings of small batches make a wild rate: at most 5 times
  // the queue per step (125 times over three).
  wanted = std::min(wanted, 5.0 * static_cast<double>(size.items));
  CellSize grown = size;
  grown.items =
      std::min(std::max(size.items + 1, static_cast<long long>(std::ceil(wanted))), kMaxItems);
  grown.grown_from = s.queue_items;
  double scale = static_cast<double>(grown.items) / static_cast<double>(s.queue_items);
  grown.records = std::clamp(config::RowsInProportion(grown.items, s.queue_items, s.records),
                             s.records, config::kMaxSeededRecords);
  double ms = std::min(scale * static_cast<double>(s.window.count()), 86'400'000.0);
  grown.window = std::max(s.window, std::chrono::milliseconds(static_cast<long long>(ms)));
  return grown;
}

// A projection check cell: scenario.projection_check items (or, written as
// `5x`, that many times the measured cell's), over rows in
// proportion, so that each row has as many items as in the measured cell
// (more items per row run slower: docs/capacity.md, "The projection model");
// at most 100,000,000 rows. The window is the measured cell's, scaled with
// the items and doubled, so that the check runs to its end; at most 24 h.
// With the user's own tables the rows are what scenario.data and
// scenario.sample make, and the check says so when that changes the items
// per row.
CellSize CheckSize(const config::ScenarioSettings& s, const CellResult& measured) {
  long long base_items = std::max(measured.items, 1LL);
  long long items =
      s.projection_check_times > 0
          ? std::min(std::llround(s.projection_check_times * static_cast<double>(base_items)),
                     kMaxItems)
          : s.projection_check;
  CellSize check{.items = items, .check_of = measured.index};
  if (!s.workload.UserTables() && measured.records > 0) {
    check.records = std::clamp(config::RowsInProportion(check.items, base_items, measured.records),
                               1LL, config::kMaxSeededRecords);
  }
  double scale = 2.0 * static_cast<double>(check.items) / static_cast<double>(base_items);
  double ms = std::min(std::max(1.0, scale) * 1000.0 * measured.window_seconds, 86'400'000.0);
  check.window = std::max(s.window, std::chrono::milliseconds(static_cast<long long>(ms)));
  return check;
}

}  // namespace

ScenarioSummary Summarize(const config::Scenario& scenario) {
  const auto& s = scenario.settings;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return {.name = s.name,
          .description = s.description,
          // The user's tables have the rows their data makes (each cell's records).
          .records = s.workload.UserTables() ? 0 : s.records,
          .queue_items = s.queue_items,
          .window_seconds = std::chrono::duration<double>(s.window).count(),
          .production_queue_items = s.production_queue_items,
          .production_window_seconds = std::chrono::duration<double>(s.production_window).count(),
          .projection_check = s.projection_check,
          .min_batch_seconds = std::chrono::duration<double>(s.min_batch_time).count(),
          .repeat = s.repeat,
          .objectives = s.objectives,
          .workload = scenario.cells.empty() ? std::vector<std::pair<std::string, std::string>>{}
                                             : DescribeWorkload(scenario.cells.front()),
          .started_at = Now(),
          .host = host};
}

namespace {

// Runs the cells one after another, appending each to the results, with a
// progress line per cell.
class CellRunner {
 public:
  CellRunner(const std::string& conninfo, const config::Scenario& scenario,
             const SimulateOptions& options, std::vector<CellResult>& results)
      : conninfo_(conninfo), options_(options), results_(results) {
    for (const auto& spec : scenario.cells) {
      total_ += static_cast<size_t>(spec.settings.repeat) + spec.settings.ChecksProjections();
    }
  }

  bool Stopped() const { return options_.stop != nullptr && options_.stop->load(); }

  // Measures the cell once; returns its index in the results.
  int Run(const config::ScenarioCell& spec, const CellSize& size, const std::string& note = "") {
    int index = static_cast<int>(results_.size()) + 1;
    if (options_.progress != nullptr) Progress(spec, size, note, index);
    results_.push_back(RunCell(conninfo_, spec, size, options_));
    auto& cell = results_.back();
    cell.index = index;
    cell.sweep_cell = spec.index;
    spdlog::info(
        "cell measured cell={} policy={} repeat={} items={} batch_processes={} "
        "batch_seconds={:.2f} "
        "done={} deferred={} dead={} p99_before_ms={:.2f} p99_during_ms={:.2f} lost={} "
        "applied_twice={}",
        cell.index, cell.policy, cell.repeat, cell.items, cell.batch_processes, cell.batch_seconds,
        cell.done, cell.deferred, cell.dead, cell.before.p99_ms, cell.during.p99_ms,
        cell.lost_updates, cell.applied_twice);
    return index;
  }

  // The first measurement of a cell, grown (scenario.min_batch_time) until
  // its batch runs long enough, at most kMaxGrowths times; the shorter
  // measurements are dropped. Returns its index and, in `size`, the size
  // its repeats run, so that their spread is the noise alone.
  int RunGrown(const config::ScenarioCell& spec, CellSize& size) {
    const auto& settings = spec.settings;
    int measured = Run(spec, size);
    std::optional<CellResult> previous;  // the measurement before the last
    for (int growth = 0;
         growth < kMaxGrowths && !Stopped() && NeedsGrowth(results_.back(), settings); ++growth) {
      const CellResult& last = results_.back();
      if (last.Range() && settings.workload.UserTables() && size.items >= last.records) {
        // The demo's rows grow with the queue; the user's tables have the
        // rows their data makes, and this range covers every one already.
        spdlog::warn("range cell not grown cell={} rows={} batch_seconds={:.2f} reason={} fix={}",
                     last.index, last.items, last.batch_seconds,
                     log::Value("its range covers every row of the target already"),
                     log::Value("more rows (scenario.data), or a lower scenario.min_batch_time"));
        return measured;
      }
      CellSize grown = Grown(size, settings, last, previous ? &*previous : nullptr);
      std::string note = fmt::format(
          " (grown from {} to {} items: the batch ran {:.1f} s, under scenario.min_batch_time)",
          size.items, grown.items, last.batch_seconds);
      spdlog::info("cell grown cell={} items={} batch_seconds={:.2f} grown_items={}", last.index,
                   size.items, last.batch_seconds, grown.items);
      previous = std::move(results_.back());
      results_.pop_back();
      size = grown;
      measured = Run(spec, size, note);
    }
    if (!Stopped() && NeedsGrowth(results_.back(), settings)) {
      spdlog::warn(
          "cell still under min_batch_time cell={} items={} batch_seconds={:.2f} growths={}",
          measured, size.items, results_.back().batch_seconds, kMaxGrowths);
    }
    return measured;
  }

 private:
  void Progress(const config::ScenarioCell& spec, const CellSize& size, const std::string& note,
                int index) const {
    std::string eta = "unknown";
    if (!results_.empty()) {
      double per_cell = Since(start_) / static_cast<double>(results_.size());
      eta = fmt::format("{:.0f}s", per_cell * static_cast<double>(total_ - results_.size()));
    }
    std::string parameters;
    for (const auto& [key, value] : spec.parameters) parameters += " " + key + "=" + value;
    if (spec.config.batch.range) parameters += " (range job)";
    if (spec.settings.repeat > 1 && size.check_of == 0) {
      parameters += fmt::format(" (repeat {} of {})", size.repeat, spec.settings.repeat);
    }
    if (size.check_of != 0) {
      parameters +=
          fmt::format(" (projection check of cell {}: {} items)", size.check_of, size.items);
    }
    *options_.progress << fmt::format("cell {} of {}{}{} (elapsed {:.0f}s, ETA {})\n", index,
                                      total_, parameters, note, Since(start_), eta)
                       << std::flush;
  }

  const std::string& conninfo_;
  const SimulateOptions& options_;
  std::vector<CellResult>& results_;
  Clock::time_point start_ = Clock::now();
  size_t total_ = 0;
};

}  // namespace

void RunScenario(const std::string& conninfo, const config::Scenario& scenario,
                 const SimulateOptions& options, std::vector<CellResult>& results) {
  if (!options.online_role.empty()) CreateOnlineRole(conninfo, options.online_role);
  if (options.progress != nullptr && !scenario.cells.empty()) {
    for (const auto& [what, text] : DescribeWorkload(scenario.cells.front()))
      *options.progress << what << ": " << text << '\n';
  }
  CellRunner runner(conninfo, scenario, options, results);
  for (const auto& spec : scenario.cells) {
    const auto& settings = spec.settings;
    CellSize size{.items = settings.queue_items, .window = settings.window};
    int measured = 0;
    for (int repeat = 1; repeat <= settings.repeat && !runner.Stopped(); ++repeat) {
      size.repeat = repeat;
      measured = repeat == 1 ? runner.RunGrown(spec, size) : runner.Run(spec, size);
    }
    if (!settings.ChecksProjections() || runner.Stopped()) continue;
    runner.Run(spec, CheckSize(settings, results[static_cast<size_t>(measured) - 1]));
  }
}

}  // namespace coexist::capacity
