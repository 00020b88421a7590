#pragma once

// The invariants checked after every iteration (after the fault and the
// final clean runs), in SQL on the ledgers, the queue, the runs and the
// target. Each one is reported by name with the rows that break it.

#include "tests/chaos/findings.h"
#include "tests/chaos/trial.h"

namespace coexist::chaos {

// The invariants' names, in the order they are checked (docs/operations.md
// lists them).
const std::vector<std::string>& InvariantNames();

void CheckInvariants(Trial& trial, Findings& findings);

}  // namespace coexist::chaos
