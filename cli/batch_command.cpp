// coexist batch run: one run of the configured job (docs/batch.md).

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "batch/runner.h"
#include "cli/context.h"
#include "common/error.h"
#include "common/signals.h"

namespace coexist::cli {
namespace {

void PrintSummary(std::ostream& out, const batch::RunSummary& s) {
  out << "run " << s.run_id << " of job " << s.job << " (policy " << s.policy << "): " << s.outcome
      << "\n"
      << "  done " << s.done << ", deferred " << s.deferred << ", dead " << s.dead
      << ", still queued " << s.queued_left << "\n";
  if (s.escalated + s.revoked + s.signalled > 0) {
    out << "  escalated " << s.escalated << ", edit locks revoked " << s.revoked
        << ", online backends signalled " << s.signalled << "\n";
  }
  if (s.abandoned_runs > 0) out << "  marked " << s.abandoned_runs << " stale run(s) abandoned\n";
  if (s.stop_reason != "drained") out << "  claiming stopped: " << s.stop_reason << "\n";
  char rate[64];
  std::snprintf(rate, sizeof(rate), "%.2f s, %.0f items/s", s.seconds, s.items_per_second);
  out << "  " << rate << "\n";
}

int RunBatch(Context& context, const std::string& json_path) {
  if (!context.HasConfigFile()) {
    throw UsageError("batch run needs --config FILE", "the job, policy and operation live there.");
  }
  const auto& config = context.Config();
  const auto& server = context.Server();
  std::atomic<bool> stop{false};
  // SIGTERM/SIGINT: stop claiming, let the chunks in flight commit, report.
  signals::Handler handler([&stop](int) { stop = true; });
  batch::RunOptions options;
  options.stop = &stop;
  auto summary = batch::Run(server.conninfo(), config, options);
  PrintSummary(std::cout, summary);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    if (!out) throw Error(ExitCode::kCantCreate, "cannot write " + json_path);
    out << nlohmann::json::parse(batch::SummaryJson(summary)).dump(2) << '\n';
  }
  return ToInt(batch::ExitCodeOf(summary));
}

}  // namespace

void AddBatchCommand(CLI::App& app, Context& context, int& exit_code) {
  auto* batch_cmd = app.add_subcommand("batch", "Run batch jobs");
  batch_cmd->require_subcommand(1);
  auto* run = batch_cmd->add_subcommand(
      "run",
      "Process the job's queue once under its policy; exit 0 when every settled item is done, "
      "2 when items were deferred, 3 when items died");
  static std::string json_path;
  run->add_option("--json", json_path, "also write the summary as JSON to this file");
  run->callback([&] { exit_code = RunBatch(context, json_path); });
}

}  // namespace coexist::cli
