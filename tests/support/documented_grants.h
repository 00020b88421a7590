#pragma once

// The GRANTs of docs/operations.md ("Database roles (least privilege)"), as
// written there (the indented SQL of that section), with the roles renamed
// (the watching role coexist_monitor to BATCH_ROLE_monitor):
// tests and the chaos suite run the documented roles, not a copy of them.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace coexist::testing {

inline std::string DocumentedGrants(const std::filesystem::path& source_dir,
                                    const std::string& online_role, const std::string& batch_role) {
  std::ifstream doc(source_dir / "docs" / "operations.md");
  std::string sql;
  bool in_section = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.starts_with("## ")) in_section = line == "## Database roles (least privilege)";
    if (in_section && line.starts_with("    ")) sql += line.substr(4) + "\n";
  }
  // The watching role is named after the batch role, so each test's is its own.
  for (auto [from, to] : {std::pair{std::string("app_online"), online_role},
                          std::pair{std::string("coexist_batch"), batch_role},
                          std::pair{std::string("coexist_monitor"), batch_role + "_monitor"}}) {
    for (size_t at; (at = sql.find(from)) != std::string::npos;) sql.replace(at, from.size(), to);
  }
  return sql;
}

}  // namespace coexist::testing
