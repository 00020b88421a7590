#include "cli/status_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace coexist::cli {

void PrintStatus(std::ostream& out, const db::Status& s, const db::Server& server) {
  auto line = [&](const char* label, const std::string& text) {
    out << fmt::format("{:<12}{}\n", label, text);
  };
  line("database", server.Describe() + " (" + db::ToString(server.source()) + ")");
  line("server", "PostgreSQL " + s.server_version);
  if (s.installed_version == 0) {
    line("schema",
         fmt::format("coexist not installed (this binary carries version {})", s.latest_version));
  } else {
    line("schema", fmt::format("coexist version {} of {}{}", s.installed_version, s.latest_version,
                               s.installed_version == s.latest_version ? " (up to date)"
                                                                       : " (run 'db install')"));
  }
  const char* label = "migrations";
  for (const auto& m : s.migrations) {
    line(label, fmt::format("{} applied {}", m.name, m.applied_at));
    label = "";
  }
  if (s.target_rows) {
    line("target", fmt::format("{}: {} rows, version trigger {}", s.target, *s.target_rows,
                               s.version_trigger ? "installed" : "MISSING"));
  } else {
    line("target", s.target + ": table does not exist");
  }
  if (s.installed_version == 0) return;
  auto count = [&](const char* state) { return s.queue_by_state.at(state); };
  line("queue", fmt::format("queued {}, deferred {}, done {}, dead {}", count("queued"),
                            count("deferred"), count("done"), count("dead")) +
                    (count("cancelled") > 0 ? fmt::format(", cancelled {}", count("cancelled"))
                                            : std::string()));
  line("edit locks", fmt::format("{} live, {} expired", s.live_edit_locks, s.expired_edit_locks));
  line("runs", std::to_string(s.runs));
}

nlohmann::json StatusJson(const db::Status& s, const db::Server& server) {
  nlohmann::json migrations = nlohmann::json::array();
  for (const auto& m : s.migrations) {
    migrations.push_back({{"version", m.version}, {"name", m.name}, {"applied_at", m.applied_at}});
  }
  nlohmann::json out = {
      {"database", server.Describe()},
      {"source", db::ToString(server.source())},
      {"server_version", s.server_version},
      {"installed_version", s.installed_version},
      {"latest_version", s.latest_version},
      {"migrations", migrations},
      {"target",
       {{"name", s.target},
        {"rows", s.target_rows ? nlohmann::json(*s.target_rows) : nlohmann::json()},
        {"version_trigger", s.version_trigger}}},
      {"queue", s.queue_by_state},
      {"edit_locks", {{"live", s.live_edit_locks}, {"expired", s.expired_edit_locks}}},
      {"runs", s.runs},
  };
  return out;
}

}  // namespace coexist::cli
