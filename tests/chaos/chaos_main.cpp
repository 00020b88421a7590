// The chaos suite (docs/operations.md, "Faults survived, and the chaos
// suite"): real coexist processes against a real PostgreSQL, under faults, with the
// invariants checked after every iteration. Prints a table (fault,
// iterations, violations, the exit statuses the faulted processes showed)
// and exits 1 when any invariant was violated.
//
//   chaos --short [--seed S]              each fault's short CI loop
//   chaos --minutes 10 [--seed S]         the faults in turn until time is up
//   chaos --iterations 5 --faults kill9,sigterm

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include "common/signals.h"
#include "tests/chaos/faults.h"
#include "tests/chaos/invariants.h"
#include "tests/chaos/lab.h"
#include "tests/chaos/trial.h"

namespace coexist::chaos {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::uint64_t seed = std::random_device{}();
  double minutes = 0;
  int iterations = 0;
  bool short_loop = false;
  std::string faults;
  std::string work_dir;
  bool keep_logs = false;
};

struct Row {
  int iterations = 0;
  std::map<std::string, int> statuses;
  std::vector<std::string> details;  // one per violation
  int violations = 0;
};

std::vector<const Fault*> Select(const std::string& names) {
  std::vector<const Fault*> out;
  if (names.empty()) {
    for (const auto& fault : AllFaults()) out.push_back(&fault);
    return out;
  }
  std::stringstream list(names);
  for (std::string name; std::getline(list, name, ',');) {
    const Fault* found = nullptr;
    for (const auto& fault : AllFaults()) {
      if (fault.name == name) found = &fault;
    }
    if (found == nullptr) throw CLI::ValidationError("--faults", "unknown fault '" + name + "'");
    out.push_back(found);
  }
  return out;
}

std::string Statuses(const std::map<std::string, int>& statuses) {
  std::string out;
  for (const auto& [status, count] : statuses) {
    if (!out.empty()) out += ", ";
    out += status + (count > 1 ? " x" + std::to_string(count) : "");
  }
  return out;
}

void RunIteration(Lab& lab, const Fault& fault, int iteration, std::uint64_t seed, Row& row) {
  auto started = Clock::now();
  Findings findings;
  Rng rng(Rng::Derive(seed, fault.name, iteration));
  JobShape shape = fault.shape(rng, iteration);
  std::string label = fault.name + "-" + std::to_string(iteration);
  try {
    Trial trial(lab, label, shape, rng);
    fault.inject(trial, rng, findings);
    if (fault.final_clean_run) trial.DrainWithCleanRuns(findings);
    CheckInvariants(trial, findings);
    if (!findings.violations.empty()) trial.Keep();
  } catch (const std::exception& e) {
    findings.Add("iteration_error", std::string("the iteration could not run: ") + e.what());
  }
  ++row.iterations;
  for (const auto& [status, count] : findings.statuses) row.statuses[status] += count;
  row.violations += static_cast<int>(findings.violations.size());
  for (const auto& v : findings.violations) {
    row.details.push_back(label + " (" + Describe(shape) + "; replay: --seed " +
                          std::to_string(seed) + " --faults " + fault.name + " --iterations " +
                          std::to_string(iteration + 1) + "): " + v.invariant + "\n  " +
                          v.evidence + "  logs: " + (lab.work_dir() / label).string());
  }
  double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  std::printf("%-28s %-40s %5.1fs  %s  %s\n", label.c_str(), Describe(shape).c_str(), seconds,
              findings.violations.empty() ? "ok" : "VIOLATED", Statuses(findings.statuses).c_str());
  for (const auto& v : findings.violations) std::printf("    violated: %s\n", v.invariant.c_str());
  std::fflush(stdout);
}

void PrintTable(const std::vector<const Fault*>& faults, const std::map<std::string, Row>& rows) {
  std::printf("\n%-26s %10s %10s  %s\n", "fault", "iterations", "violations",
              "exit statuses of the faulted processes");
  for (const auto* fault : faults) {
    const Row& row = rows.at(fault->name);
    std::printf("%-26s %10d %10d  %s\n", fault->name.c_str(), row.iterations, row.violations,
                Statuses(row.statuses).c_str());
  }
  for (const auto* fault : faults) {
    for (const auto& detail : rows.at(fault->name).details) std::printf("\n%s", detail.c_str());
  }
}

int Main(const Options& options) {
  auto faults = Select(options.faults);
  std::filesystem::path work_dir =
      options.work_dir.empty()
          ? std::filesystem::temp_directory_path() / ("coexist-chaos-" + std::to_string(getpid()))
          : std::filesystem::path(options.work_dir);
  std::printf("chaos: seed %llu, %s; logs under %s\n",
              static_cast<unsigned long long>(options.seed),
              options.minutes > 0      ? (std::to_string(options.minutes) + " minutes").c_str()
              : options.iterations > 0 ? (std::to_string(options.iterations) + " iterations per "
                                                                               "fault")
                                             .c_str()
                                       : "the short loop",
              work_dir.c_str());
  std::fflush(stdout);
  Lab lab(work_dir);
  lab.set_keep_logs(options.keep_logs);
  std::map<std::string, Row> rows;
  for (const auto* fault : faults) rows[fault->name];
  if (options.minutes > 0) {
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(options.minutes * 60));
    for (int iteration = 0; Clock::now() < deadline; ++iteration) {
      for (const auto* fault : faults) {
        if (Clock::now() >= deadline) break;
        RunIteration(lab, *fault, iteration, options.seed, rows[fault->name]);
      }
    }
  } else {
    for (const auto* fault : faults) {
      int count = options.iterations > 0 ? options.iterations : fault->short_iterations;
      for (int iteration = 0; iteration < count; ++iteration) {
        RunIteration(lab, *fault, iteration, options.seed, rows[fault->name]);
      }
    }
  }
  PrintTable(faults, rows);
  int violations = 0;
  for (const auto& [name, row] : rows) violations += row.violations;
  std::printf("\nchaos: seed %llu, %d violation%s\n", static_cast<unsigned long long>(options.seed),
              violations, violations == 1 ? "" : "s");
  if (violations == 0 && !options.keep_logs) std::filesystem::remove_all(work_dir);
  return violations == 0 ? 0 : 1;
}

}  // namespace
}  // namespace coexist::chaos

int main(int argc, char** argv) {
  // Ctrl-C or SIGTERM: the throwaway cluster is stopped and removed.
  coexist::signals::Install();
  spdlog::set_level(spdlog::level::warn);
  coexist::chaos::Options options;
  CLI::App app{"coexist chaos suite: faults against real coexist processes and PostgreSQL"};
  app.add_option("--seed", options.seed, "seed of every random choice (default: random, printed)");
  auto* minutes = app.add_option("--minutes", options.minutes,
                                 "run the faults in turn until this many minutes have passed");
  auto* iterations = app.add_option("--iterations", options.iterations, "iterations of each fault");
  auto* short_loop =
      app.add_flag("--short", options.short_loop, "each fault's short loop (the default)");
  minutes->excludes(iterations)->excludes(short_loop);
  iterations->excludes(short_loop);
  app.add_option("--faults", options.faults, "comma-separated faults (default: all)");
  app.add_option("--work-dir", options.work_dir,
                 "folder for configurations and logs (kept when a violation is found)");
  app.add_flag("--keep-logs", options.keep_logs, "keep every iteration's folder");
  bool list = false;
  app.add_flag("--list", list, "list the faults and invariants and exit");
  CLI11_PARSE(app, argc, argv);
  if (list) {
    for (const auto& fault : coexist::chaos::AllFaults()) {
      std::printf("%-26s %s\n", fault.name.c_str(), fault.summary.c_str());
    }
    std::printf("\ninvariants:");
    for (const auto& name : coexist::chaos::InvariantNames()) std::printf(" %s", name.c_str());
    std::printf("\n");
    return 0;
  }
  try {
    return coexist::chaos::Main(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chaos: %s\n", e.what());
    return 2;
  }
}
