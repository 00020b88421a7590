// Faults on the coexist process and on the server: kill -9 and SIGTERM of
// `batch run`, PostgreSQL restarted (fast and immediate) under `batch run`
// and under `batch daemon`, and both under a range job's pass.

#include <signal.h>

#include <thread>

#include "tests/chaos/faults.h"

namespace coexist::chaos {
namespace {

using namespace std::chrono_literals;
using StopMode = db::TempCluster::StopMode;

// Iteration i of a fault that covers every policy with 1 and 4 workers:
// the ten combinations in turn.
JobShape EveryPolicyAndWorkers(Rng& rng, int iteration) {
  const auto& policies = AllPolicies();
  int n = static_cast<int>(policies.size());
  return RandomShape(rng, policies[static_cast<std::size_t>(iteration % n)],
                     (iteration / n) % 2 == 0 ? 1 : 4);
}

// A range job under each policy in turn, with 1 and 2 workers.
JobShape RangeEveryPolicy(Rng& rng, int iteration) {
  const auto& policies = AllPolicies();
  int n = static_cast<int>(policies.size());
  return RandomRangeShape(rng, policies[static_cast<std::size_t>(iteration % n)],
                          (iteration / n) % 2 == 0 ? 1 : 2);
}

JobShape AnyPolicy(Rng& rng, int /*iteration*/) {
  return RandomShape(rng, rng.Pick(AllPolicies()), rng.Chance(0.5) ? 1 : 4);
}

// kill -9 at a random moment, one to three times, each time on a fresh run
// (the next run marks the killed one abandoned and hands its rows back).
void KillNine(Trial& trial, Rng& rng, Findings& findings) {
  int kills = rng.Int(1, 3);
  for (int k = 1; k <= kills && trial.Pending() > 0; ++k) {
    Child run = trial.StartBatch("killed-" + std::to_string(k) + ".log");
    trial.WaitForRandomMoment(run, rng, /*early=*/true);
    findings.Status(DescribeStatus(run.Kill()));
  }
}

// SIGTERM once the run has its runs row (so its handler is there): it must
// stop claiming, let the chunks in flight commit and exit 0 or 2 with its
// runs row finished. Sometimes a second SIGTERM follows at once: then it may
// exit at once (143), its row left to the next run.
void Terminate(Trial& trial, Rng& rng, Findings& findings) {
  Child run = trial.StartBatch("terminated.log");
  std::string started =
      "SELECT count(*) FROM coexist.runs WHERE pid = " + std::to_string(run.pid());
  while (run.Running() && trial.TryCount(started) < 1) std::this_thread::sleep_for(5ms);
  trial.WaitForRandomMoment(run, rng, /*early=*/false);
  bool twice = rng.Chance(0.25);
  run.Signal(SIGTERM);
  if (twice) {
    std::this_thread::sleep_for(rng.Ms(0, 50));
    run.Signal(SIGTERM);
  }
  auto status = ExpectExit(run, 30s, "sigterm_stops", "batch run after SIGTERM", findings);
  if (!status) return;
  findings.Status(DescribeStatus(*status));
  bool allowed = *status == 0 || *status == 2 || (twice && *status == 128 + SIGTERM);
  if (!allowed) {
    findings.Add("sigterm_exit_status", "batch run exited " + std::to_string(*status) + " after " +
                                            (twice ? "two SIGTERMs" : "one SIGTERM") +
                                            ", not 0 or 2 (" + run.log().string() + "):\n" +
                                            run.LogTail());
  }
  if ((*status == 0 || *status == 2) &&
      trial.Count("SELECT count(*) FROM coexist.runs WHERE outcome = 'running' AND pid = " +
                  std::to_string(run.pid())) > 0) {
    findings.Add("sigterm_run_finished", "batch run exited " + std::to_string(*status) +
                                             " after SIGTERM but left its runs row 'running'");
  }
}

// The server restarted under `batch run`: the run must end (75: the
// database went away; 0 or 2 when it had finished before) instead of
// waiting for ever.
void RestartUnderRun(Trial& trial, Rng& rng, Findings& findings, StopMode mode) {
  Child run = trial.StartBatch("restarted.log");
  trial.WaitForRandomMoment(run, rng, /*early=*/true);
  trial.lab().RestartServer(mode, rng.Ms(0, 500));
  auto status =
      ExpectExit(run, 60s, "run_ends_after_restart", "batch run after the restart", findings);
  if (!status) return;
  findings.Status(DescribeStatus(*status));
  if (*status != 75 && *status != 0 && *status != 2) {
    findings.Add("restart_exit_status", "batch run exited " + std::to_string(*status) +
                                            " after a server restart, not 75 (" +
                                            run.log().string() + "):\n" + run.LogTail());
  }
}

// The server restarted (once or twice) under `batch daemon`: it must
// reconnect and drain the queue, then stop with 0 on SIGTERM.
void RestartUnderDaemon(Trial& trial, Rng& rng, Findings& findings, StopMode mode) {
  Child daemon = trial.StartDaemon("daemon.log");
  int restarts = rng.Int(1, 2);
  for (int r = 0; r < restarts; ++r) {
    trial.WaitForRandomMoment(daemon, rng, /*early=*/true);
    if (!daemon.Running()) break;
    trial.lab().RestartServer(mode, rng.Ms(0, 800));
  }
  auto deadline = std::chrono::steady_clock::now() + 90s;
  bool drained = false;
  while (!drained && daemon.Running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    drained = trial.Pending() == 0 &&
              trial.TryCount("SELECT count(*) FROM coexist.runs WHERE outcome = 'running'") == 0;
  }
  if (!daemon.Running()) {
    findings.Add("daemon_survives", "batch daemon exited " + std::to_string(*daemon.WaitFor(0ms)) +
                                        " after the restart (" + daemon.log().string() + "):\n" +
                                        daemon.LogTail());
  } else if (!drained) {
    findings.Add("daemon_drains",
                 "batch daemon did not drain the queue within 90 s of the restart: " +
                     std::to_string(trial.Pending()) + " items pending (" + daemon.log().string() +
                     "):\n" + daemon.LogTail());
  }
  daemon.Signal(SIGTERM);
  auto status = ExpectExit(daemon, 30s, "daemon_stops", "batch daemon after SIGTERM", findings);
  if (status) {
    findings.Status(DescribeStatus(*status));
    if (*status != 0 && drained) {
      findings.Add("daemon_stops", "batch daemon exited " + std::to_string(*status) +
                                       " on SIGTERM, not 0 (" + daemon.log().string() + "):\n" +
                                       daemon.LogTail());
    }
  }
  if (!drained) trial.DrainWithCleanRuns(findings);
}

// A range job's pass under a random fault: kill -9 (once or twice), or the
// server restarted fast or immediately, each at a random moment of a run;
// the final clean runs then resume the pass from its checkpoints.
void RangeFaults(Trial& trial, Rng& rng, Findings& findings) {
  switch (rng.Int(0, 2)) {
    case 0:
      KillNine(trial, rng, findings);
      break;
    case 1:
      RestartUnderRun(trial, rng, findings, StopMode::kImmediate);
      break;
    default:
      RestartUnderRun(trial, rng, findings, StopMode::kFast);
  }
}

}  // namespace

std::optional<int> ExpectExit(Child& run, std::chrono::milliseconds timeout,
                              const std::string& invariant, const std::string& what,
                              Findings& findings) {
  auto status = run.WaitFor(timeout);
  if (status) return status;
  findings.Add(invariant, what + " still runs after " + std::to_string(timeout.count() / 1000) +
                              " s (" + run.log().string() + "):\n" + run.LogTail());
  run.Kill();
  return std::nullopt;
}

std::vector<Fault> ProcessFaults() {
  auto restart_run = [](StopMode mode) {
    return [mode](Trial& t, Rng& r, Findings& f) { RestartUnderRun(t, r, f, mode); };
  };
  auto restart_daemon = [](StopMode mode) {
    return [mode](Trial& t, Rng& r, Findings& f) { RestartUnderDaemon(t, r, f, mode); };
  };
  return {
      {"kill9", "kill -9 of batch run at random moments (every policy, 1 and 4 workers)", 10,
       EveryPolicyAndWorkers, KillNine},
      {"sigterm", "SIGTERM (sometimes twice) of batch run at a random moment", 5,
       EveryPolicyAndWorkers, Terminate},
      {"restart_fast_run", "pg_ctl stop -m fast + start under batch run", 3, AnyPolicy,
       restart_run(StopMode::kFast)},
      {"restart_immediate_run", "pg_ctl stop -m immediate + start under batch run", 3, AnyPolicy,
       restart_run(StopMode::kImmediate)},
      {"restart_fast_daemon", "-m fast restarts under batch daemon: it reconnects and drains", 2,
       AnyPolicy, restart_daemon(StopMode::kFast), false},
      {"restart_immediate_daemon",
       "-m immediate restarts under batch daemon: it reconnects and drains", 2, AnyPolicy,
       restart_daemon(StopMode::kImmediate), false},
      {"range", "a range job's pass (every policy, 1 and 2 workers): kill -9 or a server restart",
       5, RangeEveryPolicy, RangeFaults},
  };
}

const std::vector<Fault>& AllFaults() {
  static const std::vector<Fault> faults = [] {
    auto out = ProcessFaults();
    for (auto& fault : SessionFaults()) out.push_back(std::move(fault));
    return out;
  }();
  return faults;
}

}  // namespace coexist::chaos
