// coexist jobs [pause JOB --reason TEXT | resume JOB]: every job's progress
// and ETA, and a job-wide pause kept in the database, read by every run of
// the job in its heartbeat.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "admin/edit_locks.h"
#include "cli/context.h"
#include "common/error.h"
#include "dashboard/state.h"
#include "db/connection.h"
#include "metrics/job_metrics.h"
#include "metrics/textfile.h"
#include "schema/job_pauses.h"
#include "schema/jobs.h"

namespace coexist::cli {

namespace {

Error UnknownJob(const std::string& job) {
  return Error(ExitCode::kDataError,
               "job '" + job + "' is unknown here: no queue item, run or range checkpoint names it",
               "`coexist jobs` lists the jobs this database knows (a job's name is batch.job of "
               "its configuration); nothing was changed.");
}

// "45 s", "12 min", "3.4 h": an ETA as an operator reads it.
std::string Duration(double seconds) {
  if (seconds < 120) return fmt::format("{:.0f} s", seconds);
  if (seconds < 7200) return fmt::format("{:.0f} min", seconds / 60);
  return fmt::format("{:.1f} h", seconds / 3600);
}

void PrintJobs(const std::vector<db::JobRow>& jobs, bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& j : jobs) out.push_back(dashboard::JobJson(j));
    std::cout << out.dump(2) << '\n';
    return;
  }
  constexpr const char* kRow = "{:<24} {:>7} {:>19} {:>6} {:>8} {:>7}  {}\n";
  std::cout << fmt::format(kRow, "job", "running", "done/items", "dead", "items/s", "ETA", "state");
  for (const auto& j : jobs) {
    auto rate = j.Rate();
    auto eta = j.EtaSeconds();
    std::string state = j.pause ? fmt::format("paused since {} by {} ({}): {}", j.pause->since,
                                              j.pause->by, j.pause->db_user, j.pause->reason)
                        : j.running_runs > 0 ? "running"
                                             : "idle";
    // Runs their pacers hold (throttled by the load, hibernating, ...); a
    // job's pause says why its runs are held already.
    std::string held;
    for (const auto& [pacing, runs] : j.runs_by_pacing_state) {
      if (pacing == "running" || pacing == "starting") continue;
      held += fmt::format("{}{} {}", held.empty() ? "" : ", ", runs, pacing);
    }
    if (!held.empty() && !j.pause) state += " (" + held + ")";
    if (j.pacing_duty && *j.pacing_duty < 1) state += fmt::format(", duty {:.2f}", *j.pacing_duty);
    if (j.online_latency_ratio) {
      state += fmt::format(", online latency {:.2f}x its baseline", *j.online_latency_ratio);
      if (j.online_latency_objective) {
        state += fmt::format(" (objective {:.2f}x)", *j.online_latency_objective);
      }
    }
    if (j.cancelled > 0) state += fmt::format("; {} cancelled", j.cancelled);
    if (j.range_segments > 0) {
      state += fmt::format("; range: {}/{} segments, {} rows applied", j.range_finished,
                           j.range_segments, j.range_applied);
      if (j.range_expected > 0) {
        state += fmt::format(", {} of {} walked", j.range_walked, j.range_expected);
      }
    }
    std::cout << fmt::format(kRow, j.job, j.running_runs,
                             fmt::format("{}/{}", j.done, j.queued + j.deferred + j.done + j.dead),
                             j.dead, rate ? fmt::format("{:.1f}", *rate) : "-",
                             eta ? Duration(*eta) : "-", state);
  }
  std::cout << jobs.size() << " job" << (jobs.size() == 1 ? "" : "s") << '\n';
}

}  // namespace

void AddJobsCommand(CLI::App& app, Context& context, int& exit_code) {
  auto* jobs = app.add_subcommand(
      "jobs",
      "The jobs this database knows: items done of all, rate and ETA of the running runs "
      "together, a range job's segments, and the pause; pause or resume every run of a job, on "
      "every host, through the database");
  static bool json = false;
  static bool prometheus = false;
  static std::string textfile;
  static std::string job;
  static std::string reason;
  auto* json_flag = jobs->add_flag("--json", json, "print JSON");
  auto* prometheus_flag =
      jobs->add_flag("--prometheus", prometheus,
                     "print the same as Prometheus metrics (coexist_job_*; docs/operations.md)");
  jobs->add_option("--textfile", textfile,
                   "write the metrics to this file in one step, for node_exporter's textfile "
                   "collector (deploy/systemd/coexist-jobs-metrics.timer)")
      ->excludes(json_flag)
      ->excludes(prometheus_flag);
  json_flag->excludes(prometheus_flag);
  jobs->callback([&context, &exit_code, jobs] {
    if (!jobs->get_subcommands().empty()) return;
    auto conn = db::Connect(context.Server(), "coexist-admin");
    auto rows = db::ListJobs(*conn);
    if (prometheus || !textfile.empty()) {
      auto text = metrics::JobsExposition(rows, std::chrono::system_clock::now());
      if (textfile.empty()) {
        std::cout << text;
      } else {
        metrics::ReplaceFile(textfile, text);
      }
    } else {
      PrintJobs(rows, json);
    }
    exit_code = 0;
  });

  auto* pause = jobs->add_subcommand(
      "pause",
      "Pause every run of JOB, on any host, shared or not, and the daemon's: each holds after "
      "the chunk in hand within about a second (its heartbeat) and keeps its place; a run "
      "started while the job is paused holds from its start. Kept in the database until `jobs "
      "resume`, through restarts; audited (job_paused event: who, why)");
  pause->add_option("job", job, "the job (batch.job)")->required();
  pause->add_option("--reason", reason, "why, for the audit trail and `coexist jobs`")
      ->required()
      ->check([](const std::string& value) {
        return value.find_first_not_of(" \t") == std::string::npos ? "--reason is empty" : "";
      });
  pause->callback([&] {
    auto conn = db::Connect(context.Server(), "coexist-admin");
    switch (db::PauseJob(*conn, job, admin::CurrentActor(), reason)) {
      case db::PauseChange::kUnknownJob:
        throw UnknownJob(job);
      case db::PauseChange::kChanged:
        std::cout << "job " << job
                  << " paused: its runs hold after the chunk in hand within about a second\n";
        break;
      case db::PauseChange::kUnchanged:
        std::cout << "job " << job << " is paused already: nothing changed\n";
        break;
    }
    exit_code = 0;
  });

  auto* resume = jobs->add_subcommand(
      "resume", "Resume every run of a paused JOB within about a second (job_resumed event)");
  resume->add_option("job", job, "the job (batch.job)")->required();
  resume->callback([&] {
    auto conn = db::Connect(context.Server(), "coexist-admin");
    switch (db::ResumeJob(*conn, job, admin::CurrentActor())) {
      case db::PauseChange::kUnknownJob:
        throw UnknownJob(job);
      case db::PauseChange::kChanged:
        std::cout << "job " << job << " resumed\n";
        break;
      case db::PauseChange::kUnchanged:
        std::cout << "job " << job << " is not paused: nothing changed\n";
        break;
    }
    exit_code = 0;
  });
}

}  // namespace coexist::cli
