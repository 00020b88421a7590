#pragma once

// coexist::online_sim — virtual online users that edit the target's rows the
// way web users do (docs/online-sim.md). This header is all a caller needs;
// Boost.Asio and libpq stay inside the library.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.h"
#include "config_core/target.h"

namespace coexist::online_sim {

// Once a tick (RunOptions::tick_interval, a second by default) during a run:
// figures of the tick just past.
struct Tick {
  double seconds = 0;                         // since the load started
  long long transactions = 0;                 // since the load started
  double tps = 0;                             // in the last tick
  long long not_ok = 0;                       // since the load started: outcomes other than ok
  double p50_ms = 0, p95_ms = 0, p99_ms = 0;  // every kind, last tick
  double pool_wait_p95_ms = 0;                // since the load started
};

struct RunOptions {
  // How long users start new transactions; running ones then finish.
  std::chrono::milliseconds duration = std::chrono::seconds(60);
  // Called on the simulator's thread once a tick (keep it short).
  std::function<void(const Tick&)> on_tick;
  // How often on_tick (and the progress line) come: a second, or less for a
  // finer timeline (simulate ticks every 100 ms while the batch runs).
  std::chrono::milliseconds tick_interval = std::chrono::seconds(1);
  // Closed model only: each user stops after this many transactions (the
  // reserve scenario); the duration still bounds the run.
  std::optional<long long> transactions_per_user;
  // Where the once-a-tick progress line goes; null: nowhere.
  std::ostream* progress = nullptr;
  // Skip the end-of-run lost-update check (e.g. when another writer such as
  // the batch changes the value column at the same time). A run whose custom
  // kinds have weight skips it too (LostUpdateCheck::skipped says so).
  bool check_lost_updates = true;
};

struct LatencyFigures {
  long long count = 0;
  double mean_ms = 0, p50_ms = 0, p95_ms = 0, p99_ms = 0, max_ms = 0;
};

struct KindReport {
  std::string kind;
  double weight = 0;
  long long transactions = 0;
  std::map<std::string, long long> outcomes;  // outcome name -> count (zeros left out)
  std::map<std::string, long long> other_sqlstates;
  long long conflicts = 0, retried = 0, renewals = 0;
  LatencyFigures latency;
};

// Seed 001's `lost` column, per key: the edits reported saved should have
// moved the value column by `expected_change`; the database moved it by
// `actual_change`. Keys whose last write's outcome is unknown (connection
// lost during COMMIT) are left out and counted in `keys_in_doubt`.
struct LostUpdateCheck {
  bool performed = false;
  // Why it was not performed though asked for; empty otherwise. Custom kinds
  // change the value column in ways the simulator cannot follow.
  std::string skipped;
  long long keys_checked = 0;
  long long keys_in_doubt = 0;
  long long keys_mismatched = 0;
  long long expected_change = 0;
  long long actual_change = 0;
  // Sum over keys of |expected - actual|: edits that were reported saved
  // but whose effect is gone. 0 unless blind writes (nolock) ran.
  long long lost = 0;
};

struct Report {
  config::LoadModel model = config::LoadModel::kClosed;
  int users = 0;
  double rate = 0;
  int pool_size = 0;
  long long seed = 0;
  bool interrupted = false;  // stopped early by Ctrl-C / SIGTERM
  double elapsed_seconds = 0;
  long long transactions = 0;
  double throughput = 0;  // transactions per second
  std::vector<KindReport> kinds;
  std::map<std::string, long long> outcomes;  // all kinds together
  LatencyFigures latency;                     // all kinds together
  LatencyFigures pool_wait;
  LatencyFigures schedule_lag;  // open model
  long long late = 0;
  std::chrono::milliseconds latency_limit{0};
  long long reconnects = 0;
  LostUpdateCheck lost_check;
};

// One simulation run against a server. Construct, Prepare(), Run().
class Simulator {
 public:
  Simulator(std::string conninfo, config::TargetTable target, config::OnlineConfig config,
            RunOptions options);
  ~Simulator();

  // Blocking checks and set-up before any load: the server is reachable
  // (TempFailError, 75), the pool fits its max_connections
  // (UnavailableError, 69), the target has the value column and records
  // (UnavailableError), and the pool's connections open (TempFailError).
  void Prepare();
  // Runs the load on the calling thread (one io_context thread) and returns
  // the figures; after Stop() it returns early with interrupted = true.
  Report Run();
  // Thread-safe, non-blocking: e.g. from a signals::Handler.
  void Stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Writes the final table (per kind: outcomes, latency; pool wait; lost check).
void PrintReport(std::ostream& out, const Report& report);
// The report as JSON text (every figure above).
std::string ReportJson(const Report& report);

}  // namespace coexist::online_sim
