#pragma once

// `coexist batch daemon`: a long-running worker for one job
// (docs/operations.md). It waits for work (LISTEN coexist_queue, notified on
// every enqueue, with a fallback poll every daemon.poll_interval), then runs
// the job (batch::Run) until the queue is drained, honouring the policy's
// windows; another run holding the job makes it wait and retry; a lost
// database makes it reconnect with capped exponential backoff.
//
// Signals: SIGTERM/SIGINT drain (the run in flight finishes its chunks,
// claims nothing new, returns) and the daemon exits 0; a second one exits
// at once (common/signals.h). SIGHUP re-reads the configuration file: a file
// that fails to load is logged with its file:line:column error and the old
// configuration kept; a good one applies from the next run, which starts at
// once. batch.job, database.url and metrics.listen need a restart.
//
// systemd: READY=1 after the first connection, STATUS= with live counts,
// WATCHDOG=1 at half of WatchdogSec, STOPPING=1 on the stop signal.
// Metrics: cumulative counters on GET /metrics when metrics.listen is set;
// metrics.textfile after every run, as `batch run` writes it.
//
// Thread safety: call RunDaemon from the main thread, after
// signals::Install(), once per process.

#include <string>

#include "config/config.h"

namespace coexist::daemon {

struct DaemonSettings {
  std::string conninfo;     // the server, resolved once by the caller
  std::string config_path;  // re-read on SIGHUP
  // Install migrations, triggers and windows on start and after a reload
  // (batch::RunOptions::install); false for a role that may not create them.
  bool install = true;
};

// Runs until SIGTERM/SIGINT and returns the exit status: 0 after a clean
// drain. Throws config::ConfigError when the starting configuration is
// rejected by the database (bad operation SQL: exit 78),
// db::ConnectionSettingsError (78) when libpq refuses a connection setting
// (sslmode=bogus, also from PG* variables: never retried), and
// UnavailableError when metrics.listen cannot be bound.
int RunDaemon(const DaemonSettings& settings, config::Config config);

}  // namespace coexist::daemon
