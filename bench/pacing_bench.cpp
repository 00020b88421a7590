// Pacing benchmark (not a test): does adaptive pacing keep the online users'
// latency while the batch still gets its work done? The measured answer.
//
// One throwaway cluster; per round, three capacity cells on fresh data with
// the same steady, moderate online load (closed model, edits and views on the
// same rows the batch settles):
//   unpaced: fixed chunks of batch.chunk_size, no health throttle;
//   paced:   chunks sized to pacing.chunk_time, throttled on lock waiters
//            (the count signals);
//   latency: chunks sized to --latency-chunk-time, duty cycle held to
//            pacing.online_latency (objective --objective x the learned
//            baseline), no count signals;
//   latency, priority low: the same with pacing.cpu_priority: low (the
//            batch's threads and, through the prioritize extension, its
//            backends at nice 19) and pacing.synchronous_commit: off
//            (--priority-cell no leaves it out);
//   latency, priority low, commits on: the same at nice 19 with the
//            batch's commits synchronous, as the server has them: which of
//            the two settings moves the online p99 (--commit-cell no leaves
//            it out).
// Each cell measures the online p99 alone (warmup) and during its batch, so
// every ratio compares figures taken minutes apart on the same machine.
// Prints them all, the batch rates, and the ratios pacing is held to:
//   p99 during the batch <= 1.25x the p99 without the batch;
//   batch rate           >= 0.50x the unpaced rate.
//
// Then, per round, a step cell: the latency-paced batch again, and once its
// baseline is learned and the batch has run --step-at, a second online load
// as large as the first joins for --step-for (the online load doubles, then
// halves). It prints how long the controller took to slow the batch after
// the step began (the first latency_slowdown) and to speed up after it
// ended (the first latency_recovered), target 2 s each.
//
// The events mark state changes only (within <-> over), so the latency
// cells also serve pacing.control_socket and the bench reads the duty cycle
// from `status` every 100 ms: it prints the duty and the probe's ratio
// second by second, and the step's reactions as the first cut of the duty
// after the step began and its first raise after it ended.
//
//   build/bench/pacing_bench [--rounds 3] [--records 50000] [--items 200000]
//                            [--users 8] [--chunk 2000] [--chunk-time 5ms] [--max-load 3]
//                            [--objective 1.25] [--latency-chunk-time 20ms] [--tolerance 500us]
//                            [--percentile 99] [--signal sessions|probe] [--probe-interval 20ms]
//                            [--min-chunk-time 5ms] [--start slow|full]
//                            [--step-at 3s] [--step-for 5s] [--quick yes]
//                            [--priority-cell yes|no] [--commit-cell yes|no]
//                            [--durable yes|no] [--cluster-root DIR]
//   build/bench/pacing_bench --sweep-duty 1,0.5,0.2,0.1 --sweep-chunk-time 20ms,5ms,2ms
//                            [--sweep-for 6s] [--items 200000]
//
// --sweep yes (or any --sweep-* option) measures what moves online p99 instead:
// an unpaced cell, then one cell per chunk_time and duty cycle, the duty
// held fixed (an objective no latency meets, min_duty = the duty) and each
// batch stopped after --sweep-for (the scenario's window, at least the 6 s
// warmup): online p99 during/alone and the batch rate against unpaced.

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_cli.h"
#include "capacity/simulate.h"
#include "common/error.h"
#include "config/scenario.h"
#include "config_core/duration.h"
#include "db/cluster.h"
#include "db/connection.h"
#include "online-sim/simulator.h"
#include "pacing/control_socket.h"

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
  std::string objective = "1.25";
  // The latency cells' chunk_time. Chunks of 5 ms hold 10 items (min_chunk):
  // their fixed cost caps the batch near 0.3x the unpaced rate whatever the
  // duty cycle. 20 ms chunks hold about 70 rows of 50,000 locked at a time,
  // too few for online edits to queue behind in their p99; the duty cycle
  // holds the CPU the batch takes.
  std::string latency_chunk_time = "20ms";
  // online_latency.tolerance and percentile; empty: the signal's default.
  std::string tolerance;
  std::string percentile;
  // online_latency.signal, probe_interval and min_chunk_time of the
  // latency cells (min_chunk_time empty: the second knob is off).
  std::string signal = "sessions";
  std::string probe_interval = "20ms";
  std::string min_chunk_time;
  // online_latency.start of the latency cells; empty: its default (slow).
  std::string start;
  double step_at = 3;   // seconds of batch before the online load doubles
  double step_for = 5;  // seconds the doubled load lasts
  // --sweep: instead of the rounds, cells at a fixed duty cycle for each
  // chunk_time, each batch stopped after sweep_for: what moves online p99.
  bool sweep = false;
  std::vector<std::string> sweep_duties{"1", "0.5", "0.2", "0.1"};
  std::vector<std::string> sweep_chunk_times{"20ms", "5ms", "2ms"};
  std::string sweep_for = "6s";
  bool quick = false;  // --quick yes: no paced and no step cell
  // The latency cell again at the lowest CPU priority with
  // synchronous_commit off, beside the one at the server's priority.
  bool priority_cell = true;
  // And at the lowest CPU priority with synchronous_commit as the server
  // has it: the two settings apart.
  bool commit_cell = true;
  // The throwaway cluster as a production server runs: fsync,
  // synchronous_commit and full_page_writes on, so that an online commit
  // waits for its WAL flush (behind the batch's WAL) and the commit cells
  // mean something. --durable no: the tests' fast, unsafe cluster.
  bool durable = true;
  // Where the throwaway cluster's folder goes (default $TMPDIR or /tmp):
  // /dev/shm puts its WAL on memory, where a flush costs nothing, so the
  // WAL device's share of the online p99 can be told from the CPU's.
  std::string cluster_root;
};

// The shared part: data, online load, the batch's job; `pacing` differs.
std::string ScenarioYaml(const Options& o, int chunk, const std::string& pacing,
                         const std::string& window = "300s") {
  return "scenario:\n"
         "  records: " +
         std::to_string(o.records) +
         "\n"
         "  queue_items: " +
         std::to_string(o.items) +
         "\n"
         "  warmup: 6s\n"
         "  cooldown: 1s\n"
         "  window: " +
         window +
         "\n"
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

// The latency cells' control socket: the bench reads the controller's duty
// cycle from its `status` while the batch runs.
std::string LatencySocket() {
  return (std::filesystem::temp_directory_path() /
          ("pacing-bench-" + std::to_string(::getpid()) + ".sock"))
      .string();
}

std::string LatencyPacing(const Options& o) {
  return "  adaptive: true\n"
         "  control_socket: " +
         LatencySocket() +
         "\n"
         "  chunk_time: " +
         o.latency_chunk_time +
         "\n"
         "  min_chunk: 10\n"
         "  max_load: {}\n"
         "  critical_load: {}\n"
         "  online_latency: {objective: " +
         o.objective + ", probe_interval: " + o.probe_interval + ", window: 1s, learn_time: 2s" +
         (o.min_chunk_time.empty() ? "" : ", min_chunk_time: " + o.min_chunk_time) +
         (o.tolerance.empty() ? "" : ", tolerance: " + o.tolerance) +
         (o.percentile.empty() ? "" : ", percentile: " + o.percentile) +
         (o.start.empty() ? "" : ", start: " + o.start) + ", signal: " + o.signal + "}\n";
}

// A fixed duty cycle: the objective's controller with a baseline it can
// never meet cuts the duty to min_duty within a second and holds it there
// (the read probe every 20 ms is its only cost).
// min_chunk_time = chunk_time turns the second knob off: an objective no
// latency meets would otherwise cut every chunk to a quarter of chunk_time
// (the sweep's chunk_time column then named chunks 4x their length).
std::string FixedDutyPacing(const std::string& chunk_time, const std::string& duty) {
  return "  adaptive: true\n"
         "  chunk_time: " +
         chunk_time +
         "\n"
         "  min_chunk: 1\n"
         "  max_load: {}\n"
         "  critical_load: {}\n"
         "  online_latency: {signal: probe, baseline: 1us, tolerance: 0us, min_duty: " +
         duty + ", min_chunk_time: " + chunk_time +
         ", probe: read, probe_interval: 20ms, window: 200ms, relearn_every: 0s}\n";
}

capacity::CellResult RunCell(const std::string& conninfo, const std::string& yaml,
                             const std::string& name) {
  auto scenario = config::LoadScenarioString(yaml, name);
  std::vector<capacity::CellResult> results;
  capacity::RunScenario(conninfo, scenario, {}, results);
  return results.at(0);
}

// `lost_checked` false: another simulator, whose changes the cell's own
// lost-update check does not know, edited the rows too (the step cell): a
// count would be its edits, not lost updates.
void PrintCell(const char* label, const capacity::CellResult& c, bool lost_checked = true) {
  std::string lost = lost_checked ? std::to_string(c.lost_updates) : "unchecked (two simulators)";
  std::printf(
      "  %-8s online %4.0f tps, p99 alone %6.1f ms, during batch %6.1f ms (%.2fx); batch "
      "%5.2f s, %6.0f items/s, done %lld deferred %lld, lost %s\n",
      label, c.before.tps, c.before.p99_ms, c.during.p99_ms, c.during.p99_ms / c.before.p99_ms,
      c.batch_seconds, c.items_per_second, c.done, c.deferred, lost.c_str());
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

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The controller's state, read from the run's control socket.
struct DutyPoint {
  double at = 0;  // SteadySeconds()
  double duty = 1;
  double ratio = 0;
  std::string state;
  long long samples = 0;   // latencies fed to the controller so far
  double chunk_scale = 1;  // the second knob: chunk_time x this
  std::string signal;      // sessions, or probe (configured, or fallen back)
};

// Reads `status` from the latency cell's control socket every 100 ms while
// a run serves it (between runs nothing listens: skipped).
class DutyTrace {
 public:
  DutyTrace() : thread_([this](std::stop_token token) { Poll(token); }) {}

  std::vector<DutyPoint> Points() {
    std::lock_guard lock(mutex_);
    return points_;
  }

 private:
  void Poll(std::stop_token token) {
    auto socket = LatencySocket();
    while (!token.stop_requested()) {
      try {
        auto status = nlohmann::json::parse(pacing::SendControlCommand(socket, "status"));
        auto latency = status["online_latency"];
        if (latency.is_object() && latency.contains("duty")) {
          DutyPoint p{.at = SteadySeconds(),
                      .duty = latency["duty"].get<double>(),
                      .ratio = latency.value("ratio", 0.0),
                      .state = latency["state"].get<std::string>(),
                      .samples = latency.value("samples", 0LL),
                      .chunk_scale = latency.value("chunk_scale", 1.0),
                      .signal = latency.value("signal", "")};
          std::lock_guard lock(mutex_);
          points_.push_back(std::move(p));
        }
      } catch (const std::exception&) {
        // No run serves the socket (yet, or any more).
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  std::mutex mutex_;
  std::vector<DutyPoint> points_;
  std::jthread thread_;  // last: starts after the members it uses
};

// The mean duty of the points in [from, to); nullopt without one.
std::optional<double> MeanDuty(const std::vector<DutyPoint>& points, double from, double to) {
  double sum = 0;
  int n = 0;
  for (const auto& p : points) {
    if (p.at >= from && p.at < to && p.state != "learning") {
      sum += p.duty;
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

// The duty cycle and the batch's items/s second by second, and the mean
// duty: where the controller held the batch.
void PrintTrace(const std::vector<DutyPoint>& points, const capacity::CellResult& c) {
  if (points.empty()) return;
  double first = points.front().at;
  double last = points.back().at;
  std::printf("           duty per second:");
  for (double at = first; at < last; at += 1) {
    if (auto d = MeanDuty(points, at, at + 1)) std::printf(" %.2f", *d);
  }
  std::printf("  (mean %.2f; signal %s, %.0f latency samples/s)\n",
              MeanDuty(points, first, last + 1).value_or(0), points.back().signal.c_str(),
              last > first ? static_cast<double>(points.back().samples - points.front().samples) /
                                 (last - first)
                           : 0.0);
  // The ratio of the controller's last decision (its percentile / baseline).
  std::printf("           chunk_scale per second:");
  for (double at = first; at < last; at += 1) {
    double sum = 0;
    int n = 0;
    for (const auto& p : points) {
      if (p.at >= at && p.at < at + 1 && p.state != "learning") sum += p.chunk_scale, ++n;
    }
    if (n > 0) std::printf(" %.2f", sum / n);
  }
  std::printf("\n");
  std::printf("           signal ratio per second:");
  for (double at = first; at < last; at += 1) {
    double sum = 0;
    int n = 0;
    for (const auto& p : points) {
      if (p.at >= at && p.at < at + 1 && p.state != "learning") sum += p.ratio, ++n;
    }
    if (n > 0) std::printf(" %.2f", sum / n);
  }
  std::printf("\n");
  std::map<long long, long long> per_second;
  for (const auto& chunk : c.chunks)
    per_second[static_cast<long long>(chunk.at_seconds)] += chunk.items;
  std::printf("           batch items/s per second:");
  for (const auto& [second, items] : per_second) std::printf(" %lld", items);
  std::printf("\n");
}

// Seconds since the epoch on the server's clock, which also stamps the
// events, so that the step and the controller's reactions share one clock.
double ServerNow(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);
  return tx.exec("SELECT extract(epoch FROM clock_timestamp())")[0][0].as<double>();
}

// The first event of `kind` at or after `since`, in seconds after it.
std::optional<double> FirstEventAfter(pqxx::connection& conn, const std::string& kind,
                                      double since) {
  pqxx::nontransaction tx(conn);
  auto r = tx.exec_params(
      "SELECT extract(epoch FROM min(at)) - $2 FROM coexist.events"
      " WHERE kind = $1 AND at >= to_timestamp($2)",
      kind, since);
  if (r[0][0].is_null()) return std::nullopt;
  return r[0][0].as<double>();
}

struct StepResult {
  capacity::CellResult cell;
  bool stepped = false;                // the extra load ran while the batch did
  std::optional<double> slowed_after;  // s from the step's start to the first slowdown
  std::optional<double> sped_after;    // s from the step's end to the first recovery
  long long slowdowns_before = 0;      // slowdowns under the steady load, before the step
  // From the control socket: the step's span on the steady clock, and the
  // controller's duty cycle around it.
  double step_start_steady = 0;
  double step_end_steady = 0;
  std::vector<DutyPoint> trace;
};

// How long after `at` the controller first slowed the batch (`down`: a
// lower duty or shorter chunks) or sped it up (a higher duty or longer
// chunks) from where it was just before `at`; nullopt when it never did,
// or could not (both knobs at their floor, or both at 1).
std::optional<double> DutyMovedAfter(const std::vector<DutyPoint>& points, double at, bool down) {
  std::optional<DutyPoint> before;
  for (const auto& p : points) {
    if (p.at < at) {
      if (p.state != "learning") before = p;
      continue;
    }
    if (!before) return std::nullopt;
    bool at_one = before->duty >= 1.0 && before->chunk_scale >= 1.0;
    // The bench's min_duty is 0.05; the chunks' floor is whatever the
    // controller reached: a cut of either knob counts.
    if (!down && at_one) return std::nullopt;
    if (down ? (p.duty < before->duty || p.chunk_scale < before->chunk_scale)
             : (p.duty > before->duty || p.chunk_scale > before->chunk_scale)) {
      return p.at - at;
    }
  }
  return std::nullopt;
}

StepResult RunStepCell(const std::string& conninfo, const Options& o) {
  auto yaml = ScenarioYaml(o, kPacedFirstChunk, LatencyPacing(o));
  auto scenario = config::LoadScenarioString(yaml, "latency-step");
  auto config = scenario.cells.at(0).config;
  if (config.online.records == 0) config.online.records = scenario.settings.records;
  StepResult result;
  double step_start = 0;
  double step_end = 0;
  std::chrono::steady_clock::time_point step_end_steady;
  std::jthread stepper([&](std::stop_token token) {
    auto conn = db::Connect(conninfo, "pacing-bench-step");
    // The end of learning, when the first chunk may run, read from this
    // run's control socket: the previous cell's latency_baseline event is
    // still in coexist.events while this cell prepares its data and warms
    // up, and reading it there stepped the load before the batch started.
    auto learned = [&] {
      try {
        auto status = nlohmann::json::parse(pacing::SendControlCommand(LatencySocket(), "status"));
        auto state = status["online_latency"].value("state", "");
        return state == "within" || state == "over";
      } catch (const std::exception&) {
        return false;  // no run serves the socket yet
      }
    };
    while (!token.stop_requested() && !learned()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (token.stop_requested()) return;
    std::this_thread::sleep_for(std::chrono::duration<double>(o.step_at));
    {
      pqxx::nontransaction tx(*conn);
      result.slowdowns_before =
          tx.exec("SELECT count(*) FROM coexist.events WHERE kind = 'latency_slowdown'")[0][0]
              .as<long long>();
    }
    step_start = ServerNow(*conn);
    online_sim::Simulator extra(conninfo, config.target, config.online,
                                online_sim::RunOptions{.duration = std::chrono::milliseconds(
                                                           static_cast<long>(o.step_for * 1000)),
                                                       .check_lost_updates = false});
    extra.Prepare();
    result.step_start_steady = SteadySeconds();
    extra.Run();
    result.step_end_steady = SteadySeconds();
    step_end = ServerNow(*conn);
    step_end_steady = std::chrono::steady_clock::now();
  });
  auto called = std::chrono::steady_clock::now();
  {
    DutyTrace trace;
    result.cell = RunCell(conninfo, yaml, "latency-step");
    result.trace = trace.Points();
  }
  stepper.request_stop();
  stepper.join();
  if (step_end == 0) return result;
  // The extra load counts only if the batch outlasted it. `called` is
  // before the cell's own start (it prepares data first), so this errs on
  // the side of "did not".
  result.stepped = std::chrono::duration<double>(step_end_steady - called).count() <
                   result.cell.batch_end_seconds;
  auto conn = db::Connect(conninfo, "pacing-bench-step");
  result.slowed_after = FirstEventAfter(*conn, "latency_slowdown", step_start);
  result.sped_after = FirstEventAfter(*conn, "latency_recovered", step_end);
  return result;
}

std::string Seconds(const std::optional<double>& s) {
  if (!s) return "never";
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", *s);
  return text;
}

std::vector<std::string> Split(const std::string& list) {
  std::vector<std::string> parts;
  size_t from = 0;
  for (size_t comma; (comma = list.find(',', from)) != std::string::npos; from = comma + 1) {
    parts.push_back(list.substr(from, comma - from));
  }
  parts.push_back(list.substr(from));
  return parts;
}

// A duration as the configuration spells it ("5ms", "1m30s").
const CLI::Validator kDuration(
    [](const std::string& text) -> std::string {
      return config::ParseDuration(text) ? ""
                                         : "'" + text + "' is not a duration such as 5ms or 2s";
    },
    "DURATION");

// --step-at and --step-for: a duration, or a number of seconds ("3s", "3").
std::optional<double> StepSeconds(const std::string& text) {
  if (auto duration = config::ParseDuration(text)) {
    return std::chrono::duration<double>(*duration).count();
  }
  double seconds = 0;
  if (CLI::detail::lexical_cast(text, seconds) && seconds >= 0) return seconds;
  return std::nullopt;
}

const CLI::Validator kSeconds(
    [](const std::string& text) -> std::string {
      return StepSeconds(text) ? "" : "'" + text + "' is not a duration such as 3s (or seconds)";
    },
    "DURATION");

// --objective: a ratio, as online_latency.objective takes it ("1.25", "1.25x";
// above 1, at most 100).
const CLI::Validator kRatio(
    [](const std::string& text) -> std::string {
      std::string number = text;
      if (!number.empty() && (number.back() == 'x' || number.back() == 'X')) number.pop_back();
      double ratio = 0;
      return CLI::detail::lexical_cast(number, ratio) && ratio > 1 && ratio <= 100
                 ? ""
                 : "'" + text + "' is not a ratio above 1 and at most 100, such as 1.25";
    },
    "RATIO");

// A comma-separated list whose every element passes `element`.
CLI::Validator ListOf(const CLI::Validator& element, const std::string& name) {
  return CLI::Validator(
      [element](const std::string& text) -> std::string {
        for (auto part : Split(text)) {
          if (auto error = element(part); !error.empty()) return error;
        }
        return "";
      },
      name);
}

// The duties of --sweep-duty: fractions of the time the batch may work,
// as online_latency.min_duty takes them.
const CLI::Validator kDuty(
    [](const std::string& text) -> std::string {
      double duty = 0;
      return CLI::detail::lexical_cast(text, duty) && duty >= 0.01 && duty <= 1
                 ? ""
                 : "'" + text + "' is not a duty cycle from 0.01 to 1";
    },
    "DUTY");

Options Parse(int argc, char** argv) {
  Options o;
  CLI::App app{
      "Pacing benchmark: the online p99 and the batch rate of unpaced, paced and latency-paced "
      "batches under the same online load, and the latency controller's reaction to a step "
      "(docs/pacing.md). Any --sweep-* option measures fixed duty cycles instead."};
  // yes or 1 turns a switch on, no or 0 off.
  auto yes_no = CLI::IsMember({"yes", "no", "1", "0"});
  std::string sweep, quick, priority_cell, commit_cell, durable;
  std::string sweep_duties, sweep_chunk_times;
  std::string step_at = "3s", step_for = "5s";
  app.add_option("--rounds", o.rounds, "rounds of the cells (default 3)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--records", o.records,
                 "rows the online users and the batch share (default 50000)")
      ->check(CLI::Range(1LL, 1'000'000'000LL));
  app.add_option("--items", o.items, "queue items of each cell's batch (default 200000)")
      ->check(CLI::Range(1LL, 1'000'000'000LL));
  app.add_option("--users", o.users, "online users, closed model (default 8)")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--chunk", o.chunk, "the unpaced cell's fixed chunk size (default 2000)")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--chunk-time", o.chunk_time, "the paced cell's pacing.chunk_time (default 5ms)")
      ->check(kDuration);
  app.add_option("--max-load", o.max_load,
                 "the paced cell's max_load lock_waiters; 0: no throttle (default 3)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--objective", o.objective,
                 "the latency cells' online_latency.objective (default 1.25)")
      ->check(kRatio);
  app.add_option("--latency-chunk-time", o.latency_chunk_time,
                 "the latency cells' chunk_time (default 20ms)")
      ->check(kDuration);
  app.add_option("--tolerance", o.tolerance,
                 "online_latency.tolerance (default: the signal's default)")
      ->check(kDuration);
  app.add_option("--percentile", o.percentile,
                 "online_latency.percentile, 50 to 99.9 (default: the signal's default)")
      ->check(CLI::Range(50.0, 99.9));
  app.add_option("--signal", o.signal,
                 "online_latency.signal: sessions or probe (default sessions)")
      ->check(CLI::IsMember({"sessions", "probe"}));
  app.add_option("--probe-interval", o.probe_interval,
                 "online_latency.probe_interval (default 20ms)")
      ->check(kDuration);
  app.add_option("--min-chunk-time", o.min_chunk_time,
                 "the latency cells' min_chunk_time (default chunk_time / 4)")
      ->check(kDuration);
  app.add_option("--start", o.start,
                 "the latency cells' online_latency.start: slow or full (default slow)")
      ->check(CLI::IsMember({"slow", "full"}));
  app.add_option("--step-at", step_at,
                 "batch time before the step cell doubles the online load (default 3s)")
      ->check(kSeconds);
  app.add_option("--step-for", step_for, "how long the doubled load lasts (default 5s)")
      ->check(kSeconds);
  app.add_option("--quick", quick, "yes: the unpaced and latency cells only, no step (default no)")
      ->check(yes_no);
  app.add_option("--priority-cell", priority_cell,
                 "no: leave out the latency cell at cpu_priority low (default yes)")
      ->check(yes_no);
  app.add_option("--commit-cell", commit_cell,
                 "no: leave out the latency cell at cpu_priority low with the server's "
                 "synchronous_commit (default yes, with the priority cell)")
      ->check(yes_no);
  app.add_option("--durable", durable,
                 "no: a cluster without fsync and with synchronous_commit off, as the tests "
                 "run (default yes: as a production server runs)")
      ->check(yes_no);
  app.add_option("--cluster-root", o.cluster_root,
                 "folder for the throwaway cluster (default $TMPDIR or /tmp); /dev/shm: its WAL "
                 "on memory, where a flush costs nothing")
      ->check(CLI::ExistingDirectory);
  auto* duty = app.add_option("--sweep-duty", sweep_duties,
                              "sweep: comma-separated duty cycles (default 1,0.5,0.2,0.1)")
                   ->check(ListOf(kDuty, "DUTY,..."));
  auto* chunk_time = app.add_option("--sweep-chunk-time", sweep_chunk_times,
                                    "sweep: comma-separated chunk_times (default 20ms,5ms,2ms)")
                         ->check(ListOf(kDuration, "DURATION,..."));
  auto* sweep_for = app.add_option("--sweep-for", o.sweep_for,
                                   "sweep: how long each cell's batch runs (default 6s)")
                        ->check(kDuration);
  auto* sweep_switch =
      app.add_option("--sweep", sweep, "yes: the sweep with its defaults; no: no sweep")
          ->check(yes_no);
  bench::ParseOrExit(app, argc, argv);
  if (!sweep_duties.empty()) o.sweep_duties = Split(sweep_duties);
  if (!sweep_chunk_times.empty()) o.sweep_chunk_times = Split(sweep_chunk_times);
  o.sweep = duty->count() > 0 || chunk_time->count() > 0 || sweep_for->count() > 0;
  if (sweep_switch->count() > 0) o.sweep = sweep == "yes" || sweep == "1";
  if (!quick.empty()) o.quick = quick == "yes" || quick == "1";
  if (!priority_cell.empty()) o.priority_cell = priority_cell == "yes" || priority_cell == "1";
  if (!commit_cell.empty()) o.commit_cell = commit_cell == "yes" || commit_cell == "1";
  if (!durable.empty()) o.durable = durable == "yes" || durable == "1";
  // The summary line prints the objective with its own "x".
  if (o.objective.back() == 'x' || o.objective.back() == 'X') o.objective.pop_back();
  o.step_at = *StepSeconds(step_at);
  o.step_for = *StepSeconds(step_for);
  return o;
}

// The fixed-duty sweep: for each chunk_time and duty, one cell whose batch
// runs sweep_for (stopped by the scenario's window), and an unpaced cell
// for the rate: online p99 during/alone against batch rate/unpaced.
void Sweep(const std::string& conninfo, const Options& o) {
  auto unpaced =
      RunCell(conninfo, ScenarioYaml(o, o.chunk, UnpacedPacing(), o.sweep_for), "unpaced");
  PrintCell("unpaced", unpaced);
  std::printf("  sweep: chunk_time duty  p99 alone  p99 during  ratio  items/s  rate\n");
  std::printf("  sweep: %-10s %-4s %8.1f ms %8.1f ms %5.2fx %8.0f %5.2fx\n", "unpaced", "1",
              unpaced.before.p99_ms, unpaced.during.p99_ms,
              unpaced.during.p99_ms / unpaced.before.p99_ms, unpaced.items_per_second, 1.0);
  std::fflush(stdout);
  for (const auto& chunk_time : o.sweep_chunk_times) {
    for (const auto& duty : o.sweep_duties) {
      auto c =
          RunCell(conninfo,
                  ScenarioYaml(o, kPacedFirstChunk, FixedDutyPacing(chunk_time, duty), o.sweep_for),
                  "fixed");
      std::printf("  sweep: %-10s %-4s %8.1f ms %8.1f ms %5.2fx %8.0f %5.2fx\n", chunk_time.c_str(),
                  duty.c_str(), c.before.p99_ms, c.during.p99_ms, c.during.p99_ms / c.before.p99_ms,
                  c.items_per_second, c.items_per_second / unpaced.items_per_second);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto o = Parse(argc, argv);
  spdlog::set_level(spdlog::level::warn);
  auto cluster = db::TempCluster::Start({.temp_root = o.cluster_root, .fast_unsafe = !o.durable});
  std::string conninfo = cluster->ConnectionString();
  if (o.sweep) {
    Sweep(conninfo, o);
    return 0;
  }
  std::printf("cluster: %s, in %s\n",
              o.durable ? "durable (fsync, synchronous_commit and full_page_writes on, as a "
                          "production server)"
                        : "fast and unsafe (fsync and synchronous_commit off)",
              cluster->dir().parent_path().c_str());
  std::printf(
      "%lld records, %lld items, %d online users; unpaced: fixed chunks of %d; paced: "
      "chunk_time %s, max_load lock_waiters %d; latency: signal %s, chunk_time %s, objective "
      "%sx, tolerance %s, percentile %s, interval %s, min_chunk_time %s\n",
      o.records, o.items, o.users, o.chunk, o.chunk_time.c_str(), o.max_load, o.signal.c_str(),
      o.latency_chunk_time.c_str(), o.objective.c_str(),
      o.tolerance.empty() ? "the signal's default" : o.tolerance.c_str(),
      o.percentile.empty() ? "the signal's default" : o.percentile.c_str(),
      o.probe_interval.c_str(),
      o.min_chunk_time.empty() ? "default (chunk_time / 4)" : o.min_chunk_time.c_str());

  std::vector<double> p99_ratios;
  std::vector<double> rate_ratios;
  std::vector<double> latency_p99_ratios;
  std::vector<double> latency_rate_ratios;
  std::vector<double> low_p99_ratios;
  std::vector<double> low_rate_ratios;
  std::vector<double> commit_p99_ratios;
  std::vector<double> commit_rate_ratios;
  std::vector<double> slow_reactions;
  std::vector<double> fast_reactions;
  std::vector<double> duty_cuts;
  std::vector<double> duty_raises;
  for (int round = 1; round <= o.rounds; ++round) {
    std::printf("round %d\n", round);
    auto unpaced = RunCell(conninfo, ScenarioYaml(o, o.chunk, UnpacedPacing()), "unpaced");
    PrintCell("unpaced", unpaced);
    // --quick: the unpaced and latency cells only (tuning the objective);
    // the paced figures are then the unpaced cell's.
    auto paced =
        o.quick ? unpaced
                : RunCell(conninfo, ScenarioYaml(o, kPacedFirstChunk, PacedPacing(o)), "paced");
    if (!o.quick) PrintCell("paced", paced);
    // A latency-paced cell, its duty cycle traced second by second.
    auto traced = [&](const char* name, const std::string& pacing) {
      DutyTrace trace;
      auto cell = RunCell(conninfo, ScenarioYaml(o, kPacedFirstChunk, pacing), name);
      PrintCell(name, cell);
      PrintTrace(trace.Points(), cell);
      return cell;
    };
    capacity::CellResult latency = traced("latency", LatencyPacing(o));
    std::optional<capacity::CellResult> low, commits_on;
    if (o.priority_cell) {
      low = traced("latency, priority low",
                   LatencyPacing(o) + "  cpu_priority: low\n  synchronous_commit: \"off\"\n");
    }
    if (o.priority_cell && o.commit_cell) {
      commits_on =
          traced("latency, priority low, commits on", LatencyPacing(o) + "  cpu_priority: low\n");
    }
    // "Without the batch": the online load alone, in every cell of the round.
    double alone_sum = unpaced.before.p99_ms + paced.before.p99_ms + latency.before.p99_ms;
    int alone_cells = 3;
    for (const auto* cell : {&low, &commits_on}) {
      if (*cell) alone_sum += (*cell)->before.p99_ms, ++alone_cells;
    }
    double alone = alone_sum / alone_cells;
    auto record = [&](const std::optional<capacity::CellResult>& cell, const char* name,
                      std::vector<double>& p99s, std::vector<double>& rates) {
      if (!cell) return;
      p99s.push_back(cell->during.p99_ms / alone);
      rates.push_back(cell->items_per_second / unpaced.items_per_second);
      std::printf("  %s: online p99 %.2fx, rate %.2fx unpaced\n", name, p99s.back(), rates.back());
    };
    record(commits_on, "latency, priority low, commits on", commit_p99_ratios, commit_rate_ratios);
    record(low, "latency, priority low", low_p99_ratios, low_rate_ratios);
    p99_ratios.push_back(paced.during.p99_ms / alone);
    rate_ratios.push_back(paced.items_per_second / unpaced.items_per_second);
    latency_p99_ratios.push_back(latency.during.p99_ms / alone);
    latency_rate_ratios.push_back(latency.items_per_second / unpaced.items_per_second);
    std::printf(
        "  online p99 without batch %.1f ms; unpaced %.2fx, paced %.2fx, latency %.2fx; rate "
        "paced %.2fx, latency %.2fx unpaced\n",
        alone, unpaced.during.p99_ms / alone, p99_ratios.back(), latency_p99_ratios.back(),
        rate_ratios.back(), latency_rate_ratios.back());

    if (o.quick) continue;
    auto step = RunStepCell(conninfo, o);
    PrintCell("step", step.cell, /*lost_checked=*/false);
    PrintTrace(step.trace, step.cell);
    if (!step.stepped) {
      std::printf("  step: the batch ended before the doubled load did; use more --items\n");
    } else {
      // The events mark state changes (within <-> over) only: a batch
      // already over when the load doubles is cut without a new event. The
      // duty read from the control socket shows every cut and raise.
      auto slowed = DutyMovedAfter(step.trace, step.step_start_steady, true);
      auto sped = DutyMovedAfter(step.trace, step.step_end_steady, false);
      auto mean = [&](double from, double to) {
        auto d = MeanDuty(step.trace, from, to);
        return d ? *d : -1.0;
      };
      double s0 = step.step_start_steady;
      double s1 = step.step_end_steady;
      std::printf(
          "  step: online load x2 after %.1f s of batch for %.1f s (%lld slowdowns before); "
          "events: slowdown %s after it began, recovered %s after it ended\n"
          "        duty or chunks (never: did not move, or could not): cut %s after it "
          "began, raised %s after it ended; mean duty 3 s before %.2f, during (after its first 2 "
          "s) %.2f, 2-5 s after %.2f\n",
          o.step_at, o.step_for, step.slowdowns_before, Seconds(step.slowed_after).c_str(),
          Seconds(step.sped_after).c_str(), Seconds(slowed).c_str(), Seconds(sped).c_str(),
          mean(s0 - 3, s0), mean(s0 + 2, s1), mean(s1 + 2, s1 + 5));
      if (step.slowed_after) slow_reactions.push_back(*step.slowed_after);
      if (step.sped_after) fast_reactions.push_back(*step.sped_after);
      if (slowed) duty_cuts.push_back(*slowed);
      if (sped) duty_raises.push_back(*sped);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  std::printf(
      "\nmedian over %d rounds: paced p99 %.2fx without batch (target <= 1.25x), paced "
      "rate %.2fx unpaced (target >= 0.50x)\n",
      o.rounds, median(p99_ratios), median(rate_ratios));
  if (!slow_reactions.empty() || !fast_reactions.empty()) {
    std::printf(
        "step, events: slowed within %s of the online load doubling, sped up within %s of it "
        "ending (medians of %zu / %zu rounds; target 2 s)\n",
        slow_reactions.empty() ? "-" : Seconds(median(slow_reactions)).c_str(),
        fast_reactions.empty() ? "-" : Seconds(median(fast_reactions)).c_str(),
        slow_reactions.size(), fast_reactions.size());
  }
  if (!duty_cuts.empty() || !duty_raises.empty()) {
    std::printf(
        "step, duty or chunks: cut within %s of the online load doubling, raised within %s of it "
        "ending "
        "(medians of %zu / %zu rounds; target 2 s)\n",
        duty_cuts.empty() ? "-" : Seconds(median(duty_cuts)).c_str(),
        duty_raises.empty() ? "-" : Seconds(median(duty_raises)).c_str(), duty_cuts.size(),
        duty_raises.size());
  }
  // The last line is the best configuration's: with the priority cell,
  // that one, the server's priority on the line before it.
  if (!low_p99_ratios.empty()) {
    std::printf(
        "latency objective, server's priority: online p99 %.2fx without batch, batch rate %.2fx "
        "unpaced\n",
        median(latency_p99_ratios), median(latency_rate_ratios));
    if (!commit_p99_ratios.empty()) {
      std::printf(
          "latency objective, priority low, commits on: online p99 %.2fx without batch, batch "
          "rate %.2fx unpaced\n",
          median(commit_p99_ratios), median(commit_rate_ratios));
    }
    std::printf("latency objective: online p99 %.2fx without batch, batch rate %.2fx unpaced\n",
                median(low_p99_ratios), median(low_rate_ratios));
    return 0;
  }
  std::printf("latency objective: online p99 %.2fx without batch, batch rate %.2fx unpaced\n",
              median(latency_p99_ratios), median(latency_rate_ratios));
  return 0;
}
