// coexist ctl: steers a running batch through its control socket.

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/context.h"
#include "common/error.h"
#include "pacing/control_socket.h"

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

}  // namespace

void AddCtlCommand(CLI::App& app, Context& context, int& exit_code) {
  auto* ctl = app.add_subcommand(
      "ctl",
      "Steer a running batch through its control socket: status, pause, resume, stop, "
      "chunk-time=DURATION, chunk-size=N, max-load=N or max-load=SIGNAL=VALUE. Prints the "
      "batch's one-line JSON answer");
  static std::string socket_path;
  static std::string command;
  ctl->add_option("--socket", socket_path,
                  "the control socket (default: pacing.control_socket of --config)");
  ctl->add_option("command", command, "the command to send")->required();
  ctl->callback([&] {
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
