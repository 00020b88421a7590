// coexist dashboard [--listen HOST:PORT] [--control-token-file FILE]
// [--allow-remote]: serves the live dashboard (dashboard/server.h) until
// SIGINT or SIGTERM.

#include <CLI/CLI.hpp>
#include <condition_variable>
#include <iostream>
#include <mutex>

#include "cli/context.h"
#include "common/error.h"
#include "common/signals.h"
#include "config_core/listen_address.h"
#include "dashboard/server.h"

namespace coexist::cli {

void AddDashboardCommand(CLI::App& app, Context& context, int& exit_code) {
  auto* command = app.add_subcommand(
      "dashboard",
      "Serve a live web page of every job's progress and ETA, the recent runs and events, and "
      "the paced runs' online latency, refreshed every 2 s; read-only unless "
      "--control-token-file turns on pause and resume (docs/operations.md, \"The dashboard\")");
  static std::string listen = "127.0.0.1:9190";
  static std::string token_file;
  static bool allow_remote = false;
  command->add_option("--listen", listen, "HOST:PORT to serve on (default 127.0.0.1:9190)");
  command->add_option("--control-token-file", token_file,
                      "a file holding the token the page's pause and resume buttons must send");
  command->add_flag("--allow-remote", allow_remote,
                    "listen on an address other hosts can reach (there is no TLS: put it behind "
                    "a proxy that has)");
  command->callback([&] {
    std::string host;
    int port = 0;
    if (!config::SplitHostPort(listen, host, port)) {
      throw UsageError("--listen '" + listen + "' is not HOST:PORT",
                       "write e.g. 127.0.0.1:9190 or [::1]:9190.");
    }
    if (!allow_remote && !config::IsLoopback(host)) {
      throw UsageError("--listen '" + host + "' is not a loopback address",
                       "the page has no TLS and shows every job; listen on 127.0.0.1 and reach "
                       "it through a proxy or an SSH tunnel, or pass --allow-remote.");
    }
    dashboard::DashboardOptions options;
    options.listen = listen;
    options.conninfo = context.Server().conninfo();
    // The token is a secret: read from a file (never the command line,
    // which `ps` shows), never printed.
    if (!token_file.empty()) options.control_token = dashboard::ReadControlToken(token_file);
    std::mutex mutex;
    std::condition_variable stopped;
    bool stop = false;
    signals::Handler handler([&](int) {
      std::lock_guard lock(mutex);
      stop = true;
      stopped.notify_all();
    });
    dashboard::DashboardServer server(options);
    std::cout << "dashboard: http://"
              << (host.find(':') != std::string::npos ? "[" + host + "]" : host) << ":"
              << server.port() << "/"
              << (options.control_token ? " (pause and resume on)" : " (read-only)") << std::endl;
    std::unique_lock lock(mutex);
    stopped.wait(lock, [&] { return stop; });
    exit_code = 0;
  });
}

}  // namespace coexist::cli
