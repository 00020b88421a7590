// coexist jobs [pause JOB --reason TEXT | resume JOB]: a job-wide pause kept
// in the database, read by every run of the job in its heartbeat.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "admin/edit_locks.h"
#include "cli/context.h"
#include "common/error.h"
#include "db/connection.h"
#include "schema/job_pauses.h"

namespace coexist::cli {

namespace {

Error UnknownJob(const std::string& job) {
  return Error(ExitCode::kDataError,
               "job '" + job + "' is unknown here: no queue item, run or range checkpoint names it",
               "`coexist jobs` lists the jobs this database knows (a job's name is batch.job of "
               "its configuration); nothing was changed.");
}

void PrintJobs(const std::vector<db::JobRow>& jobs, bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& j : jobs) {
      nlohmann::json row = {{"job", j.job}, {"running_runs", j.running_runs}, {"paused", false}};
      if (j.pause) {
        row["paused"] = true;
        row["paused_at"] = j.pause->since;
        row["paused_by"] = j.pause->by;
        row["db_user"] = j.pause->db_user;
        row["reason"] = j.pause->reason;
      }
      out.push_back(std::move(row));
    }
    std::cout << out.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("{:<24} {:>7} {}\n", "job", "running", "state");
  for (const auto& j : jobs) {
    std::string state = j.pause ? fmt::format("paused since {} by {} ({}): {}", j.pause->since,
                                              j.pause->by, j.pause->db_user, j.pause->reason)
                                : "not paused";
    std::cout << fmt::format("{:<24} {:>7} {}\n", j.job, j.running_runs, state);
  }
  std::cout << jobs.size() << " job" << (jobs.size() == 1 ? "" : "s") << '\n';
}

}  // namespace

void AddJobsCommand(CLI::App& app, Context& context, int& exit_code) {
  auto* jobs = app.add_subcommand(
      "jobs",
      "The jobs this database knows, with their pause; pause or resume every run of a job, on "
      "every host, through the database");
  static bool json = false;
  static std::string job;
  static std::string reason;
  jobs->add_flag("--json", json, "print JSON");
  jobs->callback([&context, &exit_code, jobs] {
    if (!jobs->get_subcommands().empty()) return;
    auto conn = db::Connect(context.Server(), "coexist-admin");
    PrintJobs(db::ListJobs(*conn), json);
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
