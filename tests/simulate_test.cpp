// A tiny scenario end to end on a real PostgreSQL: the report files, their
// columns, and that the figures agree with the database.

#include "capacity/simulate.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "capacity/recommendation.h"
#include "capacity/report.h"
#include "config/scenario.h"
#include "tests/support/database_test.h"

namespace coexist::capacity {
namespace {

namespace fs = std::filesystem;

class Simulate : public coexist::testing::DatabaseTest {};

TEST_F(Simulate, TinyScenarioEndToEnd) {
  fs::path dir = fs::temp_directory_path() / ("coexist-sim-" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto scenario = config::LoadScenarioString(R"(
scenario:
  records: 40
  queue_items: 300
  warmup: 1200ms
  cooldown: 1200ms
  window: 30s
  production_queue_items: 100000
  production_window: 1h
  projection_check: 600
  # Only the error rate can fail here: time_window refuses every online
  # write while its batch runs, skip_locked refuses none.
  objectives:
    max_p99_ratio: 1000000
    max_error_rate: 1%
    min_done_share: 0%
    max_deferred_share: 100%
sweep:
  policy.name: [time_window, skip_locked]
policy_options:
  time_window:
    windows: [{time_zone: UTC, start: "00:00", end: "00:00"}]
    drain_margin: 0s
batch:
  job: tiny
  chunk_size: 50
online:
  users: 4
  think_time: 20ms
  pool_size: 4
  offline_hold: 100ms
)",
                                             "tiny.yaml");
  std::vector<CellResult> cells;
  RunScenario(conninfo(), scenario, {}, cells);
  // Each cell of the sweep, then its projection check with 600 items.
  ASSERT_EQ(cells.size(), 4u);
  WriteReport(dir, Summarize(scenario), cells);

  for (const auto& cell : cells) {
    EXPECT_EQ(cell.done + cell.deferred + cell.dead + cell.queued_left, cell.items) << cell.policy;
    EXPECT_EQ(cell.items, cell.check_of == 0 ? 300 : 600) << cell.index;
    EXPECT_EQ(cell.check_of, cell.index % 2 == 0 ? cell.index - 1 : 0);
    long long chunked = 0;
    for (const auto& chunk : cell.chunks) chunked += chunk.items;
    EXPECT_EQ(chunked, cell.done) << "every done item is in one chunk";
    EXPECT_EQ(cell.applied_twice, 0) << cell.policy;
    EXPECT_EQ(cell.lost_updates, 0) << cell.policy;
    EXPECT_EQ(cell.rows_changed_by_batch, cell.done) << "settled moved once per done item";
    EXPECT_GT(cell.before.transactions, 0);
    EXPECT_FALSE(cell.timeline.empty());
  }
  // The last cell's data is still in the database: its figures must match.
  const auto& last = cells.back();
  EXPECT_EQ(std::to_string(last.done),
            QueryValue("SELECT count(*) FROM coexist.queue WHERE job = 'tiny' AND state = 'done'"));
  EXPECT_EQ(std::to_string(last.done), QueryValue("SELECT count(*) FROM public.batch_ledger"));
  EXPECT_EQ(std::to_string(last.done), QueryValue("SELECT sum(settled) FROM public.products"));
  EXPECT_EQ(last.policy, "skip_locked");
  EXPECT_EQ(cells.front().policy, "time_window");
  EXPECT_EQ(QueryValue("SELECT count(*) FROM coexist.windows"), "0")
      << "the window closed with the batch";

  std::ifstream csv(dir / "results.csv");
  std::string header, row;
  std::getline(csv, header);
  int rows = 0;
  while (std::getline(csv, row)) ++rows;
  EXPECT_EQ(rows, 4);
  for (const char* column :
       {"policy", "batch_seconds", "items_per_second", "done", "deferred", "dead", "p99_ms_before",
        "p99_ms_during", "refusals", "revocations", "lost_updates"}) {
    EXPECT_NE(header.find(column), std::string::npos) << column;
  }
  std::ifstream json_in(dir / "results.json");
  auto json = nlohmann::json::parse(json_in);
  EXPECT_EQ(json["cells"][3]["done"].get<long long>(), last.done);
  EXPECT_EQ(json["projections"].size(), 2u);
  // Cells this small (well under 3 s of batch) give no projection, and say so.
  ASSERT_EQ(json["projection_checks"].size(), 2u);
  for (const auto& check : json["projection_checks"]) {
    EXPECT_EQ(check["check_items"], 600);
    EXPECT_EQ(check["measured_items"], 300);
    EXPECT_FALSE(check["trusted"].get<bool>());
    EXPECT_NE(check["untrusted_reason"].get<std::string>().find("is not trusted"),
              std::string::npos)
        << check.dump();
    EXPECT_FALSE(check.contains("error_percent"));
  }

  // The acceptance test of the objectives: time_window broke the error-rate
  // objective, so it is not recommended, and results.json says why.
  ASSERT_EQ(json["recommendations"].size(), 1u);
  const auto& rec = json["recommendations"][0];
  EXPECT_NE(rec["recommended"], "time_window") << rec.dump(2);
  const auto& time_window = rec["policies"][1];  // sorted by name
  ASSERT_EQ(time_window["policy"], "time_window");
  EXPECT_FALSE(time_window["meets_objectives"].get<bool>());
  ASSERT_EQ(time_window["missed"].size(), 1u) << time_window.dump(2);
  const auto& miss = time_window["missed"][0];
  EXPECT_EQ(miss["objective"], "max_error_rate");
  EXPECT_DOUBLE_EQ(miss["limit"].get<double>(), 1);
  EXPECT_GT(miss["measured"].get<double>(), 1);
  EXPECT_GT(cells.front().during_errors.at("refused_window"), 0);
  EXPECT_NE(miss["remedy"].get<std::string>().find("refuses online writes"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "report.html"));
  fs::remove_all(dir);
}

// On a throwaway cluster the connection's user is a superuser, whose
// sessions batch_priority never signals; `simulate` then gives the online
// users a role of their own (SimulateOptions::online_role). Its grants must
// be enough for every transaction kind of the mix, in every cell (the
// target is recreated per cell).
TEST_F(Simulate, TheOnlineUsersMayRunAsARoleOfTheirOwn) {
  auto scenario = config::LoadScenarioString(R"(
scenario:
  records: 30
  queue_items: 200
  warmup: 800ms
  cooldown: 500ms
  window: 30s
sweep:
  policy.name: [batch_priority, skip_locked]
policy_options:
  batch_priority:
    online_application_name: "coexist-online%"
batch:
  job: roles
  chunk_size: 20
online:
  users: 4
  think_time: 10ms
  pool_size: 4
  offline_hold: 100ms
)",
                                             "roles.yaml");
  std::string role = "sim_online_" + database_name();
  std::vector<CellResult> cells;
  RunScenario(conninfo(), scenario, {.online_role = role}, cells);
  ASSERT_EQ(cells.size(), 2u);
  for (const auto& cell : cells) {
    EXPECT_GT(cell.before.transactions, 0) << cell.policy;
    EXPECT_GT(cell.after.transactions, 0) << cell.policy;
    EXPECT_EQ(cell.lost_updates, 0) << cell.policy;
    EXPECT_EQ(cell.applied_twice, 0) << cell.policy;
    EXPECT_EQ(cell.done + cell.deferred + cell.dead + cell.queued_left, 200) << cell.policy;
  }
  EXPECT_EQ(QueryValue("SELECT rolsuper FROM pg_roles WHERE rolname = '" + role + "'"), "f");
  EXPECT_EQ(QueryValue("SELECT has_table_privilege('" + role + "', 'public.products', 'UPDATE')"),
            "t");
  EXPECT_EQ(QueryValue("SELECT has_table_privilege('" + role + "', 'coexist.queue', 'SELECT')"),
            "f");
}

// scenario.min_batch_time grows a cell whose batch ended sooner, and
// its repeats run the grown queue; the recommendation judges their median.
TEST_F(Simulate, ACellGrowsToItsMinimumBatchTimeAndRepeats) {
  auto scenario = config::LoadScenarioString(R"(
scenario:
  records: 30
  queue_items: 20
  warmup: 500ms
  cooldown: 0s
  window: 20s
  min_batch_time: 500ms
  repeat: 2
batch: {job: grown, chunk_size: 10}
policy: {name: skip_locked}
online: {users: 2, think_time: 20ms, pool_size: 2}
)",
                                             "grown.yaml");
  std::vector<CellResult> cells;
  RunScenario(conninfo(), scenario, {}, cells);
  ASSERT_EQ(cells.size(), 2u) << "the short measurements are not kept";
  for (const auto& cell : cells) {
    EXPECT_EQ(cell.sweep_cell, 1);
    EXPECT_EQ(cell.grown_from, 20);
    EXPECT_GT(cell.items, 20);
    EXPECT_EQ(cell.records, (cell.items * 30 + 19) / 20) << "as many items per row as asked";
    EXPECT_EQ(cell.items, cells[0].items) << "the repeats run the grown queue";
    EXPECT_NEAR(cell.window_seconds, 20.0 * static_cast<double>(cell.items) / 20, 0.01)
        << "the window grows with the queue";
    EXPECT_EQ(cell.done + cell.deferred + cell.dead + cell.queued_left, cell.items);
    EXPECT_EQ(cell.applied_twice, 0);
  }
  EXPECT_EQ(cells[0].repeat, 1);
  EXPECT_EQ(cells[1].repeat, 2);
  auto recs = Recommend(cells, Summarize(scenario));
  ASSERT_EQ(recs.size(), 1u);
  ASSERT_EQ(recs[0].outcomes.size(), 1u);
  EXPECT_EQ(recs[0].outcomes[0].repeats, 2);
}

// A cell paced by an online latency objective reports what it did.
TEST_F(Simulate, ACellShowsItsLatencyObjective) {
  auto scenario = config::LoadScenarioString(R"(
scenario:
  records: 40
  queue_items: 100
  warmup: 1s
  cooldown: 0s
  window: 30s
batch: {job: paced, chunk_size: 20}
policy: {name: skip_locked}
pacing:
  online_latency: {objective: 1.25x, probe_interval: 20ms, window: 200ms, learn_time: 300ms}
online: {users: 2, think_time: 20ms, pool_size: 2}
)",
                                             "paced.yaml");
  std::vector<CellResult> cells;
  RunScenario(conninfo(), scenario, {}, cells);
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0].done + cells[0].deferred + cells[0].queued_left, 100);
  ASSERT_TRUE(cells[0].latency);
  EXPECT_EQ(cells[0].latency->objective, 1.25);
  EXPECT_TRUE(cells[0].latency->on);
  EXPECT_GT(cells[0].latency->baseline_ms, 0);
  const auto& columns = CsvColumns();
  EXPECT_NE(std::find(columns.begin(), columns.end(), "latency_slowdowns"), columns.end());
}

}  // namespace
}  // namespace coexist::capacity
