#pragma once

// The faults the chaos suite injects. Each one picks its job's shape, then
// runs coexist processes against the trial's database and hurts them (or the
// server, or the sessions around them); the driver then runs the final
// clean `batch run`s and checks the invariants (invariants.h).
//
// A fault may add violations of its own: a process that does not stop when
// it should, a daemon that does not drain, the simulator losing an update.

#include <functional>
#include <string>
#include <vector>

#include "tests/chaos/findings.h"
#include "tests/chaos/rng.h"
#include "tests/chaos/trial.h"

namespace coexist::chaos {

struct Fault {
  std::string name;
  std::string summary;
  int short_iterations = 2;  // the CI loop (--short)
  // The job of iteration `iteration` (faults that must cover every policy
  // and worker count cycle through them).
  std::function<JobShape(Rng&, int iteration)> shape;
  std::function<void(Trial&, Rng&, Findings&)> inject;
  // false: the fault itself drains the queue (the daemon) and the final
  // clean runs happen only when it did not.
  bool final_clean_run = true;
};

// Every fault, in the table's order.
const std::vector<Fault>& AllFaults();

// The two halves (faults_process.cpp, faults_sessions.cpp).
std::vector<Fault> ProcessFaults();
std::vector<Fault> SessionFaults();

// Wait helpers shared by the faults.
// Status of `run` once it exits within `timeout`; otherwise a violation
// named `invariant` (with its log), the process killed, and nullopt.
std::optional<int> ExpectExit(Child& run, std::chrono::milliseconds timeout,
                              const std::string& invariant, const std::string& what,
                              Findings& findings);

}  // namespace coexist::chaos
