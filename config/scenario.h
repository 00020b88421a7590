#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace coexist::config {

// `scenario.objectives:` — what the operator requires of a policy. A policy
// is recommended only when its cell meets every one; the report says which
// it missed and by how much. The batch must also finish inside
// `scenario.window`, the window objective.
struct Objectives {
  // Online p99 while the batch runs / online p99 during the warm-up, at most.
  double max_p99_ratio = 2;  // 1..1000000
  // Online transactions that failed while the batch ran (refused, revoked,
  // cancelled, terminated, timed out, gave up, deadlocked...), in percent of
  // those started, at most. Users' own version conflicts and edit-lock
  // waits on each other are not counted: they happen without a batch too.
  double max_error_percent = 1;  // 0..100, written "1%"
  // Items done at the end of the batch, in percent of those queued, at least.
  double min_done_percent = 99;  // 0..100
  // Items left deferred (for a later run), in percent of those queued, at most.
  double max_deferred_percent = 1;  // 0..100
};

// `scenario.data[].columns.NAME` — how one column of generated rows is filled.
struct GeneratedColumn {
  std::string name;
  // A SQL expression over n (the row's number, 1..rows), cast to the
  // column's type: the written SQL, or what a named generator stands for
  // (sequence: n; uuid: a uuid of the table and n; random(MIN, MAX)).
  std::string expression;
  // key(SCHEMA.TABLE.COLUMN[, uniform|zipf]): a value of that column of a
  // table filled before this one, picked with that distribution (zipf: the
  // i-th smallest key with a probability proportional to 1/i). Empty table:
  // not a key() column.
  std::string key_schema, key_table, key_column;
  bool key_zipf = false;
  std::string key;  // "scenario.data[1].columns.amount", for messages
  Mark at;          // the generator's place
};

// `scenario.data[]` — one table of the user's schema filled with generated rows.
struct GeneratedTable {
  std::string schema = "public", table;
  long long rows = 0;  // 1..100000000
  // Columns left out get their defaults.
  std::vector<GeneratedColumn> columns;
  // A SQL condition over the generated columns: rows that fail it are not
  // inserted ("" keeps every row). Rows that break a unique constraint are
  // skipped too, so a table may get fewer rows than `rows`.
  std::string where;
  std::string key;  // "scenario.data[1]", for messages
  Mark at, where_at;
};

// `scenario.sample:` — rows copied from a source database, read in a READ
// ONLY transaction (never written), into the table of the same name that
// scenario.schema creates.
struct SampleSource {
  // The source's connection string: `from` is a libpq URL or key=value
  // string (${VAR} substituted), or the name of an environment variable
  // holding one. Never printed: messages use db::DescribeConninfo.
  std::string conninfo;
  std::string schema = "public", table;
  long long rows = 1000;  // at most this many, 1..100000000
  std::string where;      // SQL condition on the source table; "" takes any rows
  Mark at, from_at, where_at;
};

// The user's workload (docs/capacity.md, "Your own table and transactions"):
// their tables, filled with generated or sampled rows in every cell instead
// of the demo table, and their job's batch operation. Empty: the demo.
struct Workload {
  // scenario.schema: a SQL file (path relative to the scenario file) that
  // creates the user's tables, run afresh in every cell after dropping the
  // schemas it creates (and the tables it creates outside them).
  std::string schema_file;  // as resolved; "" for the demo table
  std::string schema_sql;
  std::vector<std::string> created_schemas;  // CREATE SCHEMA names
  std::vector<std::string> created_tables;   // CREATE TABLE names, schema.table
  std::vector<GeneratedTable> data;          // filled in order, after the sample
  std::optional<SampleSource> sample;
  // scenario.job: a job configuration (path relative to the scenario file)
  // whose target, targets, operation and enqueue.select the cells use, and
  // whose batch: keys are defaults under the scenario's.
  std::string job_file;  // as resolved; "" when not given
  // scenario.applied_check: SQL returning one number, the items not applied
  // exactly once (a done item not applied, or any applied twice); 0 is the
  // guarantee. Checked after every cell. Empty: the demo's ledger check on
  // the demo table without a job, none otherwise.
  std::string applied_check;
  // scenario.invariant: SQL returning one value that neither the online
  // transactions nor the batch may change (e.g. the sum of balances): a
  // change after the cell is a lost update.
  std::string invariant;
  Mark schema_at, job_at, applied_check_at, invariant_at;

  bool UserTables() const { return !schema_file.empty(); }
};

// Rows of public.products one cell seeds, at most (scenario.records, and a
// grown or a check cell's rows).
constexpr long long kMaxSeededRecords = 100'000'000;

// The rows that give `items` as many items per row as `items_of` had over
// `records_of` (rounded up): a grown or a check cell's rows. In whole
// numbers: at most 1e8 x 1e8, well inside a long long.
constexpr long long RowsInProportion(long long items, long long items_of, long long records_of) {
  return (items * records_of + items_of - 1) / items_of;
}

// `scenario:` — a capacity-planning run (`coexist simulate`): prepare data,
// run the online load, run the batch inside it, measure. Defaults below.
struct ScenarioSettings {
  std::string name;         // default: the file's name without .yaml
  std::string description;  // shown in the report
  // Rows of the demo target (public.products) seeded afresh for each cell;
  // with the user's tables (workload.schema_file), their rows are what
  // workload.data and workload.sample make.
  long long records = 2000;  // 1..100000000
  // Items queued for the batch in each cell, spread evenly over the records
  // (the target's keys); with the job's enqueue.select, its first rows, at
  // most this many.
  long long queue_items = 2000;  // 1..100000000
  // Online load alone before the batch starts, and after it ends.
  milliseconds warmup = std::chrono::seconds(5);
  milliseconds cooldown = std::chrono::seconds(5);
  // The batch must finish inside this; a batch still running then is
  // stopped (it drains its chunk) and the cell counts as not finished.
  milliseconds window = std::chrono::seconds(60);
  // For the projection in the report: the production queue size and the
  // production window it must fit. 0: no projection.
  long long production_queue_items = 0;
  milliseconds production_window{0};
  // After each cell, a check cell with this many queued items (at least
  // queue_items): the report sets the duration the model of the first cell
  // projects for it against the one measured. 0: no check cells. A check
  // cell's window is the window scaled by projection_check / queue_items,
  // twice over (at most 24 h), so that it runs to its end.
  long long projection_check = 0;
  // `projection_check: 5x`: each check cell queues this many times the items
  // of the cell it checks (as that cell was measured, grown or not), so a
  // cell that scenario.min_batch_time grew is still checked at a larger
  // queue. 0: projection_check is a count (or 0).
  double projection_check_times = 0;
  bool ChecksProjections() const { return projection_check > 0 || projection_check_times > 0; }
  // Each cell's batch runs at least this long, so that its figures are
  // steady: a cell whose batch finished sooner is measured again with its
  // queue grown (queue_items x min_batch_time / the measured time x 1.2, at
  // most three times), and its window with it. 0: cells are not grown.
  milliseconds min_batch_time{0};  // 0..1h, at most the window
  // Each cell is measured this many times, each on fresh data; the report
  // gives the median and the spread (min-max) of the key figures, and the
  // recommendation judges the median.
  int repeat = 1;  // 1..100
  // Runs of the job each cell starts at once, side by side on its queue
  // (docs/batch.md, "Shared runs"); the cell's batch figures are theirs
  // together. Above 1 it implies batch.runs: shared (the scenario writing
  // batch.runs: exclusive is a configuration error); 1 runs as batch.runs says.
  int batch_processes = 1;  // 1..16
  Objectives objectives;
  Workload workload;
};

// One `sweep:` entry: a dotted configuration key and the values it takes.
struct SweepAxis {
  std::string key;  // "policy.name", "online.users", "batch.chunk_size", ...
  std::vector<std::string> values;
};

// One cell of the sweep: a complete, validated configuration.
struct ScenarioCell {
  int index = 0;                                  // 1-based
  std::map<std::string, std::string> parameters;  // swept key -> value
  // The value of the online load key (online.users or online.rate) when it
  // is swept, e.g. "online.users=50"; "" otherwise.
  std::string load_level;
  // The cell's scenario settings: scenario.* keys may be swept too.
  ScenarioSettings settings;
  Config config;
};

struct Scenario {
  ScenarioSettings settings;  // as the file (and its overrides) say, before the sweep
  std::vector<SweepAxis> sweep;
  std::vector<ScenarioCell> cells;  // the cartesian product of the sweep, in order
};

// Loads a scenario file: the usual configuration sections, plus `scenario:`,
// `sweep:` (key: [values]) and `policy_options:` (policy name: keys merged
// into `policy:` for cells of that policy, since each policy accepts only
// its own keys). Every cell's configuration is validated up front; an error
// names the file, line and column (a bad swept value points at the value in
// the sweep list). Throws ConfigError.
//
// `overrides` ("scenario.records" -> "200000", as `simulate --set` gives
// them) replace or add keys before anything is read; any dotted key, the
// scenario's own (scenario.*, sweep.*) included. A value is YAML
// ("[a, b]" is a list); an error in it is located at "--set KEY:1:COL".
using Overrides = std::vector<std::pair<std::string, std::string>>;
Scenario LoadScenario(const std::string& path, const Overrides& overrides = {});
// The same for YAML text; `name` stands for the file in messages and gives
// the scenario's default name.
Scenario LoadScenarioString(const std::string& yaml, const std::string& name,
                            const Overrides& overrides = {});

// True when the YAML text has a scenario's own sections (scenario:, sweep:
// or policy_options:), so `config check` reads it as a scenario. Throws
// ConfigError for text that is not YAML.
bool IsScenarioText(const std::string& yaml, const std::string& name);
// The same for a file (ConfigError when it cannot be read).
bool IsScenarioFile(const std::string& path);

}  // namespace coexist::config
