#include "config/scenario.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/sql_text.h"
#include "config_core/duration.h"
#include "config_core/yaml_reader.h"
#include "policies/registry.h"

namespace coexist::config {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;

constexpr std::string_view kScenarioKeys[] = {"scenario", "sweep", "policy_options"};
// scenario.batch_processes: each run holds batch.workers connections and
// its control connection, so a few runs already fill a test server.
constexpr int kMaxBatchProcesses = 16;

// A path written in the scenario, relative to the scenario file's folder.
std::string Resolve(const Section& s, const std::string& written) {
  std::filesystem::path p(written);
  if (p.is_absolute()) return p.string();
  return (std::filesystem::path(s.file()).parent_path() / p).lexically_normal().string();
}

// The file a key names; a located error when it cannot be read.
std::string ReadNamedFile(const Section& s, const YAML::Node& value, std::string_view key,
                          const std::string& path, const char* what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    s.Fail(value, key, "cannot read '" + path + "'",
           std::string("give the path of ") + what +
               ", relative to the scenario file's folder (run a scenario that names files by its "
               "path, not by a built-in name).");
  }
  return ReadFileText(path);
}

// The SQL text with its comments and quoted strings blanked, lower case: what
// the regular expressions below may look at.
std::string CodeOnly(const std::string& sql) {
  std::string out = sql;
  for (size_t i = 0; i < sql.size();) {
    size_t end = i;
    if (sql_text::Skip(sql, i, end) != sql_text::NotCode::kNone) {
      for (size_t j = i; j < end && j < out.size(); ++j) out[j] = out[j] == '\n' ? '\n' : ' ';
      i = end;
    } else {
      out[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(out[i])));
      ++i;
    }
  }
  return out;
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// scenario.schema: the file, and the schemas and tables it creates.
void ReadSchemaFile(Section& s, const std::string& written, Workload& out) {
  const YAML::Node& value = s.node()["schema"];
  out.schema_file = Resolve(s, written);
  out.schema_sql = ReadNamedFile(s, value, "schema", out.schema_file,
                                 "the SQL file that creates "
                                 "your tables");
  out.schema_at = s.MarkOf(value);
  static const std::regex kSchema(
      R"(\bcreate\s+schema\s+(?:if\s+not\s+exists\s+)?([a-z_][a-z0-9_$]*))");
  static const std::regex kTable(
      R"(\bcreate\s+(?:(?:global|local)\s+)?(?:(?:temporary|temp|unlogged)\s+)?table\s+)"
      R"((?:if\s+not\s+exists\s+)?([a-z_][a-z0-9_$]*(?:\.[a-z_][a-z0-9_$]*)?))");
  std::string code = CodeOnly(out.schema_sql);
  for (std::sregex_iterator it(code.begin(), code.end(), kSchema), end; it != end; ++it) {
    std::string name = (*it)[1];
    if (name == "public" || name == "coexist" || name.starts_with("pg_") ||
        name == "information_schema") {
      s.Fail(value, "schema",
             "'" + written + "' creates schema " + name + ", which every cell would drop",
             "create your tables in a schema of your own (CREATE SCHEMA shop; CREATE TABLE "
             "shop.orders ...), or in public without CREATE SCHEMA.");
    }
    if (!Contains(out.created_schemas, name)) out.created_schemas.push_back(name);
  }
  for (std::sregex_iterator it(code.begin(), code.end(), kTable), end; it != end; ++it) {
    std::string name = (*it)[1];
    if (name.find('.') == std::string::npos) name = "public." + name;
    if (name.starts_with("coexist.")) {
      s.Fail(value, "schema", "'" + written + "' creates " + name + " in coexist's own schema",
             "create your tables in a schema of your own.");
    }
    if (!Contains(out.created_tables, name)) out.created_tables.push_back(name);
  }
  if (out.created_tables.empty()) {
    s.Fail(value, "schema", "'" + written + "' creates no table",
           "scenario.schema is the SQL file that creates your tables (CREATE TABLE ...), run "
           "afresh in every cell.");
  }
}

// "schema.table" or "table" (public), checked to be one the schema file creates.
void ReadCreatedTable(Section& s, std::string_view key, const Workload& w, std::string& schema,
                      std::string& table) {
  s.QualifiedName(key, schema, table);
  if (table.empty()) s.Fail(s.node(), key, "a table is required here", "e.g. table: shop.orders.");
  std::string name = schema + "." + table;
  if (!Contains(w.created_tables, name)) {
    s.Fail(s.node()[std::string(key)], key, name + " is not a table that scenario.schema creates",
           "the tables filled in every cell are those '" +
               std::filesystem::path(w.schema_file).filename().string() +
               "' creates: " + Joined(w.created_tables) + ".");
  }
}

constexpr const char* kGeneratorHint =
    "a column's generator is sequence (1, 2, ...), uuid, random(MIN, MAX), "
    "key(SCHEMA.TABLE.COLUMN[, uniform|zipf]) (a key of a table filled before this one) or a SQL "
    "expression over n, the row's number.";

GeneratedColumn ReadGenerator(Section& columns, const YAML::Node& key, const YAML::Node& value,
                              const GeneratedTable& table, const std::vector<std::string>& filled) {
  GeneratedColumn c;
  c.name = columns.ScalarText(key, "columns");
  static const std::regex kIdentifier(R"([A-Za-z_][A-Za-z0-9_$]{0,62})");
  if (!std::regex_match(c.name, kIdentifier)) {
    columns.Fail(key, c.name, "'" + c.name + "' is not a column name",
                 "write the column's name as the table has it (letters, digits, _ and $).");
  }
  c.at = columns.MarkOf(value);
  c.key = columns.KeyPath(c.name);
  std::string text = columns.ScalarText(value, c.name);
  static const std::regex kRandom(
      R"(random\s*\(\s*([-+]?[0-9]{1,18})\s*,\s*([-+]?[0-9]{1,18})\s*\))");
  static const std::regex kKey(
      R"(key\s*\(\s*(?:([A-Za-z_][A-Za-z0-9_$]*)\.)?([A-Za-z_][A-Za-z0-9_$]*)\.([A-Za-z_][A-Za-z0-9_$]*)\s*(?:,\s*([a-z_]+)\s*)?\))");
  std::smatch m;
  if (text.empty()) {
    columns.Fail(value, c.name, "the generator is empty", kGeneratorHint);
  } else if (text == "sequence") {
    c.expression = "n";
  } else if (text == "uuid") {
    c.expression = "md5('" + table.schema + "." + table.table + ":' || n)::uuid";
  } else if (std::regex_match(text, m, kRandom)) {
    long long min = std::stoll(m.str(1)), max = std::stoll(m.str(2));
    if (min > max) {
      columns.Fail(value, c.name, "'" + text + "': MIN is larger than MAX",
                   "write the smaller bound first, e.g. random(1, 5).");
    }
    c.expression =
        fmt::format("({} + floor(random() * ({}::numeric - {} + 1)))::bigint", min, max, min);
  } else if (std::regex_match(text, m, kKey)) {
    c.key_schema = m.str(1).empty() ? "public" : m.str(1);
    c.key_table = m.str(2);
    c.key_column = m.str(3);
    std::string distribution = m.str(4).empty() ? "uniform" : m.str(4);
    if (distribution != "uniform" && distribution != "zipf") {
      columns.Fail(value, c.name, "'" + distribution + "' is not a key distribution",
                   "write key(SCHEMA.TABLE.COLUMN) for uniform picks, or key(SCHEMA.TABLE.COLUMN, "
                   "zipf) for a few hot keys.");
    }
    c.key_zipf = distribution == "zipf";
    std::string referenced = c.key_schema + "." + c.key_table;
    if (!Contains(filled, referenced)) {
      columns.Fail(value, c.name,
                   "'" + text + "': " + referenced + " is not filled before " + table.schema + "." +
                       table.table,
                   "a key() picks keys of a table filled earlier: list " + referenced +
                       " before this table under scenario.data (or copy it with "
                       "scenario.sample).");
    }
  } else if (text.rfind("key(", 0) == 0 || text.rfind("random(", 0) == 0) {
    columns.Fail(value, c.name, "'" + text + "' is not a generator this file understands",
                 std::string(kGeneratorHint) +
                     (text.find(')') == std::string::npos
                          ? " Inside {...}, quote a generator with a comma: \"random(1, 10)\"."
                          : ""));
  } else {
    c.expression = text;  // SQL over n; the database checks it in the cell
  }
  return c;
}

void ReadData(Section& s, Workload& w) {
  auto list = s.Sequence("data");
  if (!list) return;
  if (!w.UserTables()) {
    s.Fail(*list, "data", "generated rows need the tables' definition",
           "give scenario.schema, the SQL file that creates the tables.");
  }
  std::vector<std::string> filled;
  if (w.sample) filled.push_back(w.sample->schema + "." + w.sample->table);
  for (size_t i = 0; i < list->size(); ++i) {
    YAML::Node item = (*list)[i];
    std::string path = s.KeyPath("data") + "[" + std::to_string(i) + "]";
    if (!item.IsMap())
      s.Fail(item, "data", "entry [" + std::to_string(i) + "] is not a map",
             "each entry is {table: SCHEMA.TABLE, rows: N, columns: {...}}.");
    Section e(item, path, s.file());
    GeneratedTable t;
    t.at = e.MarkOf(item);
    t.key = path;
    ReadCreatedTable(e, "table", w, t.schema, t.table);
    e.Int64("rows", t.rows, 1, 100'000'000);
    if (t.rows == 0) e.Fail(item, "rows", "the number of rows is required", "e.g. rows: 1000.");
    if (auto columns = e.Map("columns")) {
      for (const auto& column : columns->node()) {
        t.columns.push_back(ReadGenerator(*columns, column.first, column.second, t, filled));
      }
    }
    if (t.columns.empty()) {
      e.Fail(
          item, "columns", "the columns' generators are required",
          std::string("e.g. columns: {id: sequence, balance: random(0, 1000)}; ") + kGeneratorHint);
    }
    e.String("where", t.where);
    if (item["where"]) t.where_at = e.MarkOf(item["where"]);
    e.Finish();
    filled.push_back(t.schema + "." + t.table);
    w.data.push_back(std::move(t));
  }
}

void ReadSample(Section& s, Workload& w) {
  auto sample = s.Map("sample");
  if (!sample) return;
  if (!w.UserTables()) {
    s.Fail(sample->node(), "sample", "sampled rows need the tables' definition",
           "give scenario.schema, the SQL file that creates the table the rows are copied into.");
  }
  SampleSource out;
  out.at = s.MarkOf(sample->node());
  const YAML::Node& from = sample->node()["from"];
  if (!from) {
    sample->Fail(sample->node(), "from", "the source database is required",
                 "from: the name of an environment variable holding its URL (e.g. "
                 "SHOP_DATABASE_URL), or a URL with ${VAR} for its password.");
  }
  std::string text;
  sample->String("from", text);
  out.from_at = sample->MarkOf(from);
  static const std::regex kVariable(R"([A-Za-z_][A-Za-z0-9_]*)");
  if (std::regex_match(text, kVariable)) {
    const char* value = std::getenv(text.c_str());
    if (value == nullptr || *value == '\0') {
      sample->Fail(from, "from", "environment variable " + text + " is not set",
                   "export " + text + " with the source database's URL, or write the URL here.");
    }
    out.conninfo = value;
  } else {
    out.conninfo = text;
  }
  ReadCreatedTable(*sample, "table", w, out.schema, out.table);
  sample->Int64("rows", out.rows, 1, 100'000'000);
  sample->String("where", out.where);
  if (sample->node()["where"]) out.where_at = sample->MarkOf(sample->node()["where"]);
  sample->Finish();
  w.sample = std::move(out);
}

void ReadWorkload(Section& s, Workload& w) {
  std::string schema, job;
  s.String("schema", schema);
  if (!schema.empty()) ReadSchemaFile(s, schema, w);
  ReadSample(s, w);
  ReadData(s, w);
  s.String("job", job);
  if (!job.empty()) {
    const YAML::Node& value = s.node()["job"];
    w.job_file = Resolve(s, job);
    ReadNamedFile(s, value, "job", w.job_file, "the job's configuration file");
    w.job_at = s.MarkOf(value);
  }
  s.String("applied_check", w.applied_check);
  if (s.node()["applied_check"]) w.applied_check_at = s.MarkOf(s.node()["applied_check"]);
  s.String("invariant", w.invariant);
  if (s.node()["invariant"]) w.invariant_at = s.MarkOf(s.node()["invariant"]);
}

// `projection_check: 5x`: a check cell of that many times the checked
// cell's items; more than 1 (a check of a larger queue) and at most 100.
double ReadCheckTimes(Section& s, const std::string& text) {
  const YAML::Node value = s.node()["projection_check"];
  auto parsed = ParseTimes(text);
  if (!parsed) {
    s.Fail(value, "projection_check", "'" + text + "' is neither a count of items nor a multiple",
           "write how many items the check cell queues (150000), or how many times the checked "
           "cell's (5x).");
  }
  double times = *parsed;
  if (times <= 1.0 || times > 100.0) {
    s.Fail(value, "projection_check",
           "a check of " + text + " the measured queue checks no projection",
           "more than 1x and at most 100x, e.g. 5x: the model is checked on a larger queue than "
           "it was made from.");
  }
  return times;
}

void ReadSettings(Section& s, ScenarioSettings& out) {
  s.String("name", out.name);
  s.String("description", out.description);
  s.Int64("records", out.records, 1, kMaxSeededRecords);
  s.Int64("queue_items", out.queue_items, 1, 100'000'000);
  s.Duration("warmup", out.warmup, milliseconds(0), hours(1));
  s.Duration("cooldown", out.cooldown, milliseconds(0), hours(1));
  s.Duration("window", out.window, milliseconds(100), hours(24));
  s.Int64("production_queue_items", out.production_queue_items, 0, 1'000'000'000'000LL);
  s.Duration("production_window", out.production_window, milliseconds(0), hours(24 * 7));
  std::string check_text;
  s.String("projection_check", check_text);
  if (!check_text.empty() && (check_text.back() == 'x' || check_text.back() == 'X')) {
    out.projection_check_times = ReadCheckTimes(s, check_text);
  } else {
    s.Int64("projection_check", out.projection_check, 0, 100'000'000);
  }
  if (out.projection_check > 0 && out.projection_check < out.queue_items) {
    s.Fail(s.node()["projection_check"], "projection_check",
           fmt::format("{} items is fewer than the {} queued in the measured cells",
                       out.projection_check, out.queue_items),
           "a projection check runs a larger queue than the one measured (e.g. 10 times "
           "scenario.queue_items); 0 runs none.");
  }
  s.Duration("min_batch_time", out.min_batch_time, milliseconds(0), hours(1));
  s.Int("repeat", out.repeat, 1, 100);
  s.Int("batch_processes", out.batch_processes, 1, kMaxBatchProcesses);
  ReadWorkload(s, out.workload);
  // A check cell seeds rows in proportion to its items, so that each row has
  // as many items as in the measured cells (capacity/simulate.cpp,
  // CheckSize); the user's own tables have the rows their data makes.
  if (long long rows = RowsInProportion(out.projection_check, out.queue_items, out.records);
      out.projection_check >= out.queue_items && !out.workload.UserTables() &&
      rows > kMaxSeededRecords) {
    s.Fail(s.node()["projection_check"], "projection_check",
           fmt::format("{} items need {} rows to keep the measured cells' items per row ({} "
                       "items over {} rows), more than the {} a cell seeds",
                       out.projection_check, rows, out.queue_items, out.records, kMaxSeededRecords),
           "the model holds for the items per row it measured, so the check keeps them "
           "(docs/capacity.md, \"The projection model\"): lower scenario.projection_check, or "
           "queue more items per row in the measured cells.");
  }
  if (auto o = s.Map("objectives")) {
    o->Double("max_p99_ratio", out.objectives.max_p99_ratio, 1, 1'000'000);
    o->Percent("max_error_rate", out.objectives.max_error_percent);
    o->Percent("min_done_share", out.objectives.min_done_percent);
    o->Percent("max_deferred_share", out.objectives.max_deferred_percent);
    o->Finish();
  }
  s.Finish();
  // The batch starts after the warm-up, whose online p99 is the baseline of
  // the p99 objective: a window shorter than that baseline run cannot be
  // judged against it.
  if (out.window < out.warmup) {
    const char* key = s.node()["window"] ? "window" : "warmup";
    s.Fail(s.node()[key], key,
           fmt::format("the window ({}) is shorter than the warm-up ({})",
                       FormatDuration(out.window), FormatDuration(out.warmup)),
           "the batch's online p99 is judged against the warm-up's; give scenario.window at least "
           "the warm-up, or shorten scenario.warmup.");
  }
  if (out.min_batch_time > out.window) {
    s.Fail(s.node()["min_batch_time"], "min_batch_time",
           fmt::format("a batch of at least {} cannot finish inside the window ({})",
                       FormatDuration(out.min_batch_time), FormatDuration(out.window)),
           "give scenario.window at least scenario.min_batch_time.");
  }
}

// Several runs of the job in one cell share its queue: shared mode, which
// the scenario may not contradict. `runs_at`: where the scenario (or its
// sweep) writes batch.runs; nullopt when only its job file does, whose
// batch: keys are defaults under the scenario's own settings.
void ApplyBatchProcesses(Config& config, const ScenarioSettings& settings,
                         const std::optional<Mark>& runs_at) {
  if (settings.batch_processes < 2) return;
  if (config.batch.runs == RunsMode::kExclusive && runs_at) {
    throw ConfigError(
        *runs_at, "batch.runs",
        fmt::format("'exclusive' allows one run of the job at a time, and "
                    "scenario.batch_processes asks for {}",
                    settings.batch_processes),
        "several runs work one job's queue at once only in shared mode: write batch.runs: "
        "shared (or leave it out: batch_processes above 1 implies it), or set "
        "scenario.batch_processes: 1.");
  }
  config.batch.runs = RunsMode::kShared;
}

struct Axis {
  SweepAxis axis;
  YAML::Node key_node;
  std::vector<YAML::Node> value_nodes;
};

// How a swept value names its cells: a scalar as written; a map of settings
// (`pacing.online_latency: [null, {objective: 1.5x}]`) in flow style; null,
// which leaves the section out, as "off".
std::string SweptValueText(const YAML::Node& value, const std::string& key, const Section& top) {
  if (value.IsNull()) return "off";
  if (!value.IsMap()) return top.ScalarText(value, key);
  YAML::Emitter out;
  out << YAML::Flow << value;
  return out.c_str();
}

std::vector<Axis> ReadSweep(const YAML::Node& node, const Section& top) {
  std::vector<Axis> out;
  if (!node || node.IsNull()) return out;
  if (!node.IsMap()) top.Fail(node, "sweep", "expected a map of key: [values]");
  for (const auto& item : node) {
    Axis a;
    a.axis.key = item.first.Scalar();
    a.key_node = item.first;
    auto dot = a.axis.key.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == a.axis.key.size()) {
      top.Fail(item.first, "sweep." + a.axis.key, "a swept key is section.key",
               "e.g. policy.name, online.users, batch.chunk_size.");
    }
    if (!item.second.IsSequence() || item.second.size() == 0) {
      top.Fail(item.second, "sweep." + a.axis.key, "expected a non-empty list of values");
    }
    for (const auto& value : item.second) {
      a.axis.values.push_back(SweptValueText(value, "sweep." + a.axis.key, top));
      a.value_nodes.push_back(value);
    }
    out.push_back(std::move(a));
  }
  return out;
}

// Sets a dotted key in a YAML map, creating maps on the way. The value node
// is shared, not copied, so its position stays for error messages.
void SetPath(YAML::Node root, const std::string& key, const YAML::Node& value) {
  std::vector<std::string> parts;
  std::stringstream in(key);
  for (std::string part; std::getline(in, part, '.');) parts.push_back(part);
  YAML::Node node = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!node[parts[i]] || !node[parts[i]].IsMap())
      node[parts[i]] = YAML::Node(YAML::NodeType::Map);
    // Node::operator= would overwrite the node's content; reset() rebinds.
    node.reset(node[parts[i]]);
  }
  node[parts.back()] = value;
}

// Where the scenario writes batch.runs for the cell at `position`: the swept
// value, or the file's (the cell's copy of the file keeps no positions).
std::optional<Mark> RunsWrittenAt(const YAML::Node& root, const std::vector<Axis>& axes,
                                  const std::vector<size_t>& position, const Section& top) {
  for (size_t a = 0; a < axes.size(); ++a) {
    if (axes[a].axis.key == "batch.runs") return top.MarkOf(axes[a].value_nodes[position[a]]);
  }
  const YAML::Node& batch = root["batch"];
  if (batch && batch.IsMap() && batch["runs"]) return top.MarkOf(batch["runs"]);
  return std::nullopt;
}

std::string LoadLevel(const std::map<std::string, std::string>& parameters) {
  for (const char* key : {"online.users", "online.rate"}) {
    if (auto it = parameters.find(key); it != parameters.end()) return it->first + "=" + it->second;
  }
  return "";
}

}  // namespace

Scenario LoadScenario(const std::string& path, const Overrides& overrides) {
  return LoadScenarioString(ReadFileText(path), path, overrides);
}

bool IsScenarioText(const std::string& yaml, const std::string& name) {
  YAML::Node root = ParseYaml(yaml, name);
  if (!root.IsMap()) return false;
  return std::any_of(std::begin(kScenarioKeys), std::end(kScenarioKeys),
                     [&](std::string_view key) { return root[std::string(key)].IsDefined(); });
}

namespace {

// The sections of scenario.job's file that the cells use.
constexpr const char* kJobSections[] = {"target", "targets", "operation", "enqueue"};

std::string FileName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// The sections of the job file the cells use (kJobSections and batch:), as
// written. The others (database:, policy:, pacing:, ...) are neither used
// nor read: a database.url with ${VAR} needs no variable here.
YAML::Node ReadJobSections(const std::string& job_file) {
  YAML::Node job = ParseYaml(ReadFileText(job_file), job_file);
  YAML::Node used(YAML::NodeType::Map);
  if (!job.IsMap()) return used;  // ReadConfig says what is wrong with it
  for (const char* key : kJobSections) {
    if (job[key]) used[key] = job[key];
  }
  if (job["batch"]) used["batch"] = job["batch"];
  return used;
}

// The job file's target, targets, operation and enqueue into the cell's
// configuration, and its batch: keys under the scenario's own. The
// scenario may not write the sections the job gives.
void MergeJob(const YAML::Node& root, YAML::Node& cell_root, const YAML::Node& job,
              const Workload& w, const Section& top) {
  for (const char* key : kJobSections) {
    if (root[key]) {
      top.Fail(root[key], key, "written here and in scenario.job (" + FileName(w.job_file) + ")",
               std::string("remove ") + key +
                   ": here (the cells use the job's target, targets, operation and "
                   "enqueue.select), or remove scenario.job to write your own.");
    }
  }
  for (const char* key : kJobSections) {
    if (job[key]) cell_root[key] = YAML::Clone(job[key]);
  }
  const YAML::Node& job_batch = job["batch"];
  if (!job_batch || !job_batch.IsMap()) return;
  if (!cell_root["batch"] || !cell_root["batch"].IsMap())
    cell_root["batch"] = YAML::Node(YAML::NodeType::Map);
  YAML::Node batch = cell_root["batch"];
  for (const auto& item : job_batch) {
    const YAML::Node& given = batch;
    if (!given[item.first.Scalar()]) batch[item.first.Scalar()] = YAML::Clone(item.second);
  }
}

// Whether the cell's job fits the scenario's tables; a located error
// otherwise. With a job, the marks of what it gave point into its file.
void CheckWorkloadFits(Config& config, const Workload& w, const Config* job, const Section& top) {
  if (job != nullptr) {
    config.target_at = job->target_at;
    config.targets_at = job->targets_at;
    config.operation.item_sql_at = job->operation.item_sql_at;
    config.operation.chunk_sql_at = job->operation.chunk_sql_at;
    config.operation.set_at = job->operation.set_at;
    config.enqueue.select_at = job->enqueue.select_at;
  }
  std::string job_name = FileName(w.job_file);
  std::string created = "'" + FileName(w.schema_file) + "' creates " + Joined(w.created_tables);
  std::vector<std::string> tables{config.target.Name()};
  for (const auto& t : config.targets) tables.push_back(t.Name());
  for (size_t i = 0; i < tables.size(); ++i) {
    const std::string& table = tables[i];
    std::string what = i == 0 ? "target" : "targets entry";
    if (w.UserTables() && !Contains(w.created_tables, table)) {
      if (job != nullptr) {
        throw ConfigError(
            w.job_at, "scenario.job",
            job_name + "'s " + what + " " + table + " is not a table that scenario.schema creates",
            created + "; point the job's " + (i == 0 ? "target:" : "targets:") +
                " at one of them, or give the schema file that creates " + table + ".");
      }
      const YAML::Node& target = top.node()["target"];
      YAML::Node written = i == 0 && target && target.IsMap() ? target["table"] : YAML::Node();
      throw ConfigError(
          written ? top.MarkOf(written) : w.schema_at, written ? "target.table" : "scenario.schema",
          "the " + what + " " + table + " is not a table that scenario.schema creates",
          created + "; set target.table to one of them, or give scenario.job.");
    }
    if (!w.UserTables() && job != nullptr && table != "public.products") {
      throw ConfigError(
          w.job_at, "scenario.job",
          job_name + "'s " + what + " " + table + " is not the demo table public.products",
          "give scenario.schema (the SQL file that creates " + table +
              ") and fill it with scenario.data or scenario.sample.");
    }
  }
  if (w.UserTables() && !config.operation.Configured()) {
    throw ConfigError(w.schema_at, "scenario.schema", "the batch has no operation on your tables",
                      "give scenario.job (your job's configuration file), or operation: with "
                      "item_sql, chunk_sql or set.");
  }
  if (config.operation.keys == ItemKeys::kMany && config.enqueue.select.empty()) {
    throw ConfigError(job != nullptr ? w.job_at : top.MarkOf(top.node()["operation"]),
                      job != nullptr ? "scenario.job" : "operation",
                      "items of several keys (operation.keys: many) need an enqueue.select",
                      "each cell queues the job's items with its enqueue.select (its first "
                      "scenario.queue_items rows); give the job one.");
  }
}

// The --set overrides, written into `root` (a swept key into sweep:).
void ApplyOverrides(YAML::Node& root, const Overrides& overrides) {
  for (const auto& [key, value] : overrides) {
    if (key.empty() || key.front() == '.' || key.back() == '.' ||
        key.find("..") != std::string::npos) {
      throw ConfigError(Mark{"--set " + key, 0, 0}, "", "'" + key + "' is not a dotted key",
                        "e.g. --set scenario.records=200000 or --set online.users=40.");
    }
    YAML::Node node = ParseYaml(value, "--set " + key + "=" + value);
    // A swept key is one key of sweep: (sweep: {policy.name: [...]}).
    if (key.rfind("sweep.", 0) == 0) {
      if (!root["sweep"] || !root["sweep"].IsMap()) root["sweep"] = YAML::Node(YAML::NodeType::Map);
      root["sweep"][key.substr(6)] = node;
    } else {
      SetPath(root, key, node);
    }
  }
}

Scenario Load(const std::string& yaml, const std::string& path, const Overrides& overrides) {
  YAML::Node root = ParseYaml(yaml, path);
  if (!root.IsMap()) {
    Section(YAML::Node(YAML::NodeType::Map), "", path)
        .Fail(root, "",
              "a scenario file must be a map of sections (scenario:, sweep:, online:, ...)");
  }
  ApplyOverrides(root, overrides);

  Scenario scenario;
  const std::string name = std::filesystem::path(path).stem().string();
  scenario.settings.name = name;
  Section top(root, "", path);
  if (auto s = top.Map("scenario")) ReadSettings(*s, scenario.settings);
  std::vector<Axis> axes = ReadSweep(root["sweep"], top);
  for (const auto& a : axes) scenario.sweep.push_back(a.axis);
  YAML::Node policy_options = root["policy_options"];
  if (policy_options && !policy_options.IsNull() && !policy_options.IsMap()) {
    top.Fail(policy_options, "policy_options", "expected a map of policy name: {keys}");
  }

  // A cell's base configuration: the file without the scenario's own
  // sections, parsed afresh for each cell (YAML::Clone would drop the
  // marks, and a cell's error must name its line and column).
  auto base_of = [&](const YAML::Node& parsed) {
    YAML::Node base(YAML::NodeType::Map);
    for (const auto& item : parsed) {
      std::string key = item.first.Scalar();
      if (std::find(std::begin(kScenarioKeys), std::end(kScenarioKeys), key) ==
          std::end(kScenarioKeys)) {
        base[item.first] = item.second;
      }
    }
    return base;
  };

  std::vector<size_t> position(axes.size(), 0);
  for (int index = 1;; ++index) {
    YAML::Node fresh = ParseYaml(yaml, path);
    ApplyOverrides(fresh, overrides);
    YAML::Node cell_root = base_of(fresh);
    // The scenario's own section, for swept scenario.* keys.
    YAML::Node cell_top(YAML::NodeType::Map);
    if (fresh["scenario"]) cell_top["scenario"] = fresh["scenario"];
    bool settings_swept = false;
    ScenarioCell cell;
    cell.index = index;
    for (size_t a = 0; a < axes.size(); ++a) {
      const std::string& key = axes[a].axis.key;
      if (key.rfind("scenario.", 0) == 0) {
        SetPath(cell_top, key, axes[a].value_nodes[position[a]]);
        settings_swept = true;
      } else {
        SetPath(cell_root, key, axes[a].value_nodes[position[a]]);
      }
      cell.parameters[key] = axes[a].axis.values[position[a]];
    }
    cell.settings = scenario.settings;
    cell.load_level = LoadLevel(cell.parameters);
    std::string policy = cell_root["policy"] && cell_root["policy"]["name"]
                             ? cell_root["policy"]["name"].Scalar()
                             : policies::DefaultName();
    if (policy_options && policy_options[policy]) {
      if (!policy_options[policy].IsMap()) {
        top.Fail(policy_options[policy], "policy_options." + policy,
                 "expected a map of policy keys");
      }
      for (const auto& option : policy_options[policy]) {
        SetPath(cell_root, "policy." + option.first.Scalar(), option.second);
      }
    }
    try {
      if (settings_swept) {
        cell.settings = ScenarioSettings{.name = name};
        Section cell_section(cell_top, "", path);
        if (auto s = cell_section.Map("scenario")) ReadSettings(*s, cell.settings);
      }
      const Workload& workload = cell.settings.workload;
      std::optional<Config> job;
      if (!workload.job_file.empty()) {
        YAML::Node job_sections = ReadJobSections(workload.job_file);
        job = ReadConfig(job_sections, workload.job_file);  // its own errors, located in it
        MergeJob(root, cell_root, job_sections, workload, top);
      }
      cell.config = ReadConfig(cell_root, path);
      CheckWorkloadFits(cell.config, workload, job ? &*job : nullptr, top);
      ApplyBatchProcesses(cell.config, cell.settings, RunsWrittenAt(root, axes, position, top));
    } catch (const ConfigError& e) {
      if (e.mark().line > 0 || axes.empty()) throw;
      // A key the sweep created has no position: point at the sweep entry.
      throw ConfigError(Section(root, "", path).MarkOf(axes.front().key_node), "sweep",
                        std::string(e.what()).substr(path.size() + 2), e.hint());
    }
    scenario.cells.push_back(std::move(cell));

    size_t a = 0;
    while (a < axes.size() && ++position[a] == axes[a].value_nodes.size()) position[a++] = 0;
    if (a == axes.size()) break;
  }
  // Unknown keys of the base sections were rejected by ReadConfig.
  return scenario;
}

}  // namespace

bool IsScenarioFile(const std::string& path) { return IsScenarioText(ReadFileText(path), path); }

Scenario LoadScenarioString(const std::string& yaml, const std::string& path,
                            const Overrides& overrides) {
  try {
    return Load(yaml, path, overrides);
  } catch (const ConfigError& e) {
    // An overridden value's node comes from its own one-line document: its
    // errors point at the --set option, not at line 1 of the file.
    std::string prefix = e.mark().ToString() + ": ";
    std::string message = std::string(e.what()).substr(prefix.size());
    for (const auto& [key, value] : overrides) {
      if (e.mark().line == 1 && message.rfind(key + ": ", 0) == 0) {
        throw ConfigError(Mark{"--set " + key + "=" + value, 0, 0}, "", message, e.hint());
      }
    }
    throw;
  }
}

}  // namespace coexist::config
