#include "config/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/scenario.h"
#include "config_core/config_error.h"
#include "config_core/duration.h"
#include "config_core/yaml_reader.h"
#include "policies/online_priority.h"
#include "policies/registry.h"
#include "policies/skip_locked.h"

namespace coexist::config {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(Duration, ParsesUnitsAndCombinations) {
  EXPECT_EQ(ParseDuration("250ms"), microseconds(250'000));
  EXPECT_EQ(ParseDuration("30s"), microseconds(30'000'000));
  EXPECT_EQ(ParseDuration("2m"), microseconds(120'000'000));
  EXPECT_EQ(ParseDuration("1h"), microseconds(3'600'000'000LL));
  EXPECT_EQ(ParseDuration("1m30s"), microseconds(90'000'000));
  EXPECT_EQ(ParseDuration("1.5s"), microseconds(1'500'000));
  EXPECT_EQ(ParseDuration("500us"), microseconds(500));
  EXPECT_EQ(ParseDuration("0s"), microseconds(0));
}

TEST(Duration, RejectsMalformed) {
  for (const char* bad : {"", "30", "s", "30x", "-1s", "1.2.3s", "ms30", "1 s", "."}) {
    EXPECT_FALSE(ParseDuration(bad).has_value()) << bad;
  }
}

TEST(Duration, FormatsShortestExactSpelling) {
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1.5s");
  EXPECT_EQ(FormatDuration(milliseconds(90'000)), "1m30s");
  EXPECT_EQ(FormatDuration(milliseconds(250)), "250ms");
  EXPECT_EQ(FormatDuration(std::chrono::hours(24)), "24h");
  EXPECT_EQ(FormatDuration(microseconds(5)), "5us");
}

TEST(Config, EmptyFileGivesDefaults) {
  Config config = LoadString("", "empty.yaml");
  EXPECT_EQ(config.target.Name(), "public.products");
  EXPECT_EQ(config.batch.chunk_size, 500);
  EXPECT_FALSE(config.database.url.has_value());
  EXPECT_EQ(config.database.stall_timeout, std::chrono::seconds(30));
  EXPECT_EQ(config.policy.name, "skip_locked");
  EXPECT_EQ(config.batch.missing_rows, MissingRows::kApply);
  EXPECT_EQ(LoadString("batch: {missing_rows: skip}\n", "s.yaml").batch.missing_rows,
            MissingRows::kSkip);
  EXPECT_EQ(LoadString("batch: {missing_rows: fail}\n", "f.yaml").batch.missing_rows,
            MissingRows::kFail);
  // No owner column unless one is named: only status_partition needs one.
  EXPECT_FALSE(config.target.owner_column.has_value());
}

// Run budgets: none unless written; each as written, a fractional rate too;
// a range job takes them as a queued job does.
TEST(Config, RunBudgetsAreNoneUnlessWritten) {
  Config none = LoadString("batch: {job: j}\n", "none.yaml");
  EXPECT_FALSE(none.batch.max_duration.has_value());
  EXPECT_FALSE(none.batch.max_items.has_value());
  EXPECT_FALSE(none.batch.max_rate.has_value());
  Config set =
      LoadString("batch: {job: j, max_duration: 2h, max_items: 25, max_rate: 0.5}\n", "set.yaml");
  EXPECT_EQ(set.batch.max_duration, std::chrono::hours(2));
  EXPECT_EQ(set.batch.max_items, 25);
  EXPECT_EQ(set.batch.max_rate, 0.5);
  Config range = LoadString(
      "batch: {job: r, max_items: 10, max_rate: 100, max_duration: 1s, range: {where: \"true\"}}\n",
      "range.yaml");
  EXPECT_EQ(range.batch.max_items, 10);
  EXPECT_TRUE(range.batch.range.has_value());
}

TEST(Config, StatusPartitionTakesTheOwnerColumnItIsGiven) {
  Config config =
      LoadString("target: {owner_column: holder}\npolicy: {name: status_partition}\n", "ok.yaml");
  EXPECT_EQ(config.target.owner_column, "holder");
  EXPECT_EQ(config.policy.name_at.ToString(), "ok.yaml:2:16");
}

// The loader's policy names are the registry's: an unknown name's hint lists
// every registered one, and each registered one is accepted.
TEST(Config, AcceptsExactlyTheRegisteredPolicyNames) {
  std::string hint;
  try {
    LoadString("policy:\n  name: first_come\n", "p.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "p.yaml:2:9: policy.name: unknown value 'first_come'");
    hint = e.hint();
  }
  const std::string prefix = "use one of: ";
  ASSERT_TRUE(hint.starts_with(prefix) && hint.ends_with(".")) << hint;
  std::vector<std::string> listed;
  std::istringstream list(hint.substr(prefix.size(), hint.size() - prefix.size() - 1));
  for (std::string name; std::getline(list >> std::ws, name, ',');) listed.push_back(name);
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, policies::Names());
  for (const auto& name : policies::Names()) {
    try {
      // status_partition wants an owner column; the others take it as well.
      EXPECT_EQ(
          LoadString("target: {owner_column: owner}\npolicy:\n  name: " + name + "\n", "p.yaml")
              .policy.name,
          name);
    } catch (const ConfigError& e) {  // time_window wants windows: its name was accepted
      EXPECT_EQ(std::string(e.what()).find("policy.name"), std::string::npos) << e.what();
    }
  }
}

TEST(Config, ReadsEverySection) {
  Config config = LoadString(R"(
database:
  url: postgresql:///shop
  application_name: nightly
  statement_timeout: 90s
  stall_timeout: 5s
log:
  level: debug
  format: json
target:
  table: sales.orders
  key_column: order_id
  version_column: lock_version
  owner_column: ~
batch:
  job: settle
  chunk_size: 2000
  workers: 4
  max_attempts: 3
)",
                             "full.yaml");
  EXPECT_EQ(config.database.url, "postgresql:///shop");
  EXPECT_EQ(config.database.application_name, "nightly");
  EXPECT_EQ(config.database.statement_timeout, milliseconds(90'000));
  EXPECT_EQ(config.database.stall_timeout, milliseconds(5'000));
  EXPECT_EQ(config.log.format, "json");
  EXPECT_EQ(config.target.schema, "sales");
  EXPECT_EQ(config.target.table, "orders");
  EXPECT_EQ(config.target.key_column, "order_id");
  EXPECT_EQ(config.target.version_column, "lock_version");
  EXPECT_FALSE(config.target.owner_column.has_value());
  EXPECT_EQ(config.batch.job, "settle");
  EXPECT_EQ(config.batch.chunk_size, 2000);
  EXPECT_EQ(config.batch.workers, 4);
  EXPECT_EQ(config.batch.max_attempts, 3);
}

TEST(Config, ReadsRetentionWithZeroKeepingForever) {
  Config defaults = LoadString("", "empty.yaml");
  EXPECT_EQ(defaults.retention.done_items, std::chrono::hours(7 * 24));
  EXPECT_EQ(defaults.retention.events, std::chrono::hours(30 * 24));
  EXPECT_EQ(defaults.retention.runs, std::chrono::hours(90 * 24));
  EXPECT_EQ(defaults.retention.interval, std::chrono::hours(1));
  Config config = LoadString("retention: {done_items: 2d, events: 0s, runs: 1h, interval: 10m}\n",
                             "retention.yaml");
  EXPECT_EQ(config.retention.done_items, std::chrono::hours(48));
  EXPECT_EQ(config.retention.events, milliseconds(0));
  EXPECT_EQ(config.retention.runs, std::chrono::hours(1));
  EXPECT_EQ(config.retention.interval, std::chrono::minutes(10));
}

TEST(Config, SubstitutesEnvironmentVariables) {
  setenv("COEXIST_TEST_PASSWORD", "s3cret", 1);
  Config config = LoadString(
      "database:\n  url: postgresql://app:${COEXIST_TEST_PASSWORD}@db/shop\n", "env.yaml");
  EXPECT_EQ(config.database.url, "postgresql://app:s3cret@db/shop");
  config = LoadString("batch:\n  job: price$$list\n", "dollar.yaml");
  EXPECT_EQ(config.batch.job, "price$list");
}

struct BadInput {
  const char* name;
  const char* yaml;
  const char* message;  // exact what()
  const char* hint;     // a part of hint()
};

class BadConfig : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadConfig, NamesTheProblemAndWhereItIs) {
  const BadInput& input = GetParam();
  try {
    LoadString(input.yaml, "bad.yaml");
    FAIL() << "accepted: " << input.yaml;
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), input.message);
    EXPECT_NE(e.hint().find(input.hint), std::string::npos) << e.hint();
    EXPECT_EQ(e.code(), ExitCode::kConfig);
  }
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(Cases, BadConfig, ::testing::Values(
  BadInput{"status_partition_without_owner_column", "policy: {name: status_partition}\n",
           "bad.yaml:1:16: policy.name: status_partition takes rows over through "
           "target.owner_column, and none is set",
           "set target.owner_column to the table's text column holding online/batch "
           "(e.g. target: {owner_column: owner})."},
  BadInput{"status_partition_with_owner_column_none",
           "target: {owner_column: ~}\npolicy:\n  name: status_partition\n",
           "bad.yaml:3:9: policy.name: status_partition takes rows over through "
           "target.owner_column, and none is set", "target: {owner_column: owner}"},
  BadInput{"unknown_top_level_key", "batch:\n  chunk_size: 10\nbatches: {}\n",
           "bad.yaml:3:1: batches: unknown key", "did you mean 'batch'?"},
  BadInput{"unknown_nested_key", "target:\n  tabel: orders\n",
           "bad.yaml:2:3: target.tabel: unknown key", "did you mean 'table'?"},
  BadInput{"section_not_a_map", "target: orders\n",
           "bad.yaml:1:9: target: expected a map of settings, got a single value", ""},
  BadInput{"scalar_got_list", "batch:\n  job: [a, b]\n",
           "bad.yaml:2:8: batch.job: expected a single value, got a list", ""},
  BadInput{"not_a_number", "batch:\n  chunk_size: many\n",
           "bad.yaml:2:15: batch.chunk_size: 'many' is not a whole number",
           "allowed range is 1 to 100000 inclusive."},
  BadInput{"set_beside_chunk_sql",
           "operation:\n  chunk_sql: SELECT 1\n  set: stock = 0\n",
           "bad.yaml:3:8: operation.set: set and chunk_sql are both set",
           "keep one: set (coexist writes the UPDATE of the chunk's rows) or your own SQL."},
  BadInput{"set_with_a_where_of_its_own",
           "operation:\n  set: \"status = 'settled' WHERE id > 5\"\n",
           "bad.yaml:2:8: operation.set: the SET list holds 'WHERE' of its own",
           "coexist adds the WHERE (the chunk's keys, and a range job's predicate)"},
  BadInput{"set_with_a_second_statement",
           "operation:\n  set: \"stock = 0; DELETE FROM products\"\n",
           "bad.yaml:2:8: operation.set: the SET list holds ';' of its own",
           "write only the assignments"},
  BadInput{"set_with_params",
           "operation:\n  set: stock = 0\n  params: [qty]\n",
           "bad.yaml:3:11: operation.params: operation.set binds no payload fields",
           "write chunk_sql over arrays of params."},
  BadInput{"out_of_range_low", "batch:\n  chunk_size: 0\n",
           "bad.yaml:2:15: batch.chunk_size: '0' is out of range",
           "allowed range is 1 to 100000 inclusive."},
  BadInput{"out_of_range_high", "batch:\n  workers: 65\n",
           "bad.yaml:2:12: batch.workers: '65' is out of range", "1 to 64"},
  BadInput{"negative_failure_stop", "batch:\n  max_consecutive_failures: -1\n",
           "bad.yaml:2:29: batch.max_consecutive_failures: '-1' is out of range",
           "allowed range is 0 to 1000000 inclusive."},
  BadInput{"fraction_for_integer", "batch:\n  max_attempts: 2.5\n",
           "bad.yaml:2:17: batch.max_attempts: '2.5' is not a whole number", ""},
  BadInput{"duration_without_unit", "database:\n  statement_timeout: 30\n",
           "bad.yaml:2:22: database.statement_timeout: '30' is not a duration",
           "add a unit: '30ms', '30s' or '30m'."},
  BadInput{"duration_bad_unit", "database:\n  statement_timeout: 30x\n",
           "bad.yaml:2:22: database.statement_timeout: '30x' is not a duration",
           "e.g. 250ms, 30s, 1m30s"},
  BadInput{"duration_out_of_range", "database:\n  statement_timeout: 2d\n",
           "bad.yaml:2:22: database.statement_timeout: '2d' is out of range",
           "allowed range is 1ms to 24h."},
  BadInput{"duration_finer_than_ms", "database:\n  statement_timeout: 1500us\n",
           "bad.yaml:2:22: database.statement_timeout: '1500us' is finer than a millisecond", ""},
  BadInput{"stall_timeout_under_a_second", "database:\n  stall_timeout: 500ms\n",
           "bad.yaml:2:18: database.stall_timeout: '500ms' is shorter than a second",
           "use 1s or more (default 30s), or 0 to turn stall detection off."},
  BadInput{"stall_timeout_out_of_range", "database:\n  stall_timeout: 2h\n",
           "bad.yaml:2:18: database.stall_timeout: '2h' is out of range",
           "allowed range is 0s to 1h."},
  BadInput{"unknown_enum_value", "log:\n  format: xml\n",
           "bad.yaml:2:11: log.format: unknown value 'xml'", "use one of: text, json."},
  BadInput{"missing_rows_unknown", "batch:\n  job: j\n  missing_rows: ignore\n",
           "bad.yaml:3:17: batch.missing_rows: unknown value 'ignore'",
           "use one of: apply, skip, fail."},
  BadInput{"missing_rows_not_a_scalar", "batch:\n  missing_rows: [skip]\n",
           "bad.yaml:2:17: batch.missing_rows: expected a single value, got a list", ""},
  // Run budgets: a budget of nothing, a negative or non-numeric value and a
  // duration that does not parse, each at its value with the allowed range.
  BadInput{"max_items_zero", "batch:\n  max_items: 0\n",
           "bad.yaml:2:14: batch.max_items: '0' is out of range",
           "allowed range is 1 to 1000000000000 inclusive."},
  BadInput{"max_items_negative", "batch:\n  max_items: -25\n",
           "bad.yaml:2:14: batch.max_items: '-25' is out of range",
           "allowed range is 1 to 1000000000000 inclusive."},
  BadInput{"max_items_not_a_number", "batch:\n  max_items: lots\n",
           "bad.yaml:2:14: batch.max_items: 'lots' is not a whole number",
           "allowed range is 1 to 1000000000000 inclusive."},
  BadInput{"max_duration_zero", "batch:\n  max_duration: 0s\n",
           "bad.yaml:2:17: batch.max_duration: '0s' is out of range",
           "allowed range is 1s to 720h."},
  BadInput{"max_duration_not_a_duration", "batch:\n  max_duration: two hours\n",
           "bad.yaml:2:17: batch.max_duration: 'two hours' is not a duration",
           "write a number with a unit (us, ms, s, m, h, d), e.g. 250ms, 30s, 1m30s."},
  BadInput{"max_duration_without_unit", "batch:\n  max_duration: 7200\n",
           "bad.yaml:2:17: batch.max_duration: '7200' is not a duration",
           "add a unit: '7200ms', '7200s' or '7200m'."},
  BadInput{"max_duration_negative", "batch:\n  max_duration: -2h\n",
           "bad.yaml:2:17: batch.max_duration: '-2h' is not a duration",
           "write a number with a unit (us, ms, s, m, h, d), e.g. 250ms, 30s, 1m30s."},
  BadInput{"max_rate_zero", "batch:\n  max_rate: 0\n",
           "bad.yaml:2:13: batch.max_rate: '0' is out of range",
           "allowed range is more than 0, at most 1000000."},
  BadInput{"max_rate_negative", "batch:\n  max_rate: -0.5\n",
           "bad.yaml:2:13: batch.max_rate: '-0.5' is out of range",
           "allowed range is more than 0, at most 1000000."},
  BadInput{"max_rate_not_a_number", "batch:\n  max_rate: fast\n",
           "bad.yaml:2:13: batch.max_rate: 'fast' is not a number",
           "allowed range is more than 0, at most 1000000."},
  BadInput{"max_rate_with_a_unit", "batch:\n  max_rate: 100/s\n",
           "bad.yaml:2:13: batch.max_rate: '100/s' is not a number",
           "allowed range is more than 0, at most 1000000."},
  BadInput{"max_rate_too_high", "batch:\n  max_rate: 2e6\n",
           "bad.yaml:2:13: batch.max_rate: '2e6' is out of range",
           "allowed range is more than 0, at most 1000000."},
  BadInput{"identifier_with_sql", "target:\n  key_column: \"id; DROP TABLE x\"\n",
           "bad.yaml:2:15: target.key_column: 'id; DROP TABLE x' is not a valid SQL name",
           "letters, digits"},
  BadInput{"identifier_too_long",
           "target:\n  version_column: v234567890123456789012345678901234567890123456789012345678901234\n",
           "bad.yaml:2:19: target.version_column: "
           "'v234567890123456789012345678901234567890123456789012345678901234' is not a valid SQL name",
           "at most 63 bytes"},
  BadInput{"table_with_three_parts", "target:\n  table: a.b.c\n",
           "bad.yaml:2:10: target.table: 'a.b.c' is not a valid table name", "schema.name"},
  BadInput{"missing_environment_variable", "database:\n  url: ${COEXIST_TEST_UNSET_VARIABLE}\n",
           "bad.yaml:2:8: database.url: environment variable 'COEXIST_TEST_UNSET_VARIABLE' is not set",
           "export COEXIST_TEST_UNSET_VARIABLE"},
  BadInput{"unclosed_variable", "database:\n  url: postgresql://${HOST\n",
           "bad.yaml:2:8: database.url: unclosed '${' in 'postgresql://${HOST'", "$$"},
  BadInput{"duplicate_key", "batch:\n  workers: 2\n  workers: 3\n",
           "bad.yaml:3:3: batch.workers: duplicate key", "first set at bad.yaml:2:3"},
  BadInput{"yaml_syntax_error", "batch:\n  workers: [1, 2\n",
           "bad.yaml:3:1: YAML syntax error: end of sequence flow not found", "indentation"},
  BadInput{"top_level_not_a_map", "- a\n- b\n",
           "bad.yaml:1:1: the file must be a map of sections (database:, target:, batch:, ...)", ""},
  BadInput{"boolean_expected_owner_null_ok_but_required_name_null", "target:\n  key_column: ~\n",
           "bad.yaml:2:15: target.key_column: a name is required here", ""},
  // enqueue: (the query `coexist enqueue` runs when given none)
  BadInput{"enqueue_unknown_key", "enqueue:\n  selct: SELECT 1\n",
           "bad.yaml:2:3: enqueue.selct: unknown key", "did you mean 'select'?"},
  BadInput{"enqueue_empty_select", "enqueue:\n  select: \" \"\n",
           "bad.yaml:2:11: enqueue.select: the query is empty", "or leave enqueue: out."},
  BadInput{"enqueue_select_list", "enqueue:\n  select: [a]\n",
           "bad.yaml:2:11: enqueue.select: expected a single value, got a list", ""},
  // metrics: and daemon: (operations)
  BadInput{"metrics_listen_any_address",
           "metrics:\n  listen: 0.0.0.0:9187\n",
           "bad.yaml:2:11: metrics.listen: '0.0.0.0' is not a loopback address",
           "metrics.allow_remote: true"},
  BadInput{"metrics_listen_private_address",
           "metrics:\n  listen: \"192.168.1.5:9187\"\n",
           "bad.yaml:2:11: metrics.listen: '192.168.1.5' is not a loopback address", "127.0.0.1"},
  BadInput{"metrics_listen_host_name",
           "metrics:\n  listen: metrics.example.com:9187\n",
           "bad.yaml:2:11: metrics.listen: 'metrics.example.com' is not a loopback address", ""},
  BadInput{"metrics_dashboard_without_listen", "metrics:\n  dashboard: true\n",
           "bad.yaml:2:14: metrics.dashboard: the dashboard needs metrics.listen",
           "served beside /metrics"},
  BadInput{"metrics_token_without_dashboard",
           "metrics:\n  listen: 127.0.0.1:9187\n  dashboard_token_file: /etc/coexist/token\n",
           "bad.yaml:3:25: metrics.dashboard_token_file: the dashboard is off",
           "metrics.dashboard: true"},
  BadInput{"metrics_listen_port_only",
           "metrics:\n  listen: 9187\n",
           "bad.yaml:2:11: metrics.listen: '9187' is not host:port", "127.0.0.1:9187"},
  BadInput{"metrics_listen_port_out_of_range",
           "metrics:\n  listen: \"127.0.0.1:99999\"\n",
           "bad.yaml:2:11: metrics.listen: '127.0.0.1:99999' is not host:port", ""},
  BadInput{"metrics_listen_bare_ipv6",
           "metrics:\n  listen: \"::1:9187\"\n",
           "bad.yaml:2:11: metrics.listen: '::1:9187' is not host:port", "[::1]:9187"},
  BadInput{"metrics_unknown_key",
           "metrics:\n  texfile: x.prom\n",
           "bad.yaml:2:3: metrics.texfile: unknown key", "did you mean 'textfile'?"},
  BadInput{"daemon_poll_interval_too_short",
           "daemon:\n  poll_interval: 10ms\n",
           "bad.yaml:2:18: daemon.poll_interval: '10ms' is out of range", ""},
  // retention: (queue purge and the daemon)
  BadInput{"retention_not_a_duration",
           "retention:\n  done_items: 7x\n",
           "bad.yaml:2:15: retention.done_items: '7x' is not a duration", "e.g. 250ms, 30s"},
  BadInput{"retention_shorter_than_an_hour",
           "retention:\n  events: 30m\n",
           "bad.yaml:2:11: retention.events: '30m' is shorter than an hour",
           "keep events at least 1h, e.g. 7d, or write 0s to keep them forever."},
  BadInput{"retention_longer_than_ten_years",
           "retention:\n  runs: 3651d\n",
           "bad.yaml:2:9: retention.runs: '3651d' is out of range", "allowed range is 0s to"},
  BadInput{"retention_interval_too_short",
           "retention:\n  interval: 10s\n",
           "bad.yaml:2:13: retention.interval: '10s' is out of range", "1m to 24h"},
  BadInput{"retention_unknown_key",
           "retention:\n  done_item: 7d\n",
           "bad.yaml:2:3: retention.done_item: unknown key", "did you mean 'done_items'?"},
  BadInput{"daemon_reconnect_max_below_initial",
           "daemon:\n  reconnect_initial: 5s\n  reconnect_max: 1s\n",
           "bad.yaml:3:18: daemon.reconnect_max: reconnect_max (1s) is shorter than "
           "reconnect_initial (5s)", "raise reconnect_max"},
  // batch_priority signals only what its pattern names: a pattern of only
  // wildcards (it names no application) or one that matches the batch's own
  // application_name is refused.
  BadInput{"online_pattern_bare_percent",
           "policy:\n  name: batch_priority\n  online_application_name: \"%\"\n",
           "bad.yaml:3:28: policy.online_application_name: '%' matches the sessions of any "
           "application, not just the online one", "coexist-online%"},
  BadInput{"online_pattern_only_wildcards",
           "policy:\n  name: skip_locked\n  online_application_name: \"_%\"\n",
           "bad.yaml:3:28: policy.online_application_name: '_%' matches the sessions of any "
           "application, not just the online one", ""},
  BadInput{"online_pattern_matches_the_batch",
           "database:\n  application_name: coexist-batch\n"
           "policy:\n  name: batch_priority\n  online_application_name: coexist%\n",
           "bad.yaml:5:28: policy.online_application_name: 'coexist%' matches the batch's own "
           "application_name 'coexist-batch'", "never signal its own sessions"},
  BadInput{"batch_name_matches_the_default_online_pattern",
           "database:\n  application_name: coexist-online-batch\npolicy:\n  name: batch_priority\n",
           "bad.yaml:2:21: database.application_name: 'coexist-online%' matches the batch's own "
           "application_name 'coexist-online-batch'", "change database.application_name"},
  // Without a policy: section, the default policy (skip_locked) checks too.
  BadInput{"batch_name_matches_the_default_policy_pattern",
           "database:\n  application_name: coexist-online-batch\n",
           "bad.yaml:2:21: database.application_name: 'coexist-online%' matches the batch's own "
           "application_name 'coexist-online-batch'", "change database.application_name"},
  BadInput{"range_without_where", "batch:\n  range: {}\n",
           "bad.yaml:2:10: batch.range: a range job needs range.where",
           "range: {where: \"status = 'to_settle'\"}"},
  BadInput{"range_with_an_empty_where", "batch:\n  range: {where: ' '}\n",
           "bad.yaml:2:18: batch.range.where: the condition is empty", "status = 'to_settle'"},
  BadInput{"range_with_a_misspelt_key", "batch:\n  range: {wher: x}\n",
           "bad.yaml:2:11: batch.range.wher: unknown key", "did you mean 'where'?"},
  BadInput{"online_pattern_trailing_escape",
           "policy:\n  name: batch_priority\n  online_application_name: \"web\\\\\"\n",
           "bad.yaml:3:28: policy.online_application_name: 'web\\' ends with LIKE's escape "
           "character", ""}
), [](const auto& test_case) { return std::string(test_case.param.name); });
// clang-format on

// pacing.cpu_priority and pacing.synchronous_commit: the defaults change
// nothing; bad values are located, with the fix.
TEST(Config, TheBatchsCpuPriorityAndSynchronousCommit) {
  auto defaults = LoadString("", "empty.yaml").pacing;
  EXPECT_EQ(defaults.cpu_nice, 0);
  EXPECT_FALSE(defaults.synchronous_commit);
  EXPECT_EQ(LoadString("pacing: {cpu_priority: low}", "p.yaml").pacing.cpu_nice, 19);
  EXPECT_EQ(LoadString("pacing: {cpu_priority: normal}", "p.yaml").pacing.cpu_nice, 0);
  EXPECT_EQ(LoadString("pacing: {cpu_priority: 10}", "p.yaml").pacing.cpu_nice, 10);
  EXPECT_EQ(LoadString("pacing: {synchronous_commit: off}", "p.yaml").pacing.synchronous_commit,
            SynchronousCommit::kOff);
  EXPECT_EQ(LoadString("pacing: {synchronous_commit: local}", "p.yaml").pacing.synchronous_commit,
            SynchronousCommit::kLocal);
  EXPECT_EQ(LoadString("pacing: {synchronous_commit: on}", "p.yaml").pacing.synchronous_commit,
            SynchronousCommit::kOn);
  auto error = [](const std::string& yaml) -> std::string {
    try {
      LoadString(yaml, "p.yaml");
    } catch (const ConfigError& e) {
      return std::string(e.what()) + " | " + e.hint();
    }
    return "no error";
  };
  const std::string priority_hint =
      "write normal (the default), low (nice 19) or a nice value from 0 to 19; a higher nice "
      "value leaves more of the CPU to the online sessions.";
  EXPECT_EQ(error("pacing:\n  cpu_priority: high\n"),
            "p.yaml:2:17: pacing.cpu_priority: 'high' is not a CPU priority | " + priority_hint);
  EXPECT_EQ(error("pacing:\n  cpu_priority: 20\n"),
            "p.yaml:2:17: pacing.cpu_priority: '20' is not a CPU priority | " + priority_hint);
  EXPECT_EQ(error("pacing:\n  cpu_priority: -5\n"),
            "p.yaml:2:17: pacing.cpu_priority: '-5' is not a CPU priority | " + priority_hint);
  EXPECT_EQ(error("pacing:\n  synchronous_commit: remote_apply\n"),
            "p.yaml:2:23: pacing.synchronous_commit: unknown value 'remote_apply' | use one of: "
            "off, local, on.");
}

// The SET list's own words inside a subquery, a string or a quoted name are
// not clauses of the UPDATE coexist writes.
TEST(Config, TheSetListMayHoldWordsOfClausesInsideParenthesesAndQuotes) {
  Config config = LoadString(
      "operation:\n"
      "  set: >-\n"
      "    note = 'where from', \"from\" = 1,\n"
      "    total = (SELECT sum(qty) FROM lines WHERE lines.order_id = orders.id)\n",
      "set.yaml");
  EXPECT_TRUE(config.operation.Configured());
  EXPECT_NE(config.operation.set.find("sum(qty)"), std::string::npos);
}

TEST(Config, ARangeJobNamesItsRowsByAPredicate) {
  Config config = LoadString("batch:\n  job: settle\n  range: {where: \"status = 'to_settle'\"}\n",
                             "settle.yaml");
  ASSERT_TRUE(config.batch.range.has_value());
  EXPECT_EQ(config.batch.range->where, "status = 'to_settle'");
  EXPECT_EQ(config.batch.range->where_at.ToString(), "settle.yaml:3:18");
  EXPECT_FALSE(LoadString("batch: {job: settle}\n", "q.yaml").batch.range.has_value());
}

TEST(Config, ADurationOfThousandsOfDigitsIsOutOfRangeNotAnInternalError) {
  std::string huge = "1" + std::string(4999, '0') + "s";
  try {
    LoadString("database:\n  statement_timeout: " + huge + "\n", "bad.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "bad.yaml:2:22: database.statement_timeout: '10000000000000000000000000000000...' "
              "(5001 characters) is out of range");
    EXPECT_EQ(e.hint(), "allowed range is 1ms to 24h.");
  }
  DurationError error{};
  EXPECT_FALSE(ParseDuration(huge, error).has_value());
  EXPECT_EQ(error, DurationError::kTooLarge);
  // A fraction of thousands of digits underflows instead of throwing.
  EXPECT_EQ(ParseDuration("0." + std::string(5000, '0') + "1s"), microseconds(0));
  // Thousands of digits elsewhere: a clear range error, never a crash.
  try {
    LoadString("online:\n  rate: " + std::string(5000, '9') + "\n", "bad.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "bad.yaml:2:9: online.rate: '99999999999999999999999999999999...' (5000 "
              "characters) is out of range");
  }
}

TEST(Config, MissingFileIsAConfigError) {
  try {
    LoadFile("/nonexistent/coexist.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/coexist.yaml: cannot read the file");
  }
}

namespace coexist::config {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / (std::to_string(getpid()) + "-" + name);
  std::ofstream(path) << text;
  return path.string();
}

std::string LoadFileError(const std::string& path) {
  try {
    LoadFile(path);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), ExitCode::kConfig);
    return e.what();
  }
  return "no error";
}

TEST(ConfigFile, ADirectoryOrADeviceIsNotAConfiguration) {
  auto dir = std::filesystem::temp_directory_path() / (std::to_string(getpid()) + "-config-dir");
  std::filesystem::create_directory(dir);
  EXPECT_EQ(LoadFileError(dir.string()),
            dir.string() + ": is a directory, not a configuration file");
  std::filesystem::remove(dir);
  EXPECT_EQ(LoadFileError("/dev/null"), "/dev/null: is not a regular file (a device or socket)");
}

TEST(ConfigFile, AFileLargerThanTheLimitIsRefused) {
  std::string line = "# " + std::string(98, 'x') + "\n";  // 100 bytes
  std::string at_limit;
  while (at_limit.size() + line.size() <= kMaxConfigBytes) at_limit += line;
  at_limit += std::string(kMaxConfigBytes - at_limit.size() - 1, '#') + "\n";
  ASSERT_EQ(at_limit.size(), kMaxConfigBytes);
  auto fits = WriteTemp("at-limit.yaml", at_limit);
  EXPECT_EQ(LoadFileError(fits), "no error");
  auto over = WriteTemp("over-limit.yaml", at_limit + "#\n");
  EXPECT_EQ(LoadFileError(over),
            over + ": the file is larger than 1 MiB, the limit for a configuration");
  std::filesystem::remove(fits);
  std::filesystem::remove(over);
}

// 80,000 keys in one map: every key is read once (the duplicate check is a
// hash lookup, not a scan of the keys before it). bench/config_bench prints
// the time of 10,000 against 80,000 keys.
TEST(ConfigFile, EightyThousandKeysAreAllCheckedForDuplicates) {
  constexpr int kKeys = 80'000;
  std::string yaml = "batch:\n";
  for (int i = 0; i < kKeys; ++i) yaml += "  k" + std::to_string(i) + ": 1\n";
  try {
    LoadString(yaml + "  k0: 2\n", "big.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "big.yaml:" + std::to_string(kKeys + 2) + ":3: batch.k0: duplicate key");
    EXPECT_NE(e.hint().find("first set at big.yaml:2:3"), std::string::npos) << e.hint();
  }
  try {
    LoadString(yaml, "big.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "big.yaml:2:3: batch.k0: unknown key");
  }
}

TEST(Scenario, ExpandsTheSweepIntoValidatedCells) {
  auto path = WriteTemp("sweep.yaml", R"(
scenario:
  description: two policies at two loads
  records: 500
  queue_items: 300
  window: 30s
  production_queue_items: 1000000
  production_window: 4h
sweep:
  policy.name: [skip_locked, online_priority]
  online.users: [10, 40]
policy_options:
  skip_locked:
    max_deferrals: 2
  online_priority:
    max_wait: 3s
online:
  think_time: 100ms
)");
  Scenario scenario = LoadScenario(path);
  EXPECT_EQ(scenario.settings.records, 500);
  EXPECT_EQ(scenario.settings.window, std::chrono::seconds(30));
  EXPECT_EQ(scenario.settings.production_window, std::chrono::hours(4));
  ASSERT_EQ(scenario.cells.size(), 4u);
  const auto& first = scenario.cells[0];
  EXPECT_EQ(first.config.policy.name, "skip_locked");
  EXPECT_EQ(policies::OptionsOf<policies::SkipLocked::Options>(first.config.policy).max_deferrals,
            2);
  EXPECT_EQ(first.config.online.users, 10);
  EXPECT_EQ(first.load_level, "online.users=10");
  EXPECT_EQ(first.config.online.think_time, std::chrono::milliseconds(100));
  const auto& last = scenario.cells[3];
  EXPECT_EQ(last.config.policy.name, "online_priority");
  EXPECT_EQ(policies::OptionsOf<policies::OnlinePriority::Options>(last.config.policy).max_wait,
            std::chrono::seconds(3));
  EXPECT_EQ(last.config.online.users, 40);
  EXPECT_EQ(last.parameters.at("policy.name"), "online_priority");
  EXPECT_EQ(scenario.settings.name, std::filesystem::path(path).stem().string());
  std::filesystem::remove(path);
}

// A section's settings can be swept whole: a map per cell, or null to leave
// it out (pacing on and off beside each other); the cells are named by them.
TEST(Scenario, SweepsAMapOfSettingsOrNone) {
  auto scenario = LoadScenarioString(R"(
sweep:
  pacing.online_latency: [null, {objective: 1.5x, signal: sessions}]
)",
                                     "paced.yaml");
  ASSERT_EQ(scenario.cells.size(), 2u);
  EXPECT_EQ(scenario.cells[0].parameters.at("pacing.online_latency"), "off");
  EXPECT_FALSE(scenario.cells[0].config.pacing.online_latency.has_value());
  EXPECT_EQ(scenario.cells[1].parameters.at("pacing.online_latency"),
            "{objective: 1.5x, signal: sessions}");
  ASSERT_TRUE(scenario.cells[1].config.pacing.online_latency.has_value());
  EXPECT_EQ(scenario.cells[1].config.pacing.online_latency->objective, 1.5);
  try {
    LoadScenarioString("sweep:\n  pacing.online_latency: [{objectiv: 2x}]\n", "typo.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("typo.yaml:2:28: pacing.online_latency.objectiv: "
                                         "unknown key"),
              std::string::npos)
        << e.what();
  }
}

TEST(Scenario, ABadSweptValuePointsAtTheValue) {
  auto path = WriteTemp("badsweep.yaml", "sweep:\n  online.users: [10, -5]\n");
  try {
    LoadScenario(path);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), path + ":2:22: online.users: '-5' is out of range");
  }
  std::filesystem::remove(path);
}

TEST(Scenario, AnUnknownSweptKeyPointsAtTheSweep) {
  auto path = WriteTemp("badkey.yaml", "sweep:\n  online.userz: [10]\n");
  try {
    LoadScenario(path);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":2:3: sweep: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("online.userz: unknown key"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

TEST(Scenario, ReadsTheObjectives) {
  auto scenario = LoadScenarioString(R"(
scenario:
  objectives:
    max_p99_ratio: 3.5
    max_error_rate: 0.5%
    min_done_share: 100 %
    max_deferred_share: 0%
)",
                                     "obj.yaml");
  const auto& o = scenario.settings.objectives;
  EXPECT_DOUBLE_EQ(o.max_p99_ratio, 3.5);
  EXPECT_DOUBLE_EQ(o.max_error_percent, 0.5);
  EXPECT_DOUBLE_EQ(o.min_done_percent, 100);
  EXPECT_DOUBLE_EQ(o.max_deferred_percent, 0);
  auto defaults = LoadScenarioString("{}", "d.yaml").settings.objectives;
  EXPECT_DOUBLE_EQ(defaults.max_p99_ratio, 2);
  EXPECT_DOUBLE_EQ(defaults.max_error_percent, 1);
  EXPECT_DOUBLE_EQ(defaults.min_done_percent, 99);
  EXPECT_DOUBLE_EQ(defaults.max_deferred_percent, 1);
}

TEST(Scenario, ReadsTheCellLengthAndRepeats) {
  auto scenario =
      LoadScenarioString("scenario:\n  min_batch_time: 10s\n  repeat: 3\n", "long.yaml");
  EXPECT_EQ(scenario.settings.min_batch_time, std::chrono::seconds(10));
  EXPECT_EQ(scenario.settings.repeat, 3);
  auto defaults = LoadScenarioString("{}", "d.yaml").settings;
  EXPECT_EQ(defaults.min_batch_time, std::chrono::milliseconds(0)) << "cells are not grown";
  EXPECT_EQ(defaults.repeat, 1);
}

// projection_check as a multiple of each measured cell's queue (5x), or a
// count; a multiple that checks nothing is refused at its place.
TEST(Scenario, AProjectionCheckIsACountOrAMultipleOfTheMeasuredQueue) {
  auto times = LoadScenarioString("scenario:\n  projection_check: 5x\n", "t.yaml").settings;
  EXPECT_DOUBLE_EQ(times.projection_check_times, 5);
  EXPECT_EQ(times.projection_check, 0);
  EXPECT_TRUE(times.ChecksProjections());
  auto count =
      LoadScenarioString("scenario:\n  queue_items: 100\n  records: 100\n  projection_check: 500\n",
                         "c.yaml")
          .settings;
  EXPECT_EQ(count.projection_check, 500);
  EXPECT_DOUBLE_EQ(count.projection_check_times, 0);
  EXPECT_FALSE(LoadScenarioString("{}", "d.yaml").settings.ChecksProjections());
  auto error = [](const std::string& yaml) {
    try {
      LoadScenarioString(yaml, "bad.yaml");
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.code(), ExitCode::kConfig);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error("scenario:\n  projection_check: 1x\n"),
            "bad.yaml:2:21: scenario.projection_check: a check of 1x the measured queue checks no "
            "projection");
  EXPECT_EQ(error("scenario:\n  projection_check: fivex\n"),
            "bad.yaml:2:21: scenario.projection_check: 'fivex' is neither a count of items nor a "
            "multiple");
}

TEST(Scenario, SeveralBatchProcessesRunShared) {
  auto scenario = LoadScenarioString(R"(
sweep:
  scenario.batch_processes: [1, 3]
)",
                                     "p.yaml");
  ASSERT_EQ(scenario.cells.size(), 2u);
  EXPECT_EQ(scenario.settings.batch_processes, 1);
  EXPECT_EQ(scenario.cells[0].settings.batch_processes, 1);
  EXPECT_EQ(scenario.cells[0].config.batch.runs, RunsMode::kExclusive) << "as batch.runs says";
  EXPECT_EQ(scenario.cells[1].settings.batch_processes, 3);
  EXPECT_EQ(scenario.cells[1].config.batch.runs, RunsMode::kShared) << "implied";
  EXPECT_EQ(scenario.cells[1].parameters.at("scenario.batch_processes"), "3");
  auto written =
      LoadScenarioString("scenario:\n  batch_processes: 2\nbatch:\n  runs: shared\n", "w.yaml");
  EXPECT_EQ(written.cells[0].config.batch.runs, RunsMode::kShared);
}

TEST(Scenario, ScenarioKeysAreSweptPerCell) {
  auto scenario = LoadScenarioString(R"(
scenario:
  records: 100
  queue_items: 100
sweep:
  scenario.queue_items: [100, 1000]
  scenario.objectives.max_p99_ratio: [2, 5]
)",
                                     "s.yaml");
  ASSERT_EQ(scenario.cells.size(), 4u);
  EXPECT_EQ(scenario.settings.queue_items, 100);
  EXPECT_EQ(scenario.cells[0].settings.queue_items, 100);
  EXPECT_EQ(scenario.cells[1].settings.queue_items, 1000);
  EXPECT_EQ(scenario.cells[1].settings.records, 100);
  EXPECT_DOUBLE_EQ(scenario.cells[3].settings.objectives.max_p99_ratio, 5);
  EXPECT_EQ(scenario.cells[3].parameters.at("scenario.queue_items"), "1000");
  EXPECT_EQ(scenario.cells[0].settings.name, "s");
}

TEST(Scenario, ABadSweptScenarioValuePointsAtTheValue) {
  try {
    LoadScenarioString("sweep:\n  scenario.records: [10, 0]\n", "bad.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "bad.yaml:2:26: scenario.records: '0' is out of range");
  }
}

TEST(Scenario, OverridesReplaceAnyKeyBeforeItIsRead) {
  auto scenario = LoadScenarioString(
      "scenario:\n  records: 10\n  queue_items: 10\nsweep:\n  policy.name: [skip_locked]\n",
      "o.yaml",
      {{"scenario.records", "200000"},
       {"scenario.queue_items", "200000"},
       {"scenario.projection_check", "2000000"},
       {"online.users", "7"},
       {"sweep.policy.name", "[online_priority, skip_locked]"}});
  EXPECT_EQ(scenario.settings.records, 200000);
  EXPECT_EQ(scenario.settings.projection_check, 2000000);
  ASSERT_EQ(scenario.cells.size(), 2u);
  EXPECT_EQ(scenario.cells[0].config.policy.name, "online_priority");
  EXPECT_EQ(scenario.cells[1].config.online.users, 7);
  EXPECT_EQ(scenario.cells[1].settings.queue_items, 200000);
}

TEST(Scenario, ABadOverrideNamesTheOption) {
  try {
    LoadScenarioString("scenario:\n  records: 10\n", "o.yaml", {{"scenario.records", "-5"}});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--set scenario.records=-5: scenario.records: '-5' is out of range");
  }
  try {
    LoadScenarioString("{}", "o.yaml", {{"scenario.projection_check", "5"}});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--set scenario.projection_check=5: scenario.projection_check: 5 items is fewer "
              "than the 2000 queued in the measured cells");
  }
}

class BadScenario : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadScenario, NamesTheProblemAndWhereItIs) {
  const BadInput& input = GetParam();
  try {
    LoadScenarioString(input.yaml, "bad.yaml");
    FAIL() << "accepted: " << input.yaml;
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), input.message);
    EXPECT_NE(e.hint().find(input.hint), std::string::npos) << e.hint();
    EXPECT_EQ(e.code(), ExitCode::kConfig);
  }
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(Cases, BadScenario, ::testing::Values(
  // A cell's own keys keep their place (each cell is parsed afresh: a
  // cloned tree had none and said bad.yaml:1:1).
  BadInput{"cell_key_out_of_range", "scenario:\n  queue_items: 1000\nbatch:\n  chunk_size: 0\n",
           "bad.yaml:4:15: batch.chunk_size: '0' is out of range", "allowed range"},
  BadInput{"done_share_over_100", "scenario:\n  objectives:\n    min_done_share: 101%\n",
           "bad.yaml:3:21: scenario.objectives.min_done_share: '101%' is out of range",
           "allowed range is 0% to 100% inclusive."},
  BadInput{"error_rate_without_percent_sign", "scenario:\n  objectives:\n    max_error_rate: 0.01\n",
           "bad.yaml:3:21: scenario.objectives.max_error_rate: '0.01' is not a percentage",
           "e.g. 99% or 0.5%"},
  BadInput{"p99_ratio_below_one", "scenario:\n  objectives:\n    max_p99_ratio: 0.5\n",
           "bad.yaml:3:20: scenario.objectives.max_p99_ratio: '0.5' is out of range", "allowed range"},
  BadInput{"unknown_objective", "scenario:\n  objectives:\n    max_p95_ratio: 2\n",
           "bad.yaml:3:5: scenario.objectives.max_p95_ratio: unknown key", "max_p99_ratio"},
  BadInput{"projection_check_smaller_than_the_queue",
           "scenario:\n  queue_items: 5000\n  projection_check: 1000\n",
           "bad.yaml:3:21: scenario.projection_check: 1000 items is fewer than the 5000 queued in "
           "the measured cells", "10 times scenario.queue_items"},
  BadInput{"projection_check_beyond_the_rows_a_cell_seeds",
           "scenario:\n  records: 100000000\n  queue_items: 1000000\n  projection_check: "
           "2000000\n",
           "bad.yaml:4:21: scenario.projection_check: 2000000 items need 200000000 rows to keep "
           "the measured cells' items per row (1000000 items over 100000000 rows), more than the "
           "100000000 a cell seeds",
           "the model holds for the items per row it measured, so the check keeps them "
           "(docs/capacity.md, \"The projection model\"): lower scenario.projection_check, or "
           "queue more items per row in the measured cells."},
  BadInput{"window_shorter_than_warmup", "scenario:\n  warmup: 10s\n  window: 5s\n",
           "bad.yaml:3:11: scenario.window: the window (5s) is shorter than the warm-up (10s)",
           "at least the warm-up"},
  BadInput{"warmup_longer_than_default_window", "scenario:\n  warmup: 2m\n",
           "bad.yaml:2:11: scenario.warmup: the window (1m) is shorter than the warm-up (2m)",
           "shorten scenario.warmup"},
  BadInput{"no_repeat", "scenario:\n  repeat: 0\n",
           "bad.yaml:2:11: scenario.repeat: '0' is out of range", "allowed range is 1 to 100"},
  BadInput{"min_batch_time_without_unit", "scenario:\n  min_batch_time: 10\n",
           "bad.yaml:2:19: scenario.min_batch_time: '10' is not a duration",
           "add a unit: '10ms', '10s' or '10m'."},
  BadInput{"min_batch_time_longer_than_the_window",
           "scenario:\n  window: 30s\n  min_batch_time: 45s\n",
           "bad.yaml:3:19: scenario.min_batch_time: a batch of at least 45s cannot finish inside "
           "the window (30s)", "at least scenario.min_batch_time"},
  BadInput{"no_batch_processes", "scenario:\n  batch_processes: 0\n",
           "bad.yaml:2:20: scenario.batch_processes: '0' is out of range",
           "allowed range is 1 to 16"},
  BadInput{"several_batch_processes_of_an_exclusive_job",
           "scenario:\n  batch_processes: 2\nbatch:\n  job: j\n  runs: exclusive\n",
           "bad.yaml:5:9: batch.runs: 'exclusive' allows one run of the job at a time, and "
           "scenario.batch_processes asks for 2",
           "write batch.runs: shared (or leave it out: batch_processes above 1 implies it), or set "
           "scenario.batch_processes: 1."},
  BadInput{"swept_batch_processes_of_an_exclusive_job",
           "batch:\n  runs: exclusive\nsweep:\n  scenario.batch_processes: [1, 3]\n",
           "bad.yaml:2:9: batch.runs: 'exclusive' allows one run of the job at a time, and "
           "scenario.batch_processes asks for 3", "only in shared mode"}
), [](const auto& test_case) { return std::string(test_case.param.name); });
// clang-format on

}  // namespace
}  // namespace coexist::config

// `operation.keys` and `targets:` (items of several records, tables the
// operation writes beside the target).
TEST(Config, KeysAndMoreTargetsAreReadWithTheirPlaces) {
  Config config = LoadString(
      "target: {table: shop.products}\n"
      "targets:\n"
      "  - table: shop.orders\n"
      "  - {table: ledger, key_column: code, version_column: rev}\n"
      "operation: {keys: many}\n",
      "k.yaml");
  EXPECT_EQ(config.operation.keys, ItemKeys::kMany);
  ASSERT_EQ(config.targets.size(), 2u);
  EXPECT_EQ(config.targets[0].Name(), "shop.orders");
  EXPECT_EQ(config.targets[0].key_column, "id");
  EXPECT_EQ(config.targets[1].Name(), "public.ledger");
  EXPECT_EQ(config.targets[1].version_column, "rev");
  EXPECT_EQ(config.targets_at[1].key_column.ToString(), "k.yaml:4:33");
  EXPECT_EQ(LoadString("", "e.yaml").operation.keys, ItemKeys::kOne);

  auto error = [](const std::string& yaml) {
    try {
      LoadString(yaml, "k.yaml");
    } catch (const ConfigError& e) {
      return std::string(e.what()) + " | " + e.hint();
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("operation: {keys: several}\n"),
            "k.yaml:1:19: operation.keys: unknown value 'several' | use one of: one, many.");
  EXPECT_EQ(error("targets:\n  - shop.orders\n"),
            "k.yaml:2:5: targets: entry [0] is not a map with a table | each entry names a table "
            "the operation writes: {table: schema.table, key_column: id, version_column: "
            "version}.");
  EXPECT_EQ(error("target: {table: shop.products}\ntargets:\n  - {table: shop.products}\n"),
            "k.yaml:3:13: targets[0].table: shop.products is listed twice (target and targets) | "
            "list each table once; target is the table whose records items name.");
  // Only the target's rows are taken over: no owner column here.
  EXPECT_EQ(error("targets:\n  - {table: shop.orders, owner_column: holder}\n"),
            "k.yaml:2:26: targets[0].owner_column: unknown key | known keys here: key_column, "
            "table, version_column.");
}

// A scenario of the user's workload, in a folder of its own beside the
// schema and job files it names (paths relative to the scenario file).
class WorkloadFiles {
 public:
  WorkloadFiles()
      : dir_(std::filesystem::temp_directory_path() /
             ("coexist-workload-" + std::to_string(getpid()))) {
    std::filesystem::create_directories(dir_);
    Write("shop.sql",
          "-- the shop\nCREATE SCHEMA shop;\n"
          "CREATE TABLE shop.items (id bigint PRIMARY KEY, stock bigint NOT NULL,\n"
          "  version bigint NOT NULL DEFAULT 0);\n"
          "CREATE TABLE shop.log (item bigint, note text);\n");
    Write("job.yaml",
          "target: {table: shop.items}\n"
          "batch: {job: restock, chunk_size: 50}\n"
          "operation:\n"
          "  item_sql: UPDATE shop.items SET stock = stock + 1 WHERE id = $1\n");
    Write("orders-job.yaml",
          "target: {table: shop.orders}\n"
          "operation: {item_sql: SELECT 1}\n");
    Write("bad-job.yaml", "batch: {chunk_size: 0}\n");
    Write("production-job.yaml",
          "database: {url: \"${COEXIST_NO_SUCH_DATABASE_URL}\"}\n"
          "target: {table: shop.items}\n"
          "policy: {name: online_priority, max_wait: 5s}\n"
          "operation: {item_sql: UPDATE shop.items SET stock = 0 WHERE id = $1}\n");
  }
  ~WorkloadFiles() { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  // The scenario's error and hint, "message | hint", without the folder.
  std::string Error(const std::string& yaml) const {
    std::string path = Write("s.yaml", yaml);
    try {
      LoadScenario(path);
      return "no error";
    } catch (const ConfigError& e) {
      std::string text = std::string(e.what()) + " | " + e.hint();
      for (auto at = text.find(dir_.string() + "/"); at != std::string::npos;
           at = text.find(dir_.string() + "/"))
        text.erase(at, dir_.string().size() + 1);
      return text;
    }
  }

 private:
  std::filesystem::path dir_;
};

TEST(ScenarioWorkload, ReadsTheUsersTablesDataAndJob) {
  WorkloadFiles files;
  auto path = files.Write("s.yaml", R"y(
scenario:
  schema: shop.sql
  job: job.yaml
  data:
    - table: shop.items
      rows: 100
      columns: {id: sequence, stock: "random(1, 10)"}
    - table: shop.log
      rows: 20
      columns: {item: "key(shop.items.id, zipf)", note: "'n' || n"}
      where: item > 1
  applied_check: SELECT 0
  invariant: SELECT sum(stock) FROM shop.items
sweep:
  policy.name: [skip_locked, online_priority]
batch: {workers: 2}
)y");
  Scenario scenario = LoadScenario(path);
  const Workload& w = scenario.settings.workload;
  EXPECT_EQ(w.schema_file, files.Path("shop.sql"));
  EXPECT_EQ(w.created_schemas, std::vector<std::string>{"shop"});
  EXPECT_EQ(w.created_tables, (std::vector<std::string>{"shop.items", "shop.log"}));
  EXPECT_EQ(w.job_file, files.Path("job.yaml"));
  ASSERT_EQ(w.data.size(), 2u);
  EXPECT_EQ(w.data[0].rows, 100);
  EXPECT_EQ(w.data[0].columns[0].expression, "n");
  EXPECT_EQ(w.data[0].columns[1].expression,
            "(1 + floor(random() * (10::numeric - 1 + 1)))::bigint");
  EXPECT_EQ(w.data[1].columns[0].key_table, "items");
  EXPECT_TRUE(w.data[1].columns[0].key_zipf);
  EXPECT_EQ(w.data[1].columns[1].expression, "'n' || n");
  EXPECT_EQ(w.data[1].where, "item > 1");
  EXPECT_EQ(w.invariant, "SELECT sum(stock) FROM shop.items");
  ASSERT_EQ(scenario.cells.size(), 2u);
  for (const auto& cell : scenario.cells) {
    // The job's target and operation, its batch: keys under the scenario's.
    EXPECT_EQ(cell.config.target.Name(), "shop.items");
    EXPECT_EQ(cell.config.operation.item_sql,
              "UPDATE shop.items SET stock = stock + 1 WHERE id = $1");
    EXPECT_EQ(cell.config.operation.item_sql_at.file, files.Path("job.yaml"));
    EXPECT_EQ(cell.config.batch.job, "restock");
    EXPECT_EQ(cell.config.batch.chunk_size, 50);
    EXPECT_EQ(cell.config.batch.workers, 2);
  }
  EXPECT_EQ(scenario.cells[1].config.policy.name, "online_priority");

  // A job file's database:, policy: and the rest are not used, nor read: its
  // ${VARIABLES} need not be set to plan with it.
  auto production =
      LoadScenario(files.Write("p.yaml",
                               "scenario: {schema: shop.sql, job: production-job.yaml}\n"
                               "policy: {name: skip_locked}\n"));
  EXPECT_EQ(production.cells[0].config.policy.name, "skip_locked");
  EXPECT_EQ(production.cells[0].config.operation.item_sql,
            "UPDATE shop.items SET stock = 0 WHERE id = $1");
  EXPECT_FALSE(production.cells[0].config.database.url);
}

TEST(ScenarioWorkload, ErrorsSayWhereAndHowToFit) {
  WorkloadFiles files;
  EXPECT_EQ(
      files.Error("scenario: {schema: shop.sql, job: job.yaml}\ntarget: {table: shop.items}\n"),
      "s.yaml:2:9: target: written here and in scenario.job (job.yaml) | remove target: here "
      "(the cells use the job's target, targets, operation and enqueue.select), or remove "
      "scenario.job to write your own.");
  EXPECT_EQ(files.Error("scenario: {schema: shop.sql, job: orders-job.yaml}\n"),
            "s.yaml:1:35: scenario.job: orders-job.yaml's target shop.orders is not a table that "
            "scenario.schema creates | 'shop.sql' creates shop.items, shop.log; point the job's "
            "target: at one of them, or give the schema file that creates shop.orders.");
  EXPECT_EQ(files.Error("scenario: {job: job.yaml}\n"),
            "s.yaml:1:17: scenario.job: job.yaml's target shop.items is not the demo table "
            "public.products | give scenario.schema (the SQL file that creates shop.items) and "
            "fill it with scenario.data or scenario.sample.");
  // The job file's own errors point into it.
  EXPECT_EQ(files.Error("scenario: {schema: shop.sql, job: bad-job.yaml}\n"),
            "bad-job.yaml:1:21: batch.chunk_size: '0' is out of range | allowed range is 1 to "
            "100000 inclusive.");
  EXPECT_EQ(files.Error("scenario: {schema: nope.sql}\n"),
            "s.yaml:1:20: scenario.schema: cannot read 'nope.sql' | give the path of the SQL file "
            "that creates your tables, relative to the scenario file's folder (run a scenario "
            "that names files by its path, not by a built-in name).");
  EXPECT_EQ(files.Error("scenario: {schema: shop.sql}\ntarget: {table: shop.items}\n"),
            "s.yaml:1:20: scenario.schema: the batch has no operation on your tables | give "
            "scenario.job (your job's configuration file), or operation: with item_sql, "
            "chunk_sql or set.");
  EXPECT_EQ(files.Error("scenario: {schema: shop.sql}\ntarget: {table: shop.orders}\noperation: "
                        "{item_sql: SELECT 1}\n"),
            "s.yaml:2:17: target.table: the target shop.orders is not a table that scenario.schema "
            "creates | 'shop.sql' creates shop.items, shop.log; set target.table to one of them, "
            "or give scenario.job.");
  EXPECT_EQ(files.Error(R"y(scenario:
  schema: shop.sql
  job: job.yaml
  data:
    - {table: shop.orders, rows: 10, columns: {id: sequence}}
)y"),
            "s.yaml:5:15: scenario.data[0].table: shop.orders is not a table that scenario.schema "
            "creates | the tables filled in every cell are those 'shop.sql' creates: shop.items, "
            "shop.log.");
  EXPECT_EQ(files.Error(R"y(scenario:
  schema: shop.sql
  job: job.yaml
  data:
    - {table: shop.log, rows: 10, columns: {item: key(shop.items.id)}}
    - {table: shop.items, rows: 10, columns: {id: sequence, stock: 1}}
)y"),
            "s.yaml:5:51: scenario.data[0].columns.item: 'key(shop.items.id)': shop.items is not "
            "filled before shop.log | a key() picks keys of a table filled earlier: list "
            "shop.items before this table under scenario.data (or copy it with scenario.sample).");
  EXPECT_EQ(files.Error(R"y(scenario:
  schema: shop.sql
  job: job.yaml
  data:
    - {table: shop.items, rows: 10, columns: {id: "random(5, 1)"}}
)y"),
            "s.yaml:5:51: scenario.data[0].columns.id: 'random(5, 1)': MIN is larger than MAX | "
            "write the smaller bound first, e.g. random(1, 5).");
  EXPECT_EQ(files.Error("scenario:\n  data:\n    - {table: shop.items, rows: 1}\n"),
            "s.yaml:3:5: scenario.data: generated rows need the tables' definition | give "
            "scenario.schema, the SQL file that creates the tables.");
  EXPECT_EQ(files.Error("scenario:\n  schema: shop.sql\n  job: job.yaml\n  sample: {from: "
                        "COEXIST_NO_SUCH_VARIABLE, table: shop.items}\n"),
            "s.yaml:4:18: scenario.sample.from: environment variable COEXIST_NO_SUCH_VARIABLE is "
            "not set | export COEXIST_NO_SUCH_VARIABLE with the source database's URL, or write "
            "the URL here.");
}
}  // namespace
}  // namespace coexist::config
