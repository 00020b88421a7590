#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config_core/config_error.h"
#include "config_core/policy_config.h"
#include "config_core/target.h"

namespace YAML {
class Node;
}

namespace coexist::config {

using std::chrono::milliseconds;

// `database.shards[i]` — one database of a job whose records are spread
// over several (docs/scale-out.md): every shard holds the coexist schema, the
// target (its share of the records) and the queue of those records' items.
struct ShardConfig {
  // How commands, logs and summaries name it: letters, digits, _ and -, at
  // most 63 characters; unique among the shards.
  std::string name;
  // libpq URL or key=value string, as database.url ("${VAR}" substituted).
  // Never logged.
  std::string url;
  // shard_by: range: the keys whose items go here, from (inclusive) to
  // (exclusive); nullopt: no bound on that side. The ranges of all shards
  // cover every bigint exactly once (checked when the file is read).
  std::optional<long long> from;
  std::optional<long long> to;
  // Where the entry and its url are written, for errors found later.
  Mark at;
  Mark url_at;
};

// database.shard_by: how `coexist enqueue` sends items read from a file or
// stdin to the shards (a query's rows stay on the shard it ran on).
enum class ShardBy {
  kNone,    // not set: only --shard NAME, or a query, tells where items go
  kRange,   // by the shards' `keys` ranges (integer keys)
  kHash,    // FNV-1a 64 of the key's canonical text, modulo the number of shards
  kColumn,  // by the input's shard field (CSV's 4th field, JSON lines' "shard")
};

// `database:` — where the data is. Without a url (and without --database-url,
// COEXIST_DATABASE_URL or PG* variables) coexist uses the `db up` cluster;
// commands that keep state fail without one, commands that erase data start a
// throwaway one; see db/server.h.
struct DatabaseConfig {
  // libpq URL or key=value string; "${VAR}" substitution keeps secrets out of
  // the file. Never logged.
  std::optional<std::string> url;
  // application_name of the batch's connections.
  std::string application_name = "coexist-batch";
  // How long one statement of the batch may run before it is cancelled.
  milliseconds statement_timeout = std::chrono::minutes(5);
  // How long a server may leave coexist without any answer before coexist
  // treats it as gone (db::WatchForStalls: client keepalives,
  // tcp_user_timeout, connect_timeout and a probe). 0 turns it off;
  // else 1s..1h.
  milliseconds stall_timeout = std::chrono::seconds(30);
  // Where url is written, for errors only the connection can find; no line
  // when not written.
  Mark url_at;
  // The job's databases when its records are spread over several (instead
  // of url): `batch run`, `enqueue`, `db install` and `config check
  // --database` work each of them; other commands work the one --shard
  // names. Empty: one database, as above.
  std::vector<ShardConfig> shards;
  Mark shards_at;  // where shards: is written
  ShardBy shard_by = ShardBy::kNone;
  Mark shard_by_at;
  // Shards `batch run` works at once, each run with its own workers and
  // connections. 1..256
  int max_parallel_shards = 4;
};

// `log:` — defaults for --log-level and --log-format (the flags win).
struct LogConfig {
  std::string level = "info";   // trace, debug, info, warn, error, critical, off
  std::string format = "text";  // text or json
};

// `batch:` — how the batch claims and applies items.
enum class RunsMode { kExclusive, kShared };
// What a run does with an item naming a key that has no row in the target.
enum class MissingRows { kApply, kSkip, kFail };

struct BatchConfig {
  // The job's name: its queue items, runs and advisory lock are keyed by it.
  std::string job = "default";
  // Whether the file names the job: `enqueue` never puts items into the
  // default job unasked (--job or batch.job must say which).
  bool job_given = false;
  // Items claimed and applied in one transaction. 1..100000.
  int chunk_size = 500;
  // Worker threads in one process, each with its own connection. 1..64.
  int workers = 1;
  // Attempts before a failing item is marked dead. 1..1000.
  int max_attempts = 5;
  // Timeouts (statement_timeout, lock_timeout) of an item's operation before
  // it is dead: a timeout defers it without charging an attempt, and an item
  // that times out every time would otherwise be deferred forever. 1..1000.
  int max_timeouts = 5;
  // A run stops claiming once this many items failed on their first
  // attempt in a row, with no item done in between (counted by chunks: a
  // chunk that applies any item starts the count again; retries of items
  // that failed before do not count). An operation or a payload that every
  // item fails on (a typo in `params`, a constraint the SQL always breaks)
  // would otherwise spend every item's attempts and kill the whole queue in
  // one run. 0: never stop for it. 0..1000000.
  int max_consecutive_failures = 100;
  // A run that finds the job's lock held exits 4 (busy), unless the holder
  // has held it suspiciously long: a session that is not a coexist run,
  // connected for longer than this, or a coexist run whose heartbeat is this
  // old. Then it exits 5, which schedulers count as a failure. 1s..30d.
  milliseconds busy_timeout = std::chrono::minutes(10);
  // exclusive: one run of the job at a time (a second exits 4). shared: any
  // number of runs, on any hosts, work the job's queue side by side (never
  // beside an exclusive one); docs/batch.md, "Shared runs".
  RunsMode runs = RunsMode::kExclusive;
  Mark runs_at;
  // An item naming a key with no row in the target is counted (`missing`,
  // an items_missing event) whatever this says, and then: apply: the
  // operation runs anyway (for operations that create rows); skip: the
  // item is done without running the operation; fail: the item is dead at
  // once with the error "no row" (docs/batch.md, "Keys with no row").
  MissingRows missing_rows = MissingRows::kApply;
  // Run budgets (docs/batch.md, "Run budgets"); nullopt: none. Each run has
  // its own (a shared run, a shard's run, each of a daemon's runs).
  // max_duration: the run claims no chunk once it has run this long (from
  // its start), finishes the chunks in hand and stops (stop_reason
  // max_duration). 1s..30d.
  std::optional<milliseconds> max_duration;
  // max_items: the run takes at most this many items in hand over all its
  // workers (a range job: rows applied by the walk, then exceptions settled),
  // then stops (stop_reason max_items); a claim never asks for more than
  // is left. 1..1000000000000.
  std::optional<long long> max_items;
  // max_rate: items per second the run's workers take in hand at most,
  // together; it caps, it never stops the run. More than 0, at most 1000000.
  std::optional<double> max_rate;
  // `batch.range:` — a range job: its items are the target's rows that
  // match `where`, walked in key order with a checkpoint, instead of queue
  // items (docs/batch.md, "Range jobs"). nullopt: a queued job.
  struct Range {
    // A boolean SQL condition over the target's columns, e.g.
    // status = 'to_settle'. Required; checked by the database at start.
    std::string where;
    Mark where_at;
  };
  std::optional<Range> range;
  Mark range_at;
};

// `enqueue:` — what `coexist enqueue` adds when the command line names no
// source, so a scheduled unit can run `enqueue` then `batch run` from the
// file alone.
struct EnqueueConfig {
  // SQL returning key[, payload jsonb[, idempotency_key text]], the columns
  // taken by position (as --select). Empty: none; enqueue then needs
  // --select or --file.
  std::string select;
  // Where select is written, for what only the database can tell.
  Mark select_at;
};

// `online:` — the online workload simulator (`coexist online-sim`): virtual
// users that edit the target's rows the way web users do.
struct OnlineMix {
  // Relative weights of the transaction kinds (docs/online-sim.md has the
  // SQL of each). Each 0..1e6; at least one must be positive.
  double view = 60;              // read a record
  double optimistic_edit = 15;   // read, app work, UPDATE ... WHERE version = read
  double pessimistic_edit = 10;  // SELECT ... FOR UPDATE, app work, UPDATE
  double offline_edit = 5;       // edit lock held across a human think time
  double atomic_decrement = 10;  // one UPDATE with a delta and a separate floor
  double nolock = 0;             // read, app work, blind write: shows lost updates
  double multi_edit = 0;         // read multi_edit_keys records, work, update all of them or none
  // The custom kinds' weights are written here too, under their names, and
  // kept in CustomKind::weight.
};

// The built-in kinds as the mix names them (custom kinds may not take these
// names); online-sim's Kind enum is in this order.
inline constexpr std::array<std::string_view, 7> kBuiltinKinds = {
    "view",   "optimistic_edit", "pessimistic_edit", "offline_edit", "atomic_decrement",
    "nolock", "multi_edit"};

// One line of a custom kind's script (docs/online-sim.md, "Custom kinds").
struct ScriptStep {
  enum class Type {
    kSql,        // a SQL statement, sent as a prepared statement of its own
    kSetKey,     // \set NAME random_key: a key drawn like the built-in kinds' keys
    kSetRandom,  // \set NAME random(MIN, MAX): a uniform integer, both inclusive
    kSleep,      // \sleep DURATION: app work, the connection kept
  };
  Type type = Type::kSql;
  // kSql: the line with each :name placeholder replaced by $1, $2, ... in
  // order of first use, and the variable (an index into
  // CustomKind::variables) each $n is bound to, as a text parameter.
  std::string sql;
  std::vector<int> params;
  int variable = -1;                   // kSetKey, kSetRandom: the variable set
  long long min = 0, max = 0;          // kSetRandom
  std::chrono::microseconds sleep{0};  // kSleep. 0..60s
  Mark at;                             // where the line is written
};

// `online.custom_kinds.NAME` — a transaction kind written as a script, run
// like the built-in kinds (picked by its weight in the mix, counted by
// outcome and latency under its name).
struct CustomKind {
  std::string name;  // letters, digits, _; not a built-in kind's name
  // Its weight, written in online.mix under its name; 0 when the mix leaves
  // it out (defined, never run). 0..1e6
  double weight = 0;
  // The names \set gives values to, in order of their first \set.
  std::vector<std::string> variables;
  // In order; at least one kSql step. At most 16 placeholders a statement.
  std::vector<ScriptStep> script;
  Mark at;  // the name's place
};

// The YAML values of online.model, online.think_distribution,
// online.key_distribution and online.lock_mode, described below.
enum class LoadModel { kClosed, kOpen };
enum class ThinkDistribution { kFixed, kExponential, kLognormal };
enum class KeyDistribution { kUniform, kZipf, kHotSet };
enum class LockMode { kLockTimeout, kNowait };
// "closed", "open": for logs and reports.
const char* ToString(LoadModel model);

struct OnlineConfig {
  // closed: `users` virtual users, each thinking between transactions;
  // open: transactions arrive as a Poisson process at `rate` per second.
  LoadModel model = LoadModel::kClosed;
  int users = 50;     // closed model's virtual users. 1..100000
  double rate = 100;  // open model's arrivals per second. 0.001..1e6
  // Think time between a closed user's transactions: its mean, and its
  // distribution (fixed, exponential or lognormal with shape think_sigma).
  milliseconds think_time = std::chrono::seconds(1);
  ThinkDistribution think_distribution = ThinkDistribution::kExponential;
  double think_sigma = 0.5;  // lognormal's sigma. 0.01..5
  // Connections shared by all users, like an application server's pool;
  // a transaction waits for a free one (that wait is measured). 1..10000
  int pool_size = 16;
  // Which record a transaction touches: uniform, zipf (exponent zipf_s) or
  // hot_set (hot_traffic of the transactions go to hot_keys of the records).
  KeyDistribution key_distribution = KeyDistribution::kUniform;
  double zipf_s = 1.0;       // 0.01..10
  double hot_traffic = 0.8;  // 0..1
  double hot_keys = 0.2;     // 0..1, exclusive of 0
  // The first `records` keys of the target (in key order); 0: all of them.
  long long records = 0;
  OnlineMix mix;
  // multi_edit: how many distinct records one transaction edits. 2..1000
  int multi_edit_keys = 4;
  // Transaction kinds written as SQL scripts, in file order.
  std::vector<CustomKind> custom_kinds;
  // Optimistic and multi_edit retries after the first attempt before giving up. 0..1000
  int max_retries = 5;
  // Capped exponential backoff with full jitter between optimistic retries:
  // a random wait in [0, min(cap, base * 2^attempt)]. base 0 retries at once.
  milliseconds backoff_base = milliseconds(5);
  milliseconds backoff_cap = milliseconds(200);
  // How pessimistic edits wait for a row lock: lock_timeout (wait up to
  // lock_timeout; 0 waits forever) or nowait (fail at once with 55P03).
  LockMode lock_mode = LockMode::kLockTimeout;
  milliseconds lock_timeout = std::chrono::seconds(2);
  // Offline edits: the mean human think time the edit lock is held
  // (distributed like think_time), the lock's time to live (renewed at half
  // of it while the user still edits), and the share of users that close
  // the browser instead of saving (the lock then leaks until it expires).
  milliseconds offline_hold = std::chrono::seconds(5);
  milliseconds offline_ttl = std::chrono::seconds(30);
  double offline_abandon = 0.1;  // 0..1
  // Application work between read and write (what seed 001 calls app work).
  milliseconds app_work = milliseconds(2);
  // The integer column edits change (each edit adds -1, the atomic
  // decrement subtracts atomic_delta unless that would go below atomic_floor).
  std::string value_column = "stock";
  long long atomic_delta = 1;  // 1..1e9
  long long atomic_floor = 0;
  // application_name of the simulator's connections (batch_priority matches
  // it to decide whose backends it may cancel).
  std::string application_name = "coexist-online";
  // Seed of every random choice; the same seed gives the same sequence of
  // choices (timing still varies).
  long long seed = 1;
  // Open model: transactions whose latency (from their scheduled start)
  // exceeds this are counted late. 0: none counted.
  milliseconds latency_limit = milliseconds(0);
};

// How many target records an item names (`operation.keys`).
enum class ItemKeys {
  kOne,   // one key per item; $1 is the key (item_sql) or the keys (chunk_sql)
  kMany,  // items of several keys (an order's products); $1 carries arrays
};

// `operation:` — what the batch does per item. Exactly one of item_sql,
// chunk_sql and set. Parameters are bound, never spliced.
struct OperationConfig {
  // Per-item SQL: $1 is the record key (of the key column's type; with
  // keys: many an array of them), $2.. the payload fields named in `params`
  // (text; cast them). Run for a whole chunk in one statement through a
  // session-local SQL function over unnest arrays.
  std::string item_sql;
  // Chunk SQL: $1 is the chunk's keys as text[] (cast it: $1::bigint[]; with
  // keys: many one array literal per item, cast each: k::bigint[]), $2..
  // arrays of the payload fields in `params` (text literals; cast them,
  // e.g. $2::integer[]).
  std::string chunk_sql;
  // The SET list of an UPDATE of the target's rows (`status = 'settled'`):
  // coexist writes the UPDATE of the chunk's keys (a range job's repeats
  // its predicate: docs/batch.md, "Range jobs"). No params, keys: one.
  std::string set;
  ItemKeys keys = ItemKeys::kOne;
  // Payload fields bound as $2, $3, ...; a missing field binds NULL.
  std::vector<std::string> params;
  std::vector<Mark> params_at;  // where each field of params is written
  // Where item_sql and chunk_sql are written, for the errors of checks only
  // the database can make (batch/runner.cpp); no line when not written.
  Mark item_sql_at;
  Mark chunk_sql_at;
  Mark set_at;

  bool Configured() const { return !item_sql.empty() || !chunk_sql.empty() || !set.empty(); }
  // The form written (the loader allows one): "item_sql", "set" or
  // "chunk_sql", and where it is written.
  const char* Form() const {
    return !item_sql.empty() ? "item_sql" : !set.empty() ? "set" : "chunk_sql";
  }
  const Mark& FormAt() const {
    return !item_sql.empty() ? item_sql_at : !set.empty() ? set_at : chunk_sql_at;
  }
};

// Health thresholds of `pacing.max_load` / `pacing.critical_load`. Each
// signal is compared with its own threshold: the load is too high when any
// signal reaches (>=) its threshold; 0 turns that signal's check off. The
// signals are described in docs/pacing.md.
struct LoadThresholds {
  int lock_waiters = 0;               // sessions of this database waiting on a lock. 0..100000
  int active_sessions = 0;            // sessions of this database running a statement. 0..100000
  milliseconds replication_lag{0};    // max replay_lag of pg_stat_replication
  int vacuum = 0;                     // (auto)vacuums running on the target table. 0..100
  milliseconds batch_lock_wait{0};    // the batch's own lock wait in its last chunk
  milliseconds statement_latency{0};  // the batch's own statement latency in its last chunk
};

// pacing.critical_action: what a load still critical after critical_recheck does.
enum class CriticalAction { kHibernate, kStop };

// pacing.synchronous_commit: the batch's worker sessions' setting
// (PostgreSQL's synchronous_commit, for the batch's transactions only).
enum class SynchronousCommit { kOff, kLocal, kOn };

// pacing.online_latency.probe: the probe's statement. lock: SELECT ... FOR
// NO KEY UPDATE of one row (sees row locks, CPU and I/O as an online edit
// does); read: the same SELECT without the lock (CPU and I/O only).
enum class LatencyProbeKind { kLock, kRead };

// pacing.online_latency.signal: what the objective is held to. sessions:
// the latencies of the application's own statements, read from
// pg_stat_activity (needs pg_read_all_stats); probe: coexist's own
// online-shaped statement, timed.
enum class LatencySignal { kSessions, kProbe };

// How the batch begins once the baseline is known. slow: at a quarter of
// the duty and the shortest chunks, given back x2 per decision with
// headroom (about 2 s to full speed); full: at full speed at once.
enum class LatencyStart { kSlow, kFull };

// `pacing.online_latency:` — the online side's latency objective
// (docs/pacing.md "Latency objective"): coexist probes the target like an
// online transaction and slows the batch while the probe's percentile is
// above objective x baseline.
struct OnlineLatencyConfig {
  // How much slower online may get while the batch runs: "1.25x" or 1.25. >1..100
  double objective = 1.25;
  // The probe's latency without the batch; nullopt: measured before the first
  // chunk and refreshed while the batch is paused. >0
  std::optional<std::chrono::microseconds> baseline;
  // Which percentile of a decision's samples is compared. 50..99.9;
  // nullopt: kSessionsPercentile with signal sessions (hundreds of samples a
  // second), kProbePercentile with the probe (10 per decision).
  std::optional<double> percentile;
  static constexpr double kSessionsPercentile = 95;
  static constexpr double kProbePercentile = 90;
  // sessions falls back to the probe, saying so, when the role may not see
  // other roles' sessions or learning sees too few online statements.
  LatencySignal signal = LatencySignal::kSessions;
  LatencyProbeKind probe = LatencyProbeKind::kLock;
  // How often the probe runs, or pg_stat_activity is read. 5ms..10s
  milliseconds probe_interval{50};
  // The probes one decision looks at. 100ms..1m, at least 5 probe intervals
  milliseconds window = std::chrono::seconds(2);
  // How long the baseline is measured before the first chunk. 100ms..10m
  milliseconds learn_time = std::chrono::seconds(2);
  // The smallest share of time the batch keeps working, however slow online
  // is (the count signals and critical_load still pause it). 0.01..1
  double min_duty = 0.05;
  // A measured baseline is learned again when the batch has run below full
  // duty this long since the last one: the batch pauses for learn_time, so
  // that a host that got busier for reasons of its own does not hold a slowed
  // batch down. A batch at full duty is not held. 0: only while paused
  // anyway. 0..24h
  milliseconds relearn_every = std::chrono::seconds(30);
  // Latencies within baseline + tolerance always meet the objective: the
  // probe's own jitter on a busy host is of this order. 0..1m; nullopt:
  // kProbeTolerance with the probe, 0 with signal sessions (the
  // application's statements are what its users wait for, jitter included).
  std::optional<std::chrono::microseconds> tolerance;
  static constexpr std::chrono::microseconds kProbeTolerance{500};
  // The second knob: while online is over the objective, chunks are cut
  // towards this duration first (halving pacing.chunk_time per decision),
  // then the duty; with headroom the duty comes back first, then the
  // chunks' length. nullopt: kMinChunkScale x pacing.chunk_time; equal to
  // chunk_time: the knob is off. 1ms..pacing.chunk_time
  std::optional<milliseconds> min_chunk_time;
  static constexpr double kMinChunkScale = 0.25;
  // Measured in the demo: a batch that began at full speed put its first
  // second's chunks, unjudged, into online's p99 (14-53x the baseline); one
  // that begins slow is judged before it gets there.
  LatencyStart start = LatencyStart::kSlow;
};

// pacing.cpu_priority: low, the lowest priority (nice 19).
inline constexpr int kLowCpuNice = 19;

// `pacing:` — how hard the batch pushes while online users are there
// (docs/pacing.md): chunk sizing to a target duration, health-based
// throttling, and operator control (flag files, control socket).
struct PacingConfig {
  // true: chunk sizes follow chunk_time; false: every chunk is batch.chunk_size.
  bool adaptive = true;
  // The duration one chunk should take. 1ms..1h
  milliseconds chunk_time{200};
  // Bounds of the adaptive chunk size. 1..100000, min_chunk <= max_chunk.
  int min_chunk = 10;
  int max_chunk = 5000;
  // Largest growth factor from one chunk to the next. 1.0..10
  double max_growth = 1.2;
  // A chunk that took longer than shrink_after x chunk_time (or hit a
  // timeout) shrinks the next one at once instead of through the average. 1..100
  double shrink_after = 2.0;
  // Weight of the newest chunk in the decaying average of items/s. 0.01..1
  double rate_weight = 0.3;
  // How often the health signals are read (at most once per interval). 10ms..10m
  milliseconds check_interval = std::chrono::seconds(1);
  // max_load: the batch pauses while any signal reaches its threshold and
  // resumes after all were below for hold_time (re-checked each interval).
  LoadThresholds max_load{.lock_waiters = 10, .replication_lag = std::chrono::seconds(10)};
  milliseconds hold_time = std::chrono::seconds(2);  // 0..1h
  // critical_load: checked again after critical_recheck; still critical then
  // either hibernates for hibernate_time (critical_action: hibernate) or
  // stops the run cleanly (critical_action: stop).
  LoadThresholds critical_load{.lock_waiters = 100};
  milliseconds critical_recheck = std::chrono::seconds(1);  // 0..10m
  CriticalAction critical_action = CriticalAction::kHibernate;
  milliseconds hibernate_time = std::chrono::minutes(1);  // 1ms..24h
  // Optional SQL returning one number; a value > 0 throttles like max_load.
  // Empty: not used.
  std::string throttle_query;
  // Operator control: while pause_file exists the batch pauses; when
  // stop_file appears the run stops cleanly. Empty: not watched.
  std::string pause_file;
  std::string stop_file;
  // Unix socket for `coexist ctl`, created 0600. Empty: no socket.
  std::string control_socket;
  // The online latency objective; nullopt: not used (the count signals only).
  std::optional<OnlineLatencyConfig> online_latency;
  // pacing.cpu_priority as a nice value: the batch's worker threads and
  // their PostgreSQL backends (through the prioritize extension) run at it,
  // so the online sessions get the cores first. 0 (`normal`, the default):
  // nothing is reniced; `low` is kLowCpuNice; or a number 0..19.
  int cpu_nice = 0;
  // SET synchronous_commit on the batch's worker sessions; nullopt (the
  // default): the server's setting.
  std::optional<SynchronousCommit> synchronous_commit;
};

// `metrics:` — Prometheus metrics (docs/operations.md lists the names).
struct MetricsConfig {
  // Textfile for node_exporter's textfile collector, rewritten at the end
  // of every `batch run` and of every daemon run (temporary file + rename).
  // Empty: not written.
  std::string textfile;
  // host:port where `batch daemon` serves /metrics over HTTP, e.g.
  // "127.0.0.1:9187" or "[::1]:9187"; port 0 picks a free port (logged).
  // Empty: no endpoint. Only loopback hosts unless allow_remote.
  std::string listen;
  // Accept a non-loopback listen host (the endpoint has no authentication).
  bool allow_remote = false;
  // The daemon's listen port also serves the live dashboard (GET /, the
  // page of `coexist dashboard`, and /api/state) beside /metrics. Needs
  // listen.
  bool dashboard = false;
  // A file holding the token the dashboard's pause and resume buttons need
  // (dashboard/server.h); empty: the page is read-only. Needs dashboard.
  std::string dashboard_token_file;
};

// `daemon:` — `coexist batch daemon` (docs/operations.md).
struct DaemonConfig {
  // Longest wait for work between checks of the queue when no NOTIFY
  // arrives (deferred items coming due, windows opening, a busy job). 100ms..24h
  milliseconds poll_interval = std::chrono::seconds(30);
  // Reconnect backoff when the database is gone: the first wait, doubling
  // up to reconnect_max. 10ms..1h and reconnect_initial..24h.
  milliseconds reconnect_initial = std::chrono::seconds(1);
  milliseconds reconnect_max = std::chrono::seconds(60);
};

// `retention:` — how long finished work is kept (docs/operations.md).
// `batch daemon` deletes older rows every `interval`, and `coexist queue
// purge` on demand, a few thousand rows a statement. 0s keeps that kind
// forever; otherwise 1h..3650d. A done item is what makes its idempotency
// key enqueue once: once it is purged, the same key enqueues a new item.
struct RetentionConfig {
  milliseconds done_items = std::chrono::days(7);  // done queue items, by done_at
  milliseconds events = std::chrono::days(30);     // coexist.events rows, by at
  milliseconds runs = std::chrono::days(90);  // finished runs, by ended_at; never a running one
  // How often the daemon purges (the first time when it starts). 1m..24h
  milliseconds interval = std::chrono::hours(1);
};

// A validated configuration. Load* functions return it whole or throw
// ConfigError; nothing downstream re-validates.
struct Config {
  std::string source;  // the file it came from, for messages
  DatabaseConfig database;
  LogConfig log;
  config::TargetTable target;
  // Where target's keys are written, for the errors only the database can
  // find (a table or column missing); no line when a key is not written.
  struct TargetMarks {
    Mark table, key_column, version_column, owner_column;
  } target_at;
  // `targets:` — more tables the job's operation writes beside the target
  // (an order's row beside its products' rows): checked like the target,
  // and given the version and guard triggers (and the job's windows) by
  // `db install` and every run. Items name records of `target` only. No
  // owner column: only the target's rows are taken over.
  std::vector<config::TargetTable> targets;
  std::vector<TargetMarks> targets_at;
  BatchConfig batch;
  EnqueueConfig enqueue;
  PacingConfig pacing;
  OnlineConfig online;
  PolicyConfig policy;
  OperationConfig operation;
  MetricsConfig metrics;
  DaemonConfig daemon;
  RetentionConfig retention;
};

// Reads and validates a YAML file. Throws ConfigError (with file:line:column)
// for every problem: unreadable file, YAML syntax, unknown keys, wrong types,
// out-of-range values, bad durations and names, missing ${VARIABLES}.
Config LoadFile(const std::string& path);
// The same for YAML text; `name` stands for the file in messages.
Config LoadString(const std::string& yaml, const std::string& name);
// The same for parsed YAML; LoadScenario reads each cell of a sweep with it.
Config ReadConfig(const YAML::Node& root, const std::string& name);

}  // namespace coexist::config
