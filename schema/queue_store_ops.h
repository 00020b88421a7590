#pragma once

// The queue store, part two (part one: queue_store.h): what operators and
// reports read and repair on the queue and the runs. The queue and runs
// commands: `coexist queue status`, `queue retry --dead`, `queue purge`,
// `runs list`, `runs show` (docs/operations.md, "Repair without SQL" and
// "Retention"); the daemon's retention calls PurgeOldRows too; `ctl --job J
// stop` calls RequestJobStop. `runs sweep`
// is batch::SweepDeadRuns. `db status` reads ReadQueueTotals, capacity
// planning the cell functions at the end.
//
// The commands' functions use `conn` for transactions of its own (each says which)
// and leaves none open, so `conn` must have no transaction open (libpqxx
// throws pqxx::usage_error otherwise). An empty `job` means every job.
// Errors are libpqxx's, uncaught: pqxx::broken_connection when the server
// goes away, pqxx::sql_error when the database refuses a statement (42P01
// when the coexist schema is not installed, 42501 when the role lacks a
// right on coexist.queue, runs or events), pqxx::in_doubt_error when the
// connection breaks during a commit.
//
// Thread safety: plain functions; a connection is used by one thread at a
// time, as libpqxx requires.

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pqxx {
class connection_base;
class transaction_base;
}  // namespace pqxx

namespace coexist::db {

// One job's queue, as `coexist queue status` shows it.
struct JobQueueStatus {
  std::string job;
  // queued, deferred, done, dead, cancelled (zeros included)
  std::map<std::string, long long> by_state;
  // Seconds since the oldest queued or deferred item was enqueued;
  // nullopt when the job has none.
  std::optional<double> oldest_queued_seconds;
  // Deferred items by defer_reason ("(none)" when it has none).
  std::map<std::string, long long> defer_reasons;
};

// How many dead items of a job share one last_error.
struct DeadError {
  std::string job;
  std::string error;  // last_error; "(no error kept)" when it is NULL
  long long items = 0;
};

struct QueueStatus {
  // One per job that has items in coexist.queue (any state), by job name;
  // empty when the queue holds none of the selected job(s).
  std::vector<JobQueueStatus> jobs;
  std::vector<DeadError> top_dead_errors;  // most frequent first, at most 10
  // The same for items that failed and wait to be tried again (queued or
  // deferred, attempts > 0, an error kept): what a run that stopped on
  // failures in a row (batch.max_consecutive_failures) met, before any died.
  std::vector<DeadError> top_retry_errors;
};

// `coexist queue status` for `job`, or for every job when it is empty, in
// one read-only transaction (READ COMMITTED: each statement sees the queue
// as it is then, so the counts of a queue that a run works on may not add
// up to one instant). Writes nothing.
QueueStatus ReadQueueStatus(pqxx::connection_base& conn, const std::string& job);

// `coexist queue retry --dead`: the dead items of `job` (every job when
// empty) go back to queued, claimable at once: attempts and timeouts reset to 0,
// last_error kept, deferrals unchanged. A retried item goes before the
// later pending items of its key, which wait for it again (the claim's key
// order; they are marked follows_pending). One statement in one transaction
// of its own, which also writes one coexist.events row per job that had
// dead items (kind items_retried, actor = `actor`, details.items). Sends no
// NOTIFY: a daemon finds the items at its next poll. Returns how many items
// were retried (0: none were dead; nothing is written then).
long long RetryDeadItems(pqxx::connection_base& conn, const std::string& job,
                         const std::string& actor);

// `coexist ctl --job J stop`: asks every running run of `job` (on any
// host, exclusive or shared) to stop claiming, through its runs row
// (0022's request_job_stop: stop_requested_at and _by set, one
// job_stop_requested event per run, actor = `actor`), in one transaction of
// its own. Each run reads the request in its next heartbeat (once a
// second) and stops as `ctl stop` would (stop_reason job_stop). Returns the
// ids of the runs asked, oldest first; a run asked before is not asked
// again, and a run that starts afterwards is not asked at all. Empty: none
// was running.
std::vector<long long> RequestJobStop(pqxx::connection_base& conn, const std::string& job,
                                      const std::string& actor);

// How old a row must be to go: a done item since done_at, an event since
// `at`, a finished run since ended_at. Zero (or less) keeps that kind.
struct PurgeAges {
  std::chrono::milliseconds done_items{0};
  std::chrono::milliseconds events{0};
  std::chrono::milliseconds runs{0};
};

struct PurgeCounts {
  long long done_items = 0;
  long long events = 0;
  long long runs = 0;
};

// Rows one purge statement deletes at most.
inline constexpr int kPurgeBatchRows = 5000;

// `coexist queue purge` and the daemon's retention: deletes done items,
// events and finished runs older than their age, of every job, oldest
// first. No transaction spans the purge: each DELETE of at most
// kPurgeBatchRows rows commits on its own (autocommit) and skips rows
// another session has locked (SKIP LOCKED), so it never holds locks for
// long nor waits behind a batch; a skipped row goes at the next purge. The
// cutoff (now - age) is fixed when each kind starts. Never touches queued,
// deferred or dead items, nor a run whose outcome is 'running'.
//
// When anything went, a last statement writes one coexist.events row (kind
// queue_purged, actor = `actor`, details: the counts). `stop` (may be null)
// is read before every DELETE: once set, no further DELETE starts, and
// what went so far is reported and audited. When a statement fails the
// exception propagates: the DELETEs before it stay committed, and no
// queue_purged row is written. Returns what it deleted.
PurgeCounts PurgeOldRows(pqxx::connection_base& conn, const PurgeAges& ages,
                         const std::string& actor, const std::atomic<bool>* stop = nullptr);

// One coexist.runs row, as `coexist runs list` shows it.
struct RunRow {
  long long run_id = 0;
  std::string job, policy, host;
  int pid = 0;  // the run's process on `host`
  // "YYYY-MM-DD HH:MI:SS+TZ" in the session's time zone; ended_at is ""
  // while the run is running.
  std::string started_at, ended_at;
  std::string outcome;  // running, succeeded, incomplete, failed, abandoned
  long long claimed = 0, done = 0, deferred = 0, dead = 0;
  double seconds = 0;  // ended_at (or now, while running) - started_at
  // A running run's pacer state as its last heartbeat wrote it
  // (Pacer::PacingJson); "null" when there is none (a run that ended or
  // died, or one before its first heartbeat).
  std::string pacing_json = "null";
};

// `coexist runs list`: the `limit` newest runs of `job` (every job when
// empty), newest (highest run_id) first, in one read-only transaction.
// `limit` 0 returns none; a negative one is refused by PostgreSQL
// (pqxx::sql_error; the CLI allows 1..100000). Empty: no runs recorded (or
// all purged by retention).
std::vector<RunRow> ListRuns(pqxx::connection_base& conn, const std::string& job, int limit);

struct RunDetail {
  RunRow run;
  // runs.details: the run's settings, merged with its summary (docs/batch.md,
  // --json) once it finished.
  std::string details_json;
  // The run's coexist.events rows by kind (those retention has not purged).
  std::map<std::string, long long> events_by_kind;
};

// `coexist runs show ID`, in one read-only transaction; nullopt when there
// is no such run (never started, or purged by retention).
std::optional<RunDetail> ShowRun(pqxx::connection_base& conn, long long run_id);

// Every job's items by state (queued, deferred, done, dead, cancelled;
// zeros included) and the number of runs recorded, for `db status`. Reads in `tx`.
struct QueueTotals {
  std::map<std::string, long long> by_state;
  long long runs = 0;
};
QueueTotals ReadQueueTotals(pqxx::transaction_base& tx);

// A run of `job` (any job when empty) that is working now: outcome
// running and its heartbeat fresh (coexist.live_run_heartbeat, 0030; before
// that migration, any running run). `db uninstall` refuses while one is.
// Reads in `tx`.
struct LiveRun {
  long long run_id = 0;
  std::string job;
};
std::optional<LiveRun> FindLiveRun(pqxx::transaction_base& tx, const std::string& job);

// How the payloads of `job`'s waiting items (queued or deferred; at most
// `sample` of them) carry the fields an operation binds (operation.params):
// for each of `fields`, how many of the looked-at payloads have it, and the
// fields those payloads do have, most common first (at most 10). nullopt
// when the coexist schema is not installed yet. Reads in `tx`.
struct PayloadFields {
  long long looked_at = 0;
  std::vector<long long> having;  // per field of `fields`
  std::vector<std::string> present;
};
std::optional<PayloadFields> ReadPayloadFields(pqxx::transaction_base& tx, const std::string& job,
                                               const std::vector<std::string>& fields, int sample);

// A capacity cell's fresh start: empties the queue, the runs, the events,
// the edit locks, the windows, the takeovers and the range checkpoints (a
// range cell starts a new pass from the first key, never an earlier
// cell's), restarting their ids. In `tx`; takes ACCESS EXCLUSIVE locks on
// them until it ends.
void EmptyCoexistTables(pqxx::transaction_base& tx);

// `job`'s items by state, read in `tx`.
struct JobCounts {
  long long done = 0, deferred = 0, dead = 0, queued = 0;
  long long cancelled = 0;  // `coexist items cancel`: never run, not done
};
JobCounts CountJobItems(pqxx::transaction_base& tx, const std::string& job);

// How far `job`'s done items and the rows of `ledger` (a table with a
// record_key column, one row per application) disagree: the sum over
// records of |ledger rows - done items|; 0 when every done item was applied
// exactly once. `ledger` is a trusted, already quoted name.
long long LedgerMismatch(pqxx::transaction_base& tx, const std::string& job,
                         const std::string& ledger);

// `job`'s done chunks as the database saw them: the items one transaction
// set done share its xid (xmin); when (seconds after its run's start, the
// first done_at of the chunk) and how many, in the order they ended.
struct DoneChunk {
  double at_seconds = 0;
  long long items = 0;
};
std::vector<DoneChunk> ReadDoneChunks(pqxx::transaction_base& tx, const std::string& job);

// A capacity cell's range job (docs/capacity.md, "Range jobs against
// queued jobs"). A range chunk leaves no done_chunks row: RecordRangeChunks
// puts a trigger on coexist.range_checkpoints that records each chunk's
// applied rows, run and time in public.simulate_range_chunks (emptied), a
// table of the cell's throwaway database; ReadRangeChunks reads them with
// the exceptions' done chunks, in the order they ended.
void RecordRangeChunks(pqxx::transaction_base& tx);
std::vector<DoneChunk> ReadRangeChunks(pqxx::transaction_base& tx, const std::string& job);
// The demo's ledger check of a range cell: every row of the range
// (public.batch_range_rows) applied exactly once (public.batch_ledger),
// except those the queue still holds (an exception deferred, dead or
// queued: not applied), and no other row applied; the sum of the
// differences. A row never reached counts only when the pass `finished`;
// otherwise the window stopped the walk before it.
long long RangeLedgerMismatch(pqxx::transaction_base& tx, const std::string& job, bool finished);

// Fresh planner statistics for the queue (after a large enqueue). Outside
// a transaction block: `tx` is a nontransaction.
void AnalyzeQueue(pqxx::transaction_base& tx);
// VACUUM ANALYZE of the queue: also its visibility map, so that index-only
// scans need no heap visits (the benchmarks start every measurement so).
void VacuumQueue(pqxx::transaction_base& tx);

}  // namespace coexist::db
