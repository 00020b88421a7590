#include "policies/batch_priority.h"

#include "config_core/duration.h"
#include "config_core/yaml_reader.h"

namespace coexist::policies {

using std::chrono::hours;

BatchPriority::Options BatchPriority::ReadOptions(config::Section& s, const ReadContext& context) {
  Options out;
  const YAML::Node& node = s.node();
  s.Duration("cancel_after", out.cancel_after, milliseconds(0), hours(1));
  s.Duration("terminate_after", out.terminate_after, milliseconds(0), hours(1));
  s.String("online_application_name", out.online_application_name);
  // Only %, _ (or nothing): every application's sessions would be signalled.
  if (out.online_application_name.find_first_not_of("%_") == std::string::npos) {
    s.Fail(node["online_application_name"], "online_application_name",
           "'" + out.online_application_name +
               "' matches the sessions of any application, not just the online one",
           "the batch cancels and terminates the blockers it matches; write the online "
           "application's application_name, e.g. coexist-online% or webshop-%.");
  }
  size_t escapes = 0;
  for (auto c = out.online_application_name.rbegin();
       c != out.online_application_name.rend() && *c == '\\'; ++c) {
    ++escapes;
  }
  if (escapes % 2 == 1) {
    s.Fail(node["online_application_name"], "online_application_name",
           "'" + out.online_application_name + "' ends with LIKE's escape character",
           "write \\\\ for a literal backslash.");
  }
  if (out.terminate_after < out.cancel_after) {
    bool given = node["terminate_after"].IsDefined();
    s.Fail(node[given ? "terminate_after" : "cancel_after"],
           given ? "terminate_after" : "cancel_after",
           "terminate_after (" + config::FormatDuration(out.terminate_after) +
               ") is shorter than cancel_after (" + config::FormatDuration(out.cancel_after) + ")",
           "the batch cancels first and terminates later; make terminate_after the longer one.");
  }
  if (LikeMatches(out.online_application_name, context.batch_application_name)) {
    std::string message = "'" + out.online_application_name +
                          "' matches the batch's own application_name '" +
                          context.batch_application_name + "'";
    std::string hint =
        "the batch must never signal its own sessions; make online_application_name name "
        "only the online application, or change database.application_name.";
    if (node["online_application_name"].IsDefined()) {
      s.Fail(node["online_application_name"], "online_application_name", message, hint);
    }
    throw config::ConfigError(context.batch_application_name_at, "database.application_name",
                              message, hint);
  }
  return out;
}

Decision BatchPriority::Decide(const RecordFacts& facts) const {
  if (facts.edit_locked) return {Action::kRevokeEditLock};
  if (!facts.row_locked) return {Action::kApply};
  if (facts.blockers_seen && !facts.blockers_are_online) {
    return {Action::kDefer, "blocker_not_online"};
  }
  if (facts.waited >= options_.terminate_after + Grace()) {
    return {Action::kDefer, "still_locked"};
  }
  milliseconds step = NextStep(config_, facts.waited);
  if (facts.blockers_seen && facts.waited >= options_.terminate_after) {
    return {Action::kTerminateBlocker, "", step};
  }
  if (facts.blockers_seen && facts.waited >= options_.cancel_after) {
    return {Action::kCancelBlocker, "", step};
  }
  return {Action::kWaitRowLock, "", step};
}

// Greedy with backtracking to the last %, so O(pattern x text).
bool LikeMatches(std::string_view pattern, std::string_view text) {
  constexpr size_t kNone = std::string_view::npos;
  size_t p = 0;
  size_t t = 0;
  size_t star = kNone;  // pattern position after the last %
  size_t resume = 0;    // text position that % is tried from next
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '%') {
      star = ++p;
      resume = t;
      continue;
    }
    if (p < pattern.size()) {
      bool escaped = pattern[p] == '\\' && p + 1 < pattern.size();
      char want = escaped ? pattern[p + 1] : pattern[p];
      if ((!escaped && want == '_') || want == text[t]) {
        p += escaped ? 2 : 1;
        ++t;
        continue;
      }
    }
    if (star == kNone) return false;
    p = star;
    t = ++resume;
  }
  while (p < pattern.size() && pattern[p] == '%') ++p;
  return p == pattern.size();
}

}  // namespace coexist::policies
