// coexist batch run: one run of the configured job (docs/batch.md).

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "batch/dry_run.h"
#include "batch/runner.h"
#include "cli/context.h"
#include "cli/shard_report.h"
#include "common/error.h"
#include "common/signals.h"
#include "daemon/daemon.h"
#include "daemon/run_report.h"

namespace coexist::cli {
namespace {

void PrintSummary(std::ostream& out, const batch::RunSummary& s) {
  out << "run " << s.run_id << " of job " << s.job << " (policy " << s.policy << "): " << s.outcome
      << "\n"
      << "  done " << s.counts.done << ", deferred " << s.counts.deferred << ", dead "
      << s.counts.dead << ", still queued " << s.queued_left << "\n";
  const auto& c = s.counts;
  if (c.missing > 0) {
    out << "  missing " << c.missing
        << ": items naming a key with no row in the target (batch.missing_rows; their "
           "items_missing events list the keys)\n";
  }
  if (c.escalated + c.revoked + c.signalled > 0) {
    out << "  escalated " << c.escalated << ", edit locks revoked " << c.revoked
        << ", online backends signalled " << c.signalled << "\n";
  }
  if (s.abandoned_runs > 0) out << "  marked " << s.abandoned_runs << " stale run(s) abandoned\n";
  if (s.stop_reason != StopReason::kDrained) {
    out << "  claiming stopped: " << ToString(s.stop_reason) << "\n";
  }
  if (s.stop_reason == StopReason::kMaxDuration || s.stop_reason == StopReason::kMaxItems) {
    out << "  the run's budget (batch." << ToString(s.stop_reason)
        << ") is spent; the next run goes on with what is left\n";
  }
  if (s.stop_reason == StopReason::kFailuresInARow) {
    out << "  items failed in a row and none was done (batch.max_consecutive_failures): the "
           "operation or the payloads fail for every item; `coexist queue status` shows the "
           "errors. Fix them and run again (`coexist queue retry --dead` first if any died).\n";
  }
  char rate[64];
  std::snprintf(rate, sizeof(rate), "%.2f s, %.0f items/s", s.seconds, s.items_per_second);
  out << "  " << rate << "\n";
  // Shared runs: the job's figures, over the runs that worked alongside.
  if (s.together && s.together->runs > 1) {
    const auto& t = *s.together;
    std::snprintf(rate, sizeof(rate), "%.2f s", t.seconds);
    out << "  with the job's other runs: " << t.runs << " runs (" << t.running << " still running, "
        << t.failed << " failed or died), done " << t.done << ", deferred " << t.deferred
        << ", dead " << t.dead << " in " << rate << "\n";
  }
}

void WriteJson(const std::string& path, const std::string& json) {
  if (path.empty()) return;
  std::ofstream out(path);
  if (!out) throw Error(ExitCode::kCantCreate, "cannot write " + path);
  out << nlohmann::json::parse(json).dump(2) << '\n';
}

struct RunFlags {
  std::string json_path;
  bool dry_run = false;
  size_t rows = 50;
  // The owner installed the schema, triggers and windows (`db install
  // --config`): a least-privilege role runs without creating anything.
  bool no_install = false;
};

// --dry-run on each shard in turn, each report under the shard's name.
int DryRunShards(Context& context, const RunFlags& flags) {
  nlohmann::json reports = nlohmann::json::array();
  int code = EachShard(context.Shards(), [&](const batch::Shard& shard) {
    auto report = batch::DryRun(shard.conninfo, context.Config());
    std::cout << "shard " << shard.name << ":\n";
    batch::PrintDryRun(std::cout, report, flags.rows);
    auto json = nlohmann::json::parse(batch::DryRunJson(report));
    json["shard"] = shard.name;
    reports.push_back(std::move(json));
    return 0;
  });
  WriteJson(flags.json_path, nlohmann::json{{"shards", reports}}.dump());
  return code;
}

// One run per shard, database.max_parallel_shards at a time; a shard that
// fails is reported by its name and the others go on (docs/operations.md,
// "Jobs over several databases").
int RunShards(Context& context, const RunFlags& flags, const batch::RunOptions& options) {
  const auto& config = context.Config();
  auto shards = context.Shards();
  auto started = std::chrono::steady_clock::now();
  auto runs = batch::RunShards(shards, config, options);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  auto report = ReportOf(shards, runs, config, seconds);
  PrintShardedRun(std::cout, report);
  for (const auto& row : report.rows) {
    if (row.failure) PrintFailure(std::cerr, *row.failure);
  }
  // Each shard's runs row holds its own figures; the job's files follow the
  // summary, so that a file that cannot be written does not hide it.
  WriteJson(flags.json_path, ShardedRunJson(report).dump());
  daemon::WriteRunTextfile(config, ShardedRunMetrics(report));
  return ToInt(report.code);
}

// The run of a job of one database.
int RunOne(Context& context, const RunFlags& flags, const batch::RunOptions& options) {
  const auto& config = context.Config();
  const auto& server = context.Server();
  auto started = std::chrono::steady_clock::now();
  batch::RunSummary summary;
  try {
    summary = batch::Run(server.conninfo(), config, options);
  } catch (const batch::JobBusyError&) {
    throw;  // it did nothing: the run holding the job writes the metrics
  } catch (const std::exception&) {
    // The last-success time of the previous file is kept (metrics/). The
    // run's own error is what the operator needs; a metrics error is logged.
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    daemon::WriteRunTextfileOrWarn(config, daemon::FailedRunMetrics(config, seconds));
    throw;
  }
  daemon::WriteRunTextfile(config, daemon::MetricsOf(summary));
  PrintSummary(std::cout, summary);
  WriteJson(flags.json_path, batch::SummaryJson(summary));
  return ToInt(batch::ExitCodeOf(summary));
}

int RunBatch(Context& context, const RunFlags& flags) {
  if (!context.HasConfigFile()) {
    throw UsageError("batch run needs --config FILE", "the job, policy and operation live there.");
  }
  if (flags.dry_run && context.Sharded()) return DryRunShards(context, flags);
  if (flags.dry_run) {
    auto report = batch::DryRun(context.Server().conninfo(), context.Config());
    batch::PrintDryRun(std::cout, report, flags.rows);
    WriteJson(flags.json_path, batch::DryRunJson(report));
    return 0;
  }
  std::atomic<bool> stop{false};
  // SIGTERM/SIGINT: stop claiming (on every shard), let the chunks in
  // flight commit, report.
  signals::Handler handler([&stop](int) { stop = true; });
  batch::RunOptions options;
  options.stop = &stop;
  options.install = !flags.no_install;
  return context.Sharded() ? RunShards(context, flags, options) : RunOne(context, flags, options);
}

int RunDaemon(Context& context, bool no_install) {
  if (!context.HasConfigFile()) {
    throw UsageError("batch daemon needs --config FILE",
                     "the job, policy and operation live there; SIGHUP re-reads it.");
  }
  daemon::DaemonSettings settings;
  settings.conninfo = context.Server().conninfo();
  settings.config_path = context.options.config_path;
  settings.install = !no_install;
  return daemon::RunDaemon(settings, context.Config());
}

}  // namespace

void AddBatchCommand(CLI::App& app, Context& context, int& exit_code) {
  auto* batch_cmd = app.add_subcommand("batch", "Run batch jobs");
  batch_cmd->require_subcommand(1);
  auto* run = batch_cmd->add_subcommand(
      "run",
      "Process the job's queue once under its policy; exit 0 when every settled item is done, "
      "2 when items were deferred or left queued, 3 when items died");
  static RunFlags flags;
  run->add_option("--json", flags.json_path, "also write the summary as JSON to this file");
  run->add_flag("--dry-run", flags.dry_run,
                "report what would be claimed and each item's policy decision; change nothing");
  run->add_option("--rows", flags.rows, "dry run: items shown in the table (default 50)")
      ->check(CLI::Range(size_t{1}, size_t{1'000'000}));
  constexpr const char* kNoInstallHelp =
      "do not install migrations, triggers or windows on start (the owner ran 'db install "
      "--config'); for a least-privilege database role";
  run->add_flag("--no-install", flags.no_install, kNoInstallHelp);
  run->callback([&] { exit_code = RunBatch(context, flags); });
  auto* daemon_cmd = batch_cmd->add_subcommand(
      "daemon",
      "Run the job whenever work arrives (LISTEN/NOTIFY, poll) until SIGTERM; systemd notify, "
      "SIGHUP reloads the configuration, /metrics with metrics.listen");
  static bool daemon_no_install = false;
  daemon_cmd->add_flag("--no-install", daemon_no_install, kNoInstallHelp);
  daemon_cmd->callback([&] { exit_code = RunDaemon(context, daemon_no_install); });
}

}  // namespace coexist::cli
