// coexist ctl: steers a running batch through its control socket, or (with
// --job) stops every run of a job through the database.

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "admin/edit_locks.h"
#include "cli/context.h"
#include "common/error.h"
#include "db/connection.h"
#include "pacing/control_socket.h"
#include "schema/queue_store_ops.h"

namespace coexist::cli {

namespace {

// pacing.control_socket of --config; a sharded job's run on shard NAME
// listens on PATH.NAME (batch::ConfigForShard), so --shard says which.
std::string ConfiguredSocket(Context& context) {
  const auto& config = context.Config();
  if (config.pacing.control_socket.empty() || !context.Sharded()) {
    if (context.options.shard) {
      throw UsageError(
          "--shard " + *context.options.shard + ": " + config.source + " lists no shards",
          "leave --shard out for a job of one database.");
    }
    return config.pacing.control_socket;
  }
  if (!context.options.shard) {
    throw UsageError(config.source + " lists shards, and each shard's run has its own socket",
                     "pass --shard NAME: the run on shard NAME listens on " +
                         config.pacing.control_socket + ".NAME.");
  }
  for (const auto& shard : config.database.shards) {
    if (shard.name == *context.options.shard) {
      return batch::ConfigForShard(config, shard.name).pacing.control_socket;
    }
  }
  throw UsageError("--shard " + *context.options.shard + ": " + config.source +
                   " lists no shard of that name");
}

// `ctl --job J stop`: every running run of J, on any host, reads the
// request in its next heartbeat. Prints {"job":J,"ok":true,"stopping":[ids]}.
int StopJob(Context& context, const std::string& job, const std::string& socket_path,
            const std::string& command) {
  if (!socket_path.empty()) {
    throw UsageError("--job and --socket both given",
                     "--job J stop stops every run of J through the database; --socket PATH "
                     "steers the one run listening there. Pass one of them.");
  }
  if (command != "stop") {
    throw UsageError("ctl --job " + job + " " + command + ": only stop goes through the database",
                     "pause, resume, status and the sizing commands steer one run through its "
                     "control socket: pass --socket PATH, or --config FILE with "
                     "pacing.control_socket set, without --job.");
  }
  auto conn = db::Connect(context.Server(), "coexist-ctl");
  auto runs = db::RequestJobStop(*conn, job, admin::CurrentActor());
  std::cout << nlohmann::json{{"ok", true}, {"job", job}, {"stopping", runs}}.dump() << '\n';
  return 0;
}

}  // namespace

void AddCtlCommand(CLI::App& app, Context& context, int& exit_code) {
  auto* ctl = app.add_subcommand(
      "ctl",
      "Steer a running batch through its control socket: status, pause, resume, stop, "
      "chunk-time=DURATION, chunk-size=N, max-load=N or max-load=SIGNAL=VALUE. Prints the "
      "batch's one-line JSON answer. With --job J, stop stops every run of job J on every host "
      "through the database");
  static std::string socket_path;
  static std::string command;
  static std::string job;
  ctl->add_option("--socket", socket_path,
                  "the control socket (default: pacing.control_socket of --config)");
  ctl->add_option("--job", job,
                  "stop every running run of this job, on any host, through the database "
                  "(only with the command stop)");
  ctl->add_option("command", command, "the command to send")->required();
  ctl->callback([&] {
    if (!job.empty()) {
      exit_code = StopJob(context, job, socket_path, command);
      return;
    }
    std::string path = socket_path;
    if (path.empty() && context.HasConfigFile()) path = ConfiguredSocket(context);
    if (path.empty()) {
      throw UsageError("no control socket given",
                       "pass --socket PATH, or --config FILE with pacing.control_socket set.");
    }
    std::string answer = pacing::SendControlCommand(path, command);
    std::cout << answer << '\n';
    auto parsed = nlohmann::json::parse(answer, nullptr, false);
    bool ok = parsed.is_object() && parsed.value("ok", false);
    // The batch refused the command (unknown, bad value): the operator's
    // command line was wrong.
    exit_code = ok ? 0 : ToInt(ExitCode::kUsage);
  });
}

}  // namespace coexist::cli
