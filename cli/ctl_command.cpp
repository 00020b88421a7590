// coexist ctl: steers a running batch through its control socket.

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/context.h"
#include "common/error.h"
#include "pacing/control_socket.h"

namespace coexist::cli {

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
    if (path.empty() && context.HasConfigFile()) path = context.Config().pacing.control_socket;
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
