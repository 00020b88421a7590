#include "config/config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "common/sql_text.h"
#include "config/custom_kinds.h"
#include "config/shards.h"
#include "config_core/duration.h"
#include "config_core/listen_address.h"
#include "config_core/yaml_reader.h"
#include "policies/policy.h"
#include "policies/registry.h"

namespace coexist::config {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;

// The place of `key` in `node`, or just the file when it is not written.
Mark MarkOfKey(const Section& s, const YAML::Node& node, const char* key) {
  return s.MarkOf(node.IsMap() && node[key].IsDefined() ? node[key] : YAML::Node());
}

void ReadDatabase(Section& s, const YAML::Node& node, DatabaseConfig& out) {
  s.OptionalString("url", out.url);
  out.url_at = MarkOfKey(s, node, "url");
  s.String("application_name", out.application_name);
  s.Duration("statement_timeout", out.statement_timeout, milliseconds(1), hours(24));
  s.Duration("stall_timeout", out.stall_timeout, milliseconds(0), hours(1));
  if (out.stall_timeout.count() > 0 && out.stall_timeout < std::chrono::seconds(1)) {
    s.Fail(node["stall_timeout"], "stall_timeout",
           "'" + FormatDuration(out.stall_timeout) + "' is shorter than a second",
           "a busy server may take longer to answer; use 1s or more (default 30s), or 0 to "
           "turn stall detection off.");
  }
  ReadShards(s, node, out);
  s.Finish();
}

void ReadLog(Section& s, LogConfig& out) {
  s.Enum("level", out.level, {"trace", "debug", "info", "warn", "error", "critical", "off"});
  s.Enum("format", out.format, {"text", "json"});
  s.Finish();
}

void ReadTarget(Section& s, const YAML::Node& node, TargetTable& out, Config::TargetMarks& at) {
  s.QualifiedName("table", out.schema, out.table);
  s.Identifier("key_column", out.key_column);
  s.Identifier("version_column", out.version_column);
  s.OptionalIdentifier("owner_column", out.owner_column);
  if (auto list = s.Sequence("known_triggers")) {
    for (const auto& item : *list) {
      if (!item.IsScalar() || item.Scalar().empty()) {
        s.Fail(item, "known_triggers", "each entry must be the name of one of the table's triggers",
               "e.g. known_triggers: [last_updated].");
      }
      out.known_triggers.push_back(item.Scalar());
    }
  }
  at = {MarkOfKey(s, node, "table"), MarkOfKey(s, node, "key_column"),
        MarkOfKey(s, node, "version_column"), MarkOfKey(s, node, "owner_column")};
  s.Finish();
}

// `targets:`: a list of {table, key_column, version_column}, none of them
// the target itself or given twice.
void ReadMoreTargets(Section& top, const YAML::Node& list, const std::string& file,
                     Config& config) {
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& node = list[i];
    std::string path = "targets[" + std::to_string(i) + "]";
    if (!node.IsMap() || !node["table"].IsDefined()) {
      top.Fail(node, "targets", "entry [" + std::to_string(i) + "] is not a map with a table",
               "each entry names a table the operation writes: {table: schema.table, "
               "key_column: id, version_column: version}.");
    }
    Section s(node, path, file);
    TargetTable t;
    t.key_column = "id";
    s.QualifiedName("table", t.schema, t.table);
    s.Identifier("key_column", t.key_column);
    s.Identifier("version_column", t.version_column);
    Config::TargetMarks at{MarkOfKey(s, node, "table"),
                           MarkOfKey(s, node, "key_column"),
                           MarkOfKey(s, node, "version_column"),
                           {}};
    s.Finish();
    bool repeated = t.Name() == config.target.Name();
    for (const auto& other : config.targets) repeated = repeated || other.Name() == t.Name();
    if (repeated) {
      s.Fail(node["table"], "table", t.Name() + " is listed twice (target and targets)",
             "list each table once; target is the table whose records items name.");
    }
    config.targets.push_back(t);
    config.targets_at.push_back(at);
  }
}

// batch.max_duration, max_items and max_rate: none unless written (each
// getter leaves its 0 alone when the key is absent, and asks for it always,
// so that a misspelt key's hint names them); a budget of nothing (0) is out
// of range like any other bound.
void ReadBudgets(Section& s, BatchConfig& out) {
  milliseconds limit{0};
  s.Duration("max_duration", limit, std::chrono::seconds(1), hours(24 * 30));
  if (limit > milliseconds(0)) out.max_duration = limit;
  long long items = 0;
  s.Int64("max_items", items, 1, 1'000'000'000'000LL);
  if (items > 0) out.max_items = items;
  double rate = 0;
  s.PositiveDouble("max_rate", rate, 1e6);
  if (rate > 0) out.max_rate = rate;
}

void ReadBatch(Section& s, BatchConfig& out) {
  s.String("job", out.job);
  out.job_given = s.node()["job"].IsDefined();
  s.Int("chunk_size", out.chunk_size, 1, 100000);
  s.Int("workers", out.workers, 1, 64);
  s.Int("max_attempts", out.max_attempts, 1, 1000);
  s.Int("max_timeouts", out.max_timeouts, 1, 1000);
  s.Int("max_consecutive_failures", out.max_consecutive_failures, 0, 1000000);
  s.Duration("busy_timeout", out.busy_timeout, std::chrono::seconds(1), hours(24 * 30));
  s.Enum("runs", out.runs, {{"exclusive", RunsMode::kExclusive}, {"shared", RunsMode::kShared}});
  if (s.node()["runs"].IsDefined()) out.runs_at = s.MarkOf(s.node()["runs"]);
  s.Enum(
      "missing_rows", out.missing_rows,
      {{"apply", MissingRows::kApply}, {"skip", MissingRows::kSkip}, {"fail", MissingRows::kFail}});
  ReadBudgets(s, out);
  if (auto range = s.Map("range")) {
    BatchConfig::Range r;
    const YAML::Node& node = range->node();
    out.range_at = s.MarkOf(s.node()["range"]);
    range->String("where", r.where);
    range->Finish();
    if (!node["where"].IsDefined()) {
      s.Fail(s.node()["range"], "range", "a range job needs range.where",
             "name the rows to work: range: {where: \"status = 'to_settle'\"}.");
    }
    r.where_at = range->MarkOf(node["where"]);
    if (r.where.find_first_not_of(" \t\r\n") == std::string::npos) {
      range->Fail(node["where"], "where", "the condition is empty",
                  "write a boolean condition over the target's columns, e.g. "
                  "status = 'to_settle'.");
    }
    out.range = std::move(r);
  }
  s.Finish();
}

void ReadEnqueue(Section& s, const YAML::Node& node, EnqueueConfig& out) {
  s.String("select", out.select);
  s.Finish();
  if (!node["select"].IsDefined()) return;
  out.select_at = s.MarkOf(node["select"]);
  if (out.select.find_first_not_of(" \t\r\n") == std::string::npos) {
    s.Fail(node["select"], "select", "the query is empty",
           "write the SQL that returns key[, payload jsonb[, idempotency_key text]], or leave "
           "enqueue: out.");
  }
}

// Reads after online.custom_kinds: a custom kind's weight is one more key.
void ReadMix(Section& s, std::vector<CustomKind>& custom_kinds, OnlineMix& out) {
  s.Double("view", out.view, 0, 1e6);
  s.Double("optimistic_edit", out.optimistic_edit, 0, 1e6);
  s.Double("pessimistic_edit", out.pessimistic_edit, 0, 1e6);
  s.Double("offline_edit", out.offline_edit, 0, 1e6);
  s.Double("atomic_decrement", out.atomic_decrement, 0, 1e6);
  s.Double("nolock", out.nolock, 0, 1e6);
  s.Double("multi_edit", out.multi_edit, 0, 1e6);
  for (CustomKind& kind : custom_kinds) s.Double(kind.name, kind.weight, 0, 1e6);
  s.Finish();  // an unknown kind fails here, naming the known ones
}

void ReadOnline(Section& s, const YAML::Node& node, OnlineConfig& out) {
  using std::chrono::seconds;
  s.Enum("model", out.model, {{"closed", LoadModel::kClosed}, {"open", LoadModel::kOpen}});
  s.Int("users", out.users, 1, 100000);
  s.Double("rate", out.rate, 0.001, 1e6);
  s.Duration("think_time", out.think_time, milliseconds(0), hours(24));
  s.Enum("think_distribution", out.think_distribution,
         {{"fixed", ThinkDistribution::kFixed},
          {"exponential", ThinkDistribution::kExponential},
          {"lognormal", ThinkDistribution::kLognormal}});
  s.Double("think_sigma", out.think_sigma, 0.01, 5);
  s.Int("pool_size", out.pool_size, 1, 10000);
  s.Enum("key_distribution", out.key_distribution,
         {{"uniform", KeyDistribution::kUniform},
          {"zipf", KeyDistribution::kZipf},
          {"hot_set", KeyDistribution::kHotSet}});
  s.Double("zipf_s", out.zipf_s, 0.01, 10);
  s.Double("hot_traffic", out.hot_traffic, 0, 1);
  s.Double("hot_keys", out.hot_keys, 1e-9, 1);
  s.Int64("records", out.records, 0, 100'000'000);
  if (auto kinds = s.Map("custom_kinds")) ReadCustomKinds(*kinds, out.custom_kinds);
  if (auto mix = s.Map("mix")) {
    ReadMix(*mix, out.custom_kinds, out.mix);
    const OnlineMix& m = out.mix;
    double total = m.view + m.optimistic_edit + m.pessimistic_edit + m.offline_edit +
                   m.atomic_decrement + m.nolock + m.multi_edit;
    for (const CustomKind& kind : out.custom_kinds) total += kind.weight;
    if (total <= 0) {
      s.Fail(node["mix"], "mix", "every weight is zero, so no transaction would run",
             "give at least one kind a positive weight, e.g. view: 1.");
    }
  }
  s.Int("multi_edit_keys", out.multi_edit_keys, 2, 1000);
  s.Int("max_retries", out.max_retries, 0, 1000);
  s.Duration("backoff_base", out.backoff_base, milliseconds(0), seconds(60));
  s.Duration("backoff_cap", out.backoff_cap, milliseconds(0), seconds(600));
  s.Enum("lock_mode", out.lock_mode,
         {{"lock_timeout", LockMode::kLockTimeout}, {"nowait", LockMode::kNowait}});
  s.Duration("lock_timeout", out.lock_timeout, milliseconds(0), hours(1));
  s.Duration("offline_hold", out.offline_hold, milliseconds(0), hours(8));
  s.Duration("offline_ttl", out.offline_ttl, seconds(1), hours(24));
  s.Double("offline_abandon", out.offline_abandon, 0, 1);
  s.Duration("app_work", out.app_work, milliseconds(0), seconds(60));
  s.Identifier("value_column", out.value_column);
  s.Int64("atomic_delta", out.atomic_delta, 1, 1'000'000'000);
  s.Int64("atomic_floor", out.atomic_floor, -1'000'000'000'000'000LL, 1'000'000'000'000'000LL);
  s.String("application_name", out.application_name);
  s.Int64("seed", out.seed, 0, 1'000'000'000'000'000LL);
  s.Duration("latency_limit", out.latency_limit, milliseconds(0), hours(1));
  s.Finish();
  if (out.backoff_base > out.backoff_cap) {
    bool base_given = node["backoff_base"].IsDefined();
    s.Fail(node[base_given ? "backoff_base" : "backoff_cap"],
           base_given ? "backoff_base" : "backoff_cap",
           "backoff_base (" + FormatDuration(out.backoff_base) + ") is larger than backoff_cap (" +
               FormatDuration(out.backoff_cap) + ")",
           "the cap bounds every backoff; raise backoff_cap or lower backoff_base.");
  }
}

void ReadThresholds(Section& s, LoadThresholds& out) {
  s.Int("lock_waiters", out.lock_waiters, 0, 100000);
  s.Int("active_sessions", out.active_sessions, 0, 100000);
  s.Duration("replication_lag", out.replication_lag, milliseconds(0), hours(24));
  s.Int("vacuum", out.vacuum, 0, 100);
  s.Duration("batch_lock_wait", out.batch_lock_wait, milliseconds(0), hours(1));
  s.Duration("statement_latency", out.statement_latency, milliseconds(0), hours(1));
  s.Finish();
}

// "1.25x" or 1.25: how much slower online may get while the batch runs.
double ReadObjective(Section& s, const YAML::Node& value) {
  std::string text = s.ScalarText(value, "objective");
  auto parsed = ParseTimes(text);
  if (!parsed) {
    s.Fail(value, "objective", "'" + text + "' is not a ratio",
           "write how much slower online may get while the batch runs, e.g. 1.25x (25 % "
           "slower).");
  }
  double ratio = *parsed;
  if (ratio <= 1.0) {
    s.Fail(value, "objective", "an objective of " + text + " cannot be met",
           "the batch always costs online something; allow some slowdown, e.g. 1.25x.");
  }
  if (ratio > 100.0) {
    s.Fail(value, "objective", "an objective of " + text + " is no objective",
           "at most 100x; without an objective, leave online_latency out.");
  }
  return ratio;
}

// A duration in microseconds (the Duration getter has milliseconds), within
// (0 or more than 0, when !allow_zero)..1m; `hint` says what it is.
std::chrono::microseconds ReadFineDuration(Section& s, const YAML::Node& value,
                                           std::string_view key, bool allow_zero,
                                           const std::string& hint) {
  std::string text = s.ScalarText(value, key);
  auto parsed = ParseDuration(text);
  if (!parsed) s.Fail(value, key, "'" + text + "' is not a duration", hint);
  if ((!allow_zero && parsed->count() <= 0) || *parsed > std::chrono::minutes(1)) {
    s.Fail(value, key, "a " + std::string(key) + " of " + text + " is out of range", hint);
  }
  return *parsed;
}

void ReadOnlineLatency(Section& s, const YAML::Node& node, OnlineLatencyConfig& out) {
  if (node["objective"].IsDefined()) out.objective = ReadObjective(s, node["objective"]);
  if (auto b = node["baseline"]; b.IsDefined()) {
    if (s.ScalarText(b, "baseline") == "measured") {
      out.baseline.reset();
    } else {
      out.baseline = ReadFineDuration(
          s, b, "baseline", false,
          "write the probe's latency without the batch (more than 0 and at most 1m, e.g. 2ms) "
          "or 'measured' to learn it before the first chunk.");
    }
  }
  if (auto t = node["tolerance"]; t.IsDefined()) {
    out.tolerance = ReadFineDuration(s, t, "tolerance", true,
                                     "latencies within baseline + tolerance meet the objective; "
                                     "0 to 1m, e.g. 500us.");
  }
  // Read above by hand; String() marks them known for Finish().
  std::string ignored;
  s.String("objective", ignored);
  s.String("baseline", ignored);
  s.String("tolerance", ignored);
  if (node["percentile"].IsDefined()) {
    double percentile = 0;
    s.Double("percentile", percentile, 50.0, 99.9);
    out.percentile = percentile;
  }
  s.Enum("signal", out.signal,
         {{"sessions", LatencySignal::kSessions}, {"probe", LatencySignal::kProbe}});
  s.Enum("probe", out.probe,
         {{"lock", LatencyProbeKind::kLock}, {"read", LatencyProbeKind::kRead}});
  s.Enum("start", out.start, {{"slow", LatencyStart::kSlow}, {"full", LatencyStart::kFull}});
  s.Duration("probe_interval", out.probe_interval, milliseconds(5), milliseconds(10'000));
  s.Duration("window", out.window, milliseconds(100), std::chrono::minutes(1));
  s.Duration("learn_time", out.learn_time, milliseconds(100), std::chrono::minutes(10));
  s.Double("min_duty", out.min_duty, 0.01, 1.0);
  s.Duration("relearn_every", out.relearn_every, milliseconds(0), hours(24));
  if (node["min_chunk_time"].IsDefined()) {
    milliseconds min_chunk_time{0};
    s.Duration("min_chunk_time", min_chunk_time, milliseconds(1), hours(1));
    out.min_chunk_time = min_chunk_time;
  }
  s.Finish();
  if (out.window < 5 * out.probe_interval) {
    bool given = node["window"].IsDefined();
    s.Fail(node[given ? "window" : "probe_interval"], given ? "window" : "probe_interval",
           "the window holds fewer than 5 probes",
           "a decision needs at least 5 probes: make window at least 5 x probe_interval.");
  }
}

// pacing.cpu_priority: normal (0), low (19) or a nice value 0..19.
int ReadCpuPriority(Section& s, const YAML::Node& value) {
  std::string text = s.ScalarText(value, "cpu_priority");
  if (text == "normal") return 0;
  if (text == "low") return kLowCpuNice;
  int nice = -1;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), nice);
  if (error != std::errc() || end != text.data() + text.size() || nice < 0 || nice > 19) {
    s.Fail(value, "cpu_priority", "'" + text + "' is not a CPU priority",
           "write normal (the default), low (nice 19) or a nice value from 0 to 19; a higher "
           "nice value leaves more of the CPU to the online sessions.");
  }
  return nice;
}

void ReadPacing(Section& s, const YAML::Node& node, PacingConfig& out) {
  s.Bool("adaptive", out.adaptive);
  s.Duration("chunk_time", out.chunk_time, milliseconds(1), hours(1));
  s.Int("min_chunk", out.min_chunk, 1, 100000);
  s.Int("max_chunk", out.max_chunk, 1, 100000);
  s.Double("max_growth", out.max_growth, 1.0, 10.0);
  s.Double("shrink_after", out.shrink_after, 1.0, 100.0);
  s.Double("rate_weight", out.rate_weight, 0.01, 1.0);
  s.Duration("check_interval", out.check_interval, milliseconds(10), std::chrono::minutes(10));
  // A map that is written is the whole set: keys it leaves out are off, so
  // `max_load: {}` turns the throttle off instead of keeping the defaults.
  if (auto t = s.Map("max_load")) ReadThresholds(*t, out.max_load = {});
  s.Duration("hold_time", out.hold_time, milliseconds(0), hours(1));
  if (auto t = s.Map("critical_load")) ReadThresholds(*t, out.critical_load = {});
  s.Duration("critical_recheck", out.critical_recheck, milliseconds(0), std::chrono::minutes(10));
  s.Enum("critical_action", out.critical_action,
         {{"hibernate", CriticalAction::kHibernate}, {"stop", CriticalAction::kStop}});
  s.Duration("hibernate_time", out.hibernate_time, milliseconds(1), hours(24));
  s.String("throttle_query", out.throttle_query);
  s.String("pause_file", out.pause_file);
  s.String("stop_file", out.stop_file);
  s.String("control_socket", out.control_socket);
  if (auto p = node["cpu_priority"]; p.IsDefined()) {
    out.cpu_nice = ReadCpuPriority(s, p);
    std::string ignored;  // read above by hand; marks the key known for Finish()
    s.String("cpu_priority", ignored);
  }
  if (node["synchronous_commit"].IsDefined()) {
    SynchronousCommit mode = SynchronousCommit::kOn;
    s.Enum("synchronous_commit", mode,
           {{"off", SynchronousCommit::kOff},
            {"local", SynchronousCommit::kLocal},
            {"on", SynchronousCommit::kOn}});
    out.synchronous_commit = mode;
  }
  if (auto latency = s.Map("online_latency")) {
    ReadOnlineLatency(*latency, node["online_latency"], out.online_latency.emplace());
    if (auto shortest = out.online_latency->min_chunk_time;
        shortest && *shortest > out.chunk_time) {
      latency->Fail(node["online_latency"]["min_chunk_time"], "min_chunk_time",
                    "min_chunk_time (" + FormatDuration(*shortest) +
                        ") is longer than pacing.chunk_time (" + FormatDuration(out.chunk_time) +
                        ")",
                    "the second knob only shortens chunks: make it at most chunk_time, or "
                    "leave it out.");
    }
  }
  s.Finish();
  if (out.min_chunk > out.max_chunk) {
    bool given = node["min_chunk"].IsDefined();
    s.Fail(node[given ? "min_chunk" : "max_chunk"], given ? "min_chunk" : "max_chunk",
           "min_chunk (" + std::to_string(out.min_chunk) + ") is larger than max_chunk (" +
               std::to_string(out.max_chunk) + ")",
           "the adaptive chunk size stays within min_chunk..max_chunk; raise max_chunk.");
  }
}

// The shared keys here; the named policy reads its own (policies/registry.h).
void ReadPolicy(Section& s, const policies::ReadContext& context, PolicyConfig& out) {
  auto registrations = policies::Registrations();
  std::vector<std::string_view> names;
  for (const auto& registration : registrations) names.push_back(registration.name);
  if (auto at = s.Choice("name", names)) out.name = registrations[*at].name;
  out.name_at = MarkOfKey(s, s.node(), "name");
  s.Duration("defer_delay", out.defer_delay, milliseconds(0), hours(24 * 7));
  s.Duration("lock_wait_initial", out.lock_wait_initial, milliseconds(1), milliseconds(60'000));
  s.Duration("lock_wait_max", out.lock_wait_max, milliseconds(1), milliseconds(60'000));
  if (out.lock_wait_max < out.lock_wait_initial) {
    bool given = s.node()["lock_wait_max"].IsDefined();
    s.Fail(s.node()[given ? "lock_wait_max" : "lock_wait_initial"],
           given ? "lock_wait_max" : "lock_wait_initial",
           "lock_wait_max is shorter than lock_wait_initial", "raise lock_wait_max.");
  }
  out.options = policies::Find(out.name).value().read_options(s, context);
  s.Finish();
}

// operation.set is spliced into the UPDATE coexist writes, so it must be
// the SET list alone: a WHERE, FROM or RETURNING of its own, or a second
// statement, would change which rows the UPDATE touches.
void ReadSetList(Section& s, const YAML::Node& node, const OperationConfig& out) {
  if (!out.item_sql.empty() || !out.chunk_sql.empty()) {
    s.Fail(node["set"], "set",
           std::string("set and ") + (out.item_sql.empty() ? "chunk_sql" : "item_sql") +
               " are both set",
           "keep one: set (coexist writes the UPDATE of the chunk's rows) or your own SQL.");
  }
  std::string clause = sql_text::TopLevelClause(out.set, {"where", "from", "returning"});
  if (!clause.empty()) {
    s.Fail(node["set"], "set", "the SET list holds '" + clause + "' of its own",
           "write only the assignments (status = 'settled', settled_at = now()): coexist adds "
           "the WHERE (the chunk's keys, and a range job's predicate). For more, write "
           "chunk_sql.");
  }
}

void ReadOperation(Section& s, const YAML::Node& node, OperationConfig& out) {
  s.String("item_sql", out.item_sql);
  s.String("chunk_sql", out.chunk_sql);
  if (node["item_sql"].IsDefined()) out.item_sql_at = s.MarkOf(node["item_sql"]);
  if (node["chunk_sql"].IsDefined()) out.chunk_sql_at = s.MarkOf(node["chunk_sql"]);
  if (!out.item_sql.empty() && !out.chunk_sql.empty()) {
    s.Fail(node["chunk_sql"], "chunk_sql", "item_sql and chunk_sql are both set",
           "keep one: chunk_sql (over arrays, the fastest) or item_sql (per record).");
  }
  s.String("set", out.set);
  if (node["set"].IsDefined()) out.set_at = s.MarkOf(node["set"]);
  if (!out.set.empty()) ReadSetList(s, node, out);
  s.Enum("keys", out.keys, {{"one", ItemKeys::kOne}, {"many", ItemKeys::kMany}});
  if (auto list = s.Sequence("params")) {
    for (const auto& item : *list) {
      std::string field = s.ScalarText(item, "params");
      if (field.empty()) s.Fail(item, "params", "a payload field name is required here");
      out.params.push_back(field);
      out.params_at.push_back(s.MarkOf(item));
    }
  }
  if (!out.set.empty() && !out.params.empty()) {
    s.Fail(node["params"], "params", "operation.set binds no payload fields",
           "read the row's columns in the SET list, or write chunk_sql over arrays of params.");
  }
  if (!out.set.empty() && out.keys == ItemKeys::kMany) {
    s.Fail(node["keys"], "keys", "operation.set updates one row per item: keys: many does not fit",
           "leave keys out (one), or write chunk_sql over the items' arrays of keys.");
  }
  s.Finish();
}

void ReadMetrics(Section& s, const YAML::Node& node, MetricsConfig& out) {
  s.String("textfile", out.textfile);
  s.String("listen", out.listen);
  s.Bool("allow_remote", out.allow_remote);
  s.Bool("dashboard", out.dashboard);
  s.String("dashboard_token_file", out.dashboard_token_file);
  s.Finish();
  if (!out.dashboard_token_file.empty() && !out.dashboard) {
    s.Fail(node["dashboard_token_file"], "dashboard_token_file", "the dashboard is off",
           "set metrics.dashboard: true, or remove the token file.");
  }
  if (out.dashboard && out.listen.empty()) {
    s.Fail(node["dashboard"], "dashboard", "the dashboard needs metrics.listen",
           "set metrics.listen (e.g. 127.0.0.1:9187): the page is served beside /metrics.");
  }
  if (out.listen.empty()) return;
  std::string host;
  int port = 0;
  if (!SplitHostPort(out.listen, host, port)) {
    s.Fail(node["listen"], "listen", "'" + out.listen + "' is not host:port",
           "write e.g. 127.0.0.1:9187 or [::1]:9187.");
  }
  if (!out.allow_remote && !IsLoopback(host)) {
    s.Fail(node["listen"], "listen", "'" + host + "' is not a loopback address",
           "/metrics has no authentication; listen on 127.0.0.1 or ::1 and let a local agent "
           "scrape it, or set metrics.allow_remote: true.");
  }
}

void ReadDaemon(Section& s, const YAML::Node& node, DaemonConfig& out) {
  s.Duration("poll_interval", out.poll_interval, milliseconds(100), hours(24));
  s.Duration("reconnect_initial", out.reconnect_initial, milliseconds(10), hours(1));
  s.Duration("reconnect_max", out.reconnect_max, milliseconds(10), hours(24));
  s.Finish();
  if (out.reconnect_max < out.reconnect_initial) {
    bool given = node["reconnect_max"].IsDefined();
    s.Fail(node[given ? "reconnect_max" : "reconnect_initial"],
           given ? "reconnect_max" : "reconnect_initial",
           "reconnect_max (" + FormatDuration(out.reconnect_max) +
               ") is shorter than reconnect_initial (" + FormatDuration(out.reconnect_initial) +
               ")",
           "the backoff doubles from reconnect_initial up to reconnect_max; raise reconnect_max.");
  }
}

void ReadRetention(Section& s, const YAML::Node& node, RetentionConfig& out) {
  for (auto [key, value] : {std::pair<const char*, milliseconds*>{"done_items", &out.done_items},
                            {"events", &out.events},
                            {"runs", &out.runs}}) {
    s.Duration(key, *value, milliseconds(0), hours(24 * 3650));
    // A few minutes' retention would purge what a run or an operator still
    // reads (and re-admit idempotency keys at once): 0 or at least an hour.
    if (*value > milliseconds(0) && *value < hours(1)) {
      s.Fail(
          node[key], key, "'" + s.ScalarText(node[key], key) + "' is shorter than an hour",
          "keep " + std::string(key) + " at least 1h, e.g. 7d, or write 0s to keep them forever.");
    }
  }
  s.Duration("interval", out.interval, std::chrono::minutes(1), hours(24));
  s.Finish();
}

// What a policy checks its keys against: the batch's own application_name.
policies::ReadContext PolicyContext(const Section& top, const YAML::Node& root,
                                    const DatabaseConfig& database) {
  policies::ReadContext context;
  context.batch_application_name = database.application_name;
  YAML::Node section = root["database"];
  bool given = section.IsDefined() && section.IsMap() && section["application_name"].IsDefined();
  context.batch_application_name_at =
      top.MarkOf(given ? section["application_name"] : YAML::Node());
  return context;
}

// What a range job cannot be combined with yet, each refused where it is
// written.
void CheckRangeJob(Section& top, const YAML::Node& root, const Config& config) {
  const YAML::Node op = root["operation"];
  if (config.operation.keys == ItemKeys::kMany) {
    top.Fail(op["keys"], "operation.keys",
             "a range job's items are rows of one key each: keys: many does not fit it",
             "leave operation.keys out (one), or leave batch.range out.");
  }
  if (!config.operation.params.empty()) {
    top.Fail(op["params"], "operation.params",
             "a range job's rows carry no payload: params would all be NULL",
             "read the row's columns in the operation's SQL instead, or leave batch.range "
             "out.");
  }
}

Config Read(const YAML::Node& root, const std::string& name) {
  Config config;
  config.source = name;
  config.policy.name = policies::DefaultName();
  if (root.IsNull()) return config;
  if (!root.IsMap()) {
    Section top(YAML::Node(YAML::NodeType::Map), "", name);
    top.Fail(root, "", "the file must be a map of sections (database:, target:, batch:, ...)");
  }
  Section top(root, "", name);
  if (auto s = top.Map("database")) ReadDatabase(*s, root["database"], config.database);
  if (auto s = top.Map("log")) ReadLog(*s, config.log);
  if (auto s = top.Map("target")) ReadTarget(*s, root["target"], config.target, config.target_at);
  if (auto list = top.Sequence("targets")) ReadMoreTargets(top, *list, name, config);
  if (auto s = top.Map("batch")) ReadBatch(*s, config.batch);
  if (auto s = top.Map("enqueue")) ReadEnqueue(*s, root["enqueue"], config.enqueue);
  if (auto s = top.Map("pacing")) ReadPacing(*s, root["pacing"], config.pacing);
  if (auto s = top.Map("online")) ReadOnline(*s, root["online"], config.online);
  {
    // Read even when absent: the default policy checks its defaults too.
    auto s = top.Map("policy");
    if (!s) s.emplace(YAML::Node(YAML::NodeType::Map), "policy", name);
    ReadPolicy(*s, PolicyContext(top, root, config.database), config.policy);
  }
  if (auto s = top.Map("operation")) ReadOperation(*s, root["operation"], config.operation);
  if (auto s = top.Map("metrics")) ReadMetrics(*s, root["metrics"], config.metrics);
  if (auto s = top.Map("daemon")) ReadDaemon(*s, root["daemon"], config.daemon);
  if (auto s = top.Map("retention")) ReadRetention(*s, root["retention"], config.retention);
  top.Finish();
  if (!config.target.owner_column && policies::Create(config.policy)->TakesOver()) {
    YAML::Node policy = root["policy"];
    bool named = policy.IsDefined() && policy.IsMap() && policy["name"].IsDefined();
    top.Fail(named                        ? policy["name"]
             : root["target"].IsDefined() ? root["target"]
                                          : root,
             named ? "policy.name" : "target",
             config.policy.name + " takes rows over through target.owner_column, and none is set",
             "set target.owner_column to the table's text column holding online/batch "
             "(e.g. target: {owner_column: owner}).");
  }
  if (config.batch.range) CheckRangeJob(top, root, config);
  if (config.online.value_column == config.target.version_column) {
    bool given = root["online"].IsDefined() && root["online"]["value_column"].IsDefined();
    top.Fail(given ? root["online"]["value_column"] : root["target"]["version_column"],
             given ? "online.value_column" : "target.version_column",
             "'" + config.online.value_column + "' is the target's version column",
             "the database bumps the version on every update; edit another column.");
  }
  return config;
}

}  // namespace

const char* ToString(LoadModel model) { return model == LoadModel::kOpen ? "open" : "closed"; }

Config ReadConfig(const YAML::Node& root, const std::string& name) { return Read(root, name); }

Config LoadString(const std::string& yaml, const std::string& name) {
  return Read(ParseYaml(yaml, name), name);
}

Config LoadFile(const std::string& path) { return LoadString(ReadFileText(path), path); }

}  // namespace coexist::config
