// coexist simulate SCENARIO --out DIR: capacity-planning runs.

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "capacity/report.h"
#include "capacity/scenarios.h"
#include "capacity/simulate.h"
#include "cli/context.h"
#include "common/error.h"
#include "common/signals.h"
#include "config/scenario.h"

namespace coexist::cli {
namespace {

// "key=value" from --set, split at the first '='.
config::Overrides ParseOverrides(const std::vector<std::string>& sets) {
  config::Overrides out;
  for (const auto& set : sets) {
    auto eq = set.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError("--set '" + set + "' is not key=value",
                       "e.g. --set scenario.records=200000 or --set online.users=40.");
    }
    out.emplace_back(set.substr(0, eq), set.substr(eq + 1));
  }
  return out;
}

config::Scenario Load(const std::string& name_or_path, const config::Overrides& overrides) {
  if (std::filesystem::exists(name_or_path)) return config::LoadScenario(name_or_path, overrides);
  if (auto text = capacity::BuiltInScenario(name_or_path)) {
    return config::LoadScenarioString(std::string(*text), name_or_path + ".yaml", overrides);
  }
  std::string names;
  for (const auto& name : capacity::BuiltInScenarioNames())
    names += (names.empty() ? "" : ", ") + name;
  throw UsageError("no scenario file or built-in scenario named '" + name_or_path + "'",
                   "give a path to a YAML file or one of: " + names + ".");
}

int Simulate(Context& context, const std::string& scenario_name, const std::string& out_dir,
             const std::vector<std::string>& sets) {
  config::Scenario scenario = Load(scenario_name, ParseOverrides(sets));
  const auto& server = context.ServerToErase();
  std::atomic<bool> stop{false};
  signals::Handler on_signal([&stop](int) { stop = true; });

  std::vector<capacity::CellResult> cells;
  auto summary = capacity::Summarize(scenario);
  std::exception_ptr failure;
  try {
    // A throwaway cluster's user is a superuser, whose sessions batch_priority
    // never signals: the simulated users get a role of their own there.
    std::string online_role =
        server.source() == db::ServerSource::kThrowaway ? "coexist_sim_online" : "";
    capacity::RunScenario(server.conninfo(), scenario,
                          {.progress = &std::cerr, .stop = &stop, .online_role = online_role},
                          cells);
  } catch (...) {
    failure = std::current_exception();
  }
  if (!cells.empty()) {
    capacity::WriteReport(out_dir, summary, cells);
    capacity::PrintTable(std::cout, cells);
    capacity::PrintProjections(std::cout, summary, cells);
    capacity::PrintRecommendations(std::cout, summary, cells);
    std::cout << "report: " << (std::filesystem::path(out_dir) / "report.html").string() << '\n';
  }
  if (failure) std::rethrow_exception(failure);
  if (stop) {
    std::cerr << "simulate: interrupted after " << cells.size() << " of " << scenario.cells.size()
              << " cells; the report covers those\n";
    return 128 + SIGINT;
  }
  // The product's promises, checked against the database in every cell.
  int broken = 0;
  for (const auto& cell : cells) {
    bool nolock = scenario.cells[cell.sweep_cell - 1].config.online.mix.nolock > 0;
    if (cell.applied_twice != 0 || (cell.lost_updates != 0 && !nolock)) {
      std::cerr << "simulate: cell " << cell.index << " (" << cell.policy
                << ") broke a guarantee: applied_twice=" << cell.applied_twice
                << " lost_updates=" << cell.lost_updates << '\n';
      ++broken;
    }
  }
  return broken == 0 ? 0 : ToInt(ExitCode::kSoftware);
}

}  // namespace

void AddSimulateCommand(CLI::App& app, Context& context, int& exit_code) {
  auto* simulate = app.add_subcommand(
      "simulate",
      "Capacity planning: run the batch inside online load for every cell of a scenario's sweep "
      "and write results.json, results.csv and report.html");
  static std::string scenario;
  static std::string out_dir = "coexist-report";
  simulate
      ->add_option("scenario", scenario,
                   "scenario YAML file, or a built-in scenario: demo, nightly-settlement, seed001")
      ->required();
  simulate->add_option("--out", out_dir, "folder for the report files (default coexist-report)");
  static std::vector<std::string> sets;
  simulate
      ->add_option("--set", sets,
                   "KEY=VALUE: set any key of the scenario before it is read, e.g. "
                   "scenario.records=200000 or online.users=40 (repeatable)")
      ->allow_extra_args(false);
  AddAllowDatabaseOption(*simulate, context);
  simulate->callback([&] { exit_code = Simulate(context, scenario, out_dir, sets); });
}

}  // namespace coexist::cli
