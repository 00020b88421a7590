// Pacing benchmark (not a test): does adaptive pacing keep the online users'
// latency while the batch still gets its work done? The measured answer.
//
// One throwaway cluster; per round, two capacity cells on fresh data with the
// same steady, moderate online load (closed model, edits and views on the
// same rows the batch settles):
//   unpaced: fixed chunks of batch.chunk_size, no health throttle;
//   paced:   chunks sized to pacing.chunk_time, throttled on lock waiters.
// Each cell measures the online p99 alone (warmup) and during its batch, so
// every ratio compares figures taken minutes apart on the same machine.
// Prints both, the batch rates, and the two ratios pacing is held to:
//   paced p99 during the batch <= 1.25x the p99 without the batch;
//   paced batch rate           >= 0.50x the unpaced rate.
//
//   build/bench/pacing_bench [--rounds 3] [--records 50000] [--items 200000]
//                            [--users 8] [--chunk 2000] [--chunk-time 5ms] [--max-load 3]

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "capacity/simulate.h"
#include "config/scenario.h"
#include "db/cluster.h"

namespace {

using namespace coexist;

struct Options {
  int rounds = 3;
  long long records = 50000;
  long long items = 200000;
  int users = 8;
  int chunk = 2000;
  std::string chunk_time = "5ms";
  int max_load = 3;  // lock waiters; 0: no throttle
};

// The shared part: data, online load, the batch's job; `pacing` differs.
std::string ScenarioYaml(const Options& o, int chunk, const std::string& pacing) {
  return "scenario:\n"
         "  records: " +
         std::to_string(o.records) +
         "\n"
         "  queue_items: " +
         std::to_string(o.items) +
         "\n"
         "  warmup: 6s\n"
         "  cooldown: 1s\n"
         "  window: 300s\n"
         "batch: {job: settle, chunk_size: " +
         std::to_string(chunk) +
         ", workers: 1}\n"
         "policy: {name: skip_locked, max_deferrals: 50}\n"
         "online:\n"
         "  model: closed\n"
         "  users: " +
         std::to_string(o.users) +
         "\n"
         "  think_time: 20ms\n"
         "  pool_size: 16\n"
         "  key_distribution: uniform\n"
         "  app_work: 1ms\n"
         "  lock_timeout: 10s\n"
         "  mix: {view: 40, optimistic_edit: 30, pessimistic_edit: 30, offline_edit: 0,\n"
         "        atomic_decrement: 0}\n"
         "pacing:\n" +
         pacing;
}

// Adaptive mode starts at batch.chunk_size: start small, since the cost of
// a chunk is unknown until one has run, and grow x1.2 per chunk.
constexpr int kPacedFirstChunk = 50;

std::string UnpacedPacing() {
  return "  adaptive: false\n"
         "  max_load: {}\n"
         "  critical_load: {}\n";
}

std::string PacedPacing(const Options& o) {
  return "  adaptive: true\n"
         "  chunk_time: " +
         o.chunk_time +
         "\n"
         "  min_chunk: 10\n"
         "  check_interval: 100ms\n"
         "  hold_time: 300ms\n"
         "  max_load: {lock_waiters: " +
         std::to_string(o.max_load) +
         "}\n"
         "  critical_load: {}\n";
}

capacity::CellResult RunCell(const std::string& conninfo, const std::string& yaml,
                             const std::string& name) {
  auto scenario = config::LoadScenarioString(yaml, name);
  std::vector<capacity::CellResult> results;
  capacity::RunScenario(conninfo, scenario, {}, results);
  return results.at(0);
}

void PrintCell(const char* label, const capacity::CellResult& c) {
  std::printf(
      "  %-8s online %4.0f tps, p99 alone %6.1f ms, during batch %6.1f ms (%.2fx); batch "
      "%5.2f s, %6.0f items/s, done %lld deferred %lld, lost %lld\n",
      label, c.before.tps, c.before.p99_ms, c.during.p99_ms, c.during.p99_ms / c.before.p99_ms,
      c.batch_seconds, c.items_per_second, c.done, c.deferred, c.lost_updates);
  // The online p99 second by second around the batch: a spike at its start
  // and a steady rise tell different stories.
  std::printf("           p99 ms per second:");
  for (const auto& t : c.timeline) {
    if (t.at_seconds < c.batch_start_seconds - 2 || t.at_seconds > c.batch_end_seconds + 2)
      continue;
    bool during = t.at_seconds >= c.batch_start_seconds && t.at_seconds <= c.batch_end_seconds + 1;
    std::printf(" %s%.0f", during ? "*" : "", t.p99_ms);
  }
  std::printf("  (* = during the batch)\n");
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    std::string value = argv[i + 1];
    if (key == "--rounds") o.rounds = std::stoi(value);
    if (key == "--records") o.records = std::stoll(value);
    if (key == "--items") o.items = std::stoll(value);
    if (key == "--users") o.users = std::stoi(value);
    if (key == "--chunk") o.chunk = std::stoi(value);
    if (key == "--chunk-time") o.chunk_time = value;
    if (key == "--max-load") o.max_load = std::stoi(value);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  auto o = Parse(argc, argv);
  spdlog::set_level(spdlog::level::warn);
  auto cluster = db::TempCluster::Start();
  std::string conninfo = cluster->ConnectionString();
  std::printf(
      "%lld records, %lld items, %d online users; unpaced: fixed chunks of %d; paced: "
      "chunk_time %s, max_load lock_waiters 4\n",
      o.records, o.items, o.users, o.chunk, o.chunk_time.c_str());

  std::vector<double> p99_ratios;
  std::vector<double> rate_ratios;
  for (int round = 1; round <= o.rounds; ++round) {
    std::printf("round %d\n", round);
    auto unpaced = RunCell(conninfo, ScenarioYaml(o, o.chunk, UnpacedPacing()), "unpaced");
    PrintCell("unpaced", unpaced);
    auto paced = RunCell(conninfo, ScenarioYaml(o, kPacedFirstChunk, PacedPacing(o)), "paced");
    PrintCell("paced", paced);
    // "Without the batch": the online load alone, in both cells of the round.
    double alone = (unpaced.before.p99_ms + paced.before.p99_ms) / 2;
    p99_ratios.push_back(paced.during.p99_ms / alone);
    rate_ratios.push_back(paced.items_per_second / unpaced.items_per_second);
    std::printf(
        "  online p99 without batch %.1f ms; unpaced %.2fx, paced %.2fx; paced rate "
        "%.2fx unpaced\n",
        alone, unpaced.during.p99_ms / alone, p99_ratios.back(), rate_ratios.back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  std::printf(
      "\nmedian over %d rounds: paced p99 %.2fx without batch (target <= 1.25x), paced "
      "rate %.2fx unpaced (target >= 0.50x)\n",
      o.rounds, median(p99_ratios), median(rate_ratios));
  return 0;
}
