#pragma once

// What one iteration of a fault found: invariant violations (each names
// the invariant and carries its evidence) and, for the table, the exit
// statuses of the processes the fault hit.

#include <map>
#include <string>
#include <vector>

namespace coexist::chaos {

struct Violation {
  std::string invariant;  // e.g. "applied_once"
  std::string evidence;   // rows or log lines that show it
};

struct Findings {
  std::vector<Violation> violations;
  // "75" -> how many faulted processes exited with 75 ("killed" for kill -9).
  std::map<std::string, int> statuses;

  void Add(std::string invariant, std::string evidence) {
    violations.push_back({std::move(invariant), std::move(evidence)});
  }
  void Status(const std::string& status) { ++statuses[status]; }
};

}  // namespace coexist::chaos
