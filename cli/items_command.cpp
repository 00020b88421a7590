// coexist items cancel|skip|retry|reschedule --job J FILTERS: an operator's
// action on chosen items of one job's queue, audited, never on an item a
// live run holds (schema/item_actions.h; docs/operations.md, "Acting on
// items").

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "admin/edit_locks.h"
#include "cli/context.h"
#include "common/error.h"
#include "config_core/duration.h"
#include "db/connection.h"
#include "db/target_table.h"
#include "schema/item_actions.h"

namespace coexist::cli {
namespace {

struct ItemsFlags {
  std::string job;
  std::vector<std::string> keys;
  std::vector<std::string> states;
  std::string reason;
  std::string since;
  bool all = false;
  std::string at;
  std::string in;
  std::string why;
  std::string by;
  bool dry_run = false;
  int sample = 10;
  int limit = 50;
  bool json = false;
};

std::string Join(const std::vector<std::string>& values, const char* separator = ", ") {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : separator) + v;
  return out;
}

// "queued 7, dead 2"
std::string ByState(const std::map<std::string, long long>& counts) {
  std::string out;
  for (const auto& state : db::ItemStates()) {
    auto it = counts.find(state);
    if (it == counts.end() || it->second == 0) continue;
    out += (out.empty() ? "" : ", ") + state + " " + std::to_string(it->second);
  }
  return out;
}

std::chrono::milliseconds DurationOf(const std::string& option, const std::string& value) {
  auto parsed = config::ParseDuration(value);
  if (!parsed) {
    throw UsageError(option + " '" + value + "' is not a duration",
                     "e.g. " + option + " 30m, or 2h, or 1d; nothing was changed.");
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
}

// The filters of the command line (keys aside: KeysOf); UsageError (64)
// for a state or duration it cannot be.
db::ItemFilter FilterOf(const ItemsFlags& f) {
  db::ItemFilter filter;
  filter.job = f.job;
  filter.states = f.states;
  filter.reason = f.reason;
  for (const auto& state : f.states) {
    const auto& all = db::ItemStates();
    if (std::find(all.begin(), all.end(), state) == all.end()) {
      throw UsageError("--state '" + state + "' is not an item state",
                       "give one of " + Join(all) + "; nothing was changed.");
    }
  }
  if (!f.since.empty()) {
    if (config::ParseDuration(f.since)) {
      filter.since_age = DurationOf("--since", f.since);
    } else {
      filter.since_time = f.since;
    }
  }
  return filter;
}

// The command line as a request; UsageError (64) for what it cannot be.
db::ItemActionRequest RequestOf(db::ItemAction action, const ItemsFlags& f) {
  db::ItemActionRequest r;
  r.action = action;
  r.filter = FilterOf(f);
  const std::string verb(db::ToString(action));
  bool filtered = !f.keys.empty() || !f.states.empty() || !f.reason.empty() || !f.since.empty();
  if (!filtered && !f.all) {
    throw UsageError("items " + verb + " needs a filter besides --job",
                     "give --key, --state, --reason or --since (see --dry-run), or --all to " +
                         verb + " every item of job " + f.job + " it applies to.");
  }
  if (filtered && f.all) {
    throw UsageError("--all and a filter (--key, --state, --reason, --since) exclude each other",
                     "give --all alone to " + verb + " every item of the job, else the filters.");
  }
  bool needs_why = action == db::ItemAction::kCancel || action == db::ItemAction::kSkip;
  if (needs_why && f.why.find_first_not_of(" \t") == std::string::npos) {
    throw UsageError("items " + verb + " needs --why TEXT",
                     "say why, for the audit trail (coexist events --kind items_" +
                         std::string(action == db::ItemAction::kCancel ? "cancelled" : "skipped") +
                         "); nothing was changed.");
  }
  if (action == db::ItemAction::kReschedule) {
    if (f.at.empty() == f.in.empty()) {
      throw UsageError("items reschedule needs exactly one of --at TIMESTAMP and --in DURATION",
                       "e.g. --in 2h, or --at '2026-12-06 22:00+00'; nothing was changed.");
    }
    if (!f.in.empty()) r.in = DurationOf("--in", f.in);
    if (!f.at.empty()) r.at = f.at;
  }
  r.actor = f.by.empty() ? admin::CurrentActor() : f.by;
  r.why = f.why;
  r.dry_run = f.dry_run;
  r.sample = f.sample;
  return r;
}

// The job's keys as enqueue stores them: cast through the target key
// column's type, which only the job's configuration names.
std::vector<std::string> KeysOf(Context& context, pqxx::connection_base& conn,
                                const ItemsFlags& f) {
  if (f.keys.empty()) return {};
  if (!context.HasConfigFile()) {
    throw UsageError("--key needs the job's configuration (--config FILE)",
                     "a key is read as the target's key column types it, as enqueue does; give "
                     "the configuration of job " +
                         f.job + ".");
  }
  const auto& config = context.Config();
  if (config.batch.job_given && config.batch.job != f.job) {
    throw UsageError(
        "--job " + f.job + " is not the configuration's job (batch.job: " + config.batch.job + ")",
        "give the configuration of job " + f.job + ", or --job " + config.batch.job +
            "; nothing was changed.");
  }
  std::string key_type;
  {
    pqxx::read_transaction tx(conn);
    key_type = db::KeyTypeOf(tx, config.target);
  }
  return db::CanonicalKeys(conn, key_type, f.keys);
}

std::string Filter(const ItemsFlags& f) {
  std::vector<std::string> parts;
  for (const auto& k : f.keys) parts.push_back("--key " + k);
  for (const auto& s : f.states) parts.push_back("--state " + s);
  if (!f.reason.empty()) parts.push_back("--reason '" + f.reason + "'");
  if (!f.since.empty()) parts.push_back("--since " + f.since);
  if (f.all) parts.push_back("--all");
  return Join(parts, " ");
}

// "3 items are held by a live run (run 12): left alone"
std::string HeldLine(const db::ItemActionResult& r) {
  std::vector<std::string> runs;
  for (auto id : r.running_runs) runs.push_back(std::to_string(id));
  std::string by = runs.empty()                 ? "a run that has just finished with them"
                   : r.running_runs.size() == 1 ? "the job's live run (run " + runs[0] + ")"
                                                : "the job's live runs (runs " + Join(runs) + ")";
  return fmt::format("{} item{} {} being worked by {}: left alone", r.held, r.held == 1 ? "" : "s",
                     r.held == 1 ? "is" : "are", by);
}

nlohmann::json ResultJson(db::ItemAction action, const ItemsFlags& f,
                          const db::ItemActionResult& r) {
  nlohmann::json sample = nlohmann::json::array();
  for (const auto& [id, key] : r.sample) sample.push_back({{"item_id", id}, {"key", key}});
  nlohmann::json out = {{"action", std::string(db::ToString(action))},
                        {"job", f.job},
                        {"dry_run", f.dry_run},
                        {"matched", r.matched},
                        {"changed", r.changed_total},
                        {"changed_by_state", r.changed},
                        {"held", r.held},
                        {"running_runs", r.running_runs},
                        {"items", sample},
                        {"event_id", nullptr}};
  if (r.event_id != 0) out["event_id"] = r.event_id;
  if (!r.not_before.empty()) out["not_before"] = r.not_before;
  return out;
}

std::string PastTense(db::ItemAction action) {
  switch (action) {
    case db::ItemAction::kCancel:
      return "cancelled";
    case db::ItemAction::kSkip:
      return "skipped (marked done, not applied)";
    case db::ItemAction::kRetry:
      return "queued again";
    case db::ItemAction::kReschedule:
      return "rescheduled";
  }
  return "";
}

void PrintResult(db::ItemAction action, const ItemsFlags& f, const db::ItemActionResult& r) {
  long long matched = 0;
  for (const auto& [state, n] : r.matched) matched += n;
  std::cout << fmt::format("job {}: {} item{} matched ({})\n", f.job, matched,
                           matched == 1 ? "" : "s", ByState(r.matched));
  std::string done = f.dry_run ? "would be " + PastTense(action) : PastTense(action);
  std::cout << r.changed_total << ' ' << done;
  if (r.changed_total > 0) std::cout << " (" << ByState(r.changed) << ")";
  if (!r.not_before.empty()) std::cout << ": not claimed before " << r.not_before;
  std::cout << '\n';
  if (!r.sample.empty()) {
    std::vector<std::string> items;
    for (const auto& [id, key] : r.sample) items.push_back(fmt::format("{} (key {})", id, key));
    std::cout << "first items: " << Join(items) << '\n';
  }
  if (r.held > 0) std::cout << HeldLine(r) << '\n';
  if (f.dry_run) {
    std::cout << "dry run: nothing was changed\n";
  } else if (r.event_id != 0) {
    std::cout << "audited: event " << r.event_id << " (coexist events --job " << f.job << ")\n";
  }
}

int Act(Context& context, db::ItemAction action, const ItemsFlags& f) {
  auto request = RequestOf(action, f);
  auto conn = db::Connect(context.Server(), "coexist-admin");
  request.filter.keys = KeysOf(context, *conn, f);
  auto result = db::ActOnItems(*conn, request);
  const std::string verb(db::ToString(action));
  if (!result.job_known) {
    throw Error(ExitCode::kDataError,
                "job '" + f.job +
                    "' is unknown here: no queue item, done item, run or range checkpoint names it",
                "`coexist jobs` lists the jobs this database knows (a job's name is batch.job of "
                "its configuration); nothing was changed.");
  }
  std::string hint_list = "`coexist items list --job " + f.job +
                          "` lists the job's items (with the same filters), `coexist queue "
                          "status --job " +
                          f.job +
                          "` counts them by state; done items leave the queue, and no action "
                          "applies to them.";
  if (result.matched.empty()) {
    throw Error(ExitCode::kDataError,
                "no item of job " + f.job + " matches " + Filter(f) + ": nothing was changed",
                hint_list);
  }
  auto applies = db::StatesOf(action);
  long long matched = 0;
  for (const auto& [state, n] : result.matched) matched += n;
  long long applicable = result.changed_total + result.held;
  if (applicable == 0) {
    throw Error(ExitCode::kDataError,
                "items " + verb + " applies to " + Join(applies, ", ") + " items; the " +
                    std::to_string(matched) + " item" + (matched == 1 ? "" : "s") + " of job " +
                    f.job + " that match " + Filter(f) + (matched == 1 ? " is " : " are ") +
                    ByState(result.matched) + ": nothing was changed",
                "choose the items with --state (" + Join(applies, ", ") + "); " + hint_list);
  }
  if (f.json) {
    std::cout << ResultJson(action, f, result).dump(2) << '\n';
  } else {
    PrintResult(action, f, result);
  }
  if (result.changed_total == 0) {
    // Everything it applies to is in a live run's hands: later, they may be free.
    if (!f.json) {
      std::cerr << "nothing was changed: every matching item is in a live run's hands\n"
                << "HINT: try again once the run has finished with them (`coexist jobs`), or "
                   "`coexist jobs pause "
                << f.job << " --reason ...` first.\n";
    }
    return ToInt(ExitCode::kTempFail);
  }
  return 0;
}

void AddAction(CLI::App& items, Context& context, int& exit_code, ItemsFlags& f,
               db::ItemAction action, const std::string& help) {
  auto* cmd = items.add_subcommand(std::string(db::ToString(action)), help);
  cmd->add_option("--job", f.job, "the job (batch.job); an action never spans jobs")->required();
  cmd->add_option("--key", f.keys,
                  "an item naming this record key (repeatable); read as the target's key type, "
                  "so it needs --config");
  cmd->add_option("--state", f.states,
                  "items in this state (repeatable): queued, deferred, done, dead, cancelled");
  cmd->add_option("--reason", f.reason,
                  "items whose last error or deferral reason contains TEXT (any case)");
  cmd->add_option("--since", f.since,
                  "items updated this recently (a duration, e.g. 2h) or from this time on (a "
                  "timestamp, e.g. '2026-12-06 08:00+00')");
  cmd->add_flag("--all", f.all, "every item of the job the action applies to (no filter)");
  if (action == db::ItemAction::kReschedule) {
    cmd->add_option("--at", f.at, "not claimed before this time (a timestamp)");
    cmd->add_option("--in", f.in, "not claimed before now + this duration (e.g. 2h)");
  }
  bool needs_why = action == db::ItemAction::kCancel || action == db::ItemAction::kSkip;
  cmd->add_option("--why", f.why,
                  needs_why ? "why, for the audit trail (required)" : "why, for the audit trail");
  cmd->add_option("--by", f.by, "who, for the audit trail (default admin:<OS user>@<host>)");
  cmd->add_flag("--dry-run", f.dry_run,
                "print what would change (counts by state, the first items) and change nothing");
  cmd->add_option("--sample", f.sample, "how many of the changed items to print (default 10)")
      ->check(CLI::Range(0, 10000));
  cmd->add_flag("--json", f.json, "print JSON");
  cmd->callback([&context, &exit_code, &f, action] { exit_code = Act(context, action, f); });
}

int List(Context& context, const ItemsFlags& f) {
  auto filter = FilterOf(f);
  auto conn = db::Connect(context.Server(), "coexist-admin");
  filter.keys = KeysOf(context, *conn, f);
  auto rows = db::ListItems(*conn, filter, f.limit);
  if (f.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) {
      out.push_back({{"item_id", r.item_id},
                     {"record_key", r.record_key},
                     {"record_keys",
                      r.record_keys.empty() ? nlohmann::json() : nlohmann::json(r.record_keys)},
                     {"state", r.state},
                     {"attempts", r.attempts},
                     {"last_error", r.last_error},
                     {"defer_reason", r.defer_reason},
                     {"not_before", r.not_before},
                     {"updated_at", r.updated_at}});
    }
    std::cout << out.dump(2) << '\n';
    return 0;
  }
  constexpr const char* kRow = "{:>10} {:<16} {:<9} {:>8} {:<25} {:<25} {}\n";
  std::cout << fmt::format(kRow, "item", "key", "state", "attempts", "updated", "not before",
                           "error / deferral reason");
  for (const auto& r : rows) {
    std::string why = !r.last_error.empty() ? r.last_error : r.defer_reason;
    std::cout << fmt::format(kRow, r.item_id, r.record_keys.empty() ? r.record_key : r.record_keys,
                             r.state, r.attempts, r.updated_at, r.not_before,
                             why.substr(0, why.find('\n')));
  }
  std::cout << rows.size() << " item" << (rows.size() == 1 ? "" : "s")
            << (static_cast<int>(rows.size()) == f.limit ? " (the first, by item id: --limit)" : "")
            << '\n';
  return 0;
}

void AddList(CLI::App& items, Context& context, int& exit_code, ItemsFlags& f) {
  auto* cmd = items.add_subcommand(
      "list", "List the job's queue items that match the filters, by item id (read only)");
  cmd->add_option("--job", f.job, "the job (batch.job)")->required();
  cmd->add_option("--key", f.keys, "an item naming this record key (repeatable; needs --config)");
  cmd->add_option("--state", f.states, "items in this state (repeatable)");
  cmd->add_option("--reason", f.reason,
                  "items whose last error or deferral reason contains TEXT (any case)");
  cmd->add_option("--since", f.since, "items updated this recently (2h) or from this time on");
  cmd->add_option("--limit", f.limit, "how many (default 50)")->check(CLI::Range(1, 100000));
  cmd->add_flag("--json", f.json, "print JSON");
  cmd->callback([&context, &exit_code, &f] { exit_code = List(context, f); });
}

}  // namespace

void AddItemsCommand(CLI::App& app, Context& context, int& exit_code) {
  static ItemsFlags flags;
  auto* items = app.add_subcommand(
      "items",
      "List, or act on, chosen items of one job's queue: cancel, skip, retry, reschedule; "
      "audited (one event per action), never on an item a live run holds");
  items->require_subcommand(1);
  AddList(*items, context, exit_code, flags);
  AddAction(*items, context, exit_code, flags, db::ItemAction::kCancel,
            "The items will never be run (queued, deferred or dead -> cancelled); `items retry` "
            "puts them back");
  AddAction(*items, context, exit_code, flags, db::ItemAction::kSkip,
            "Mark the items done without applying the operation (queued, deferred or dead -> "
            "done): the records were handled another way");
  AddAction(*items, context, exit_code, flags, db::ItemAction::kRetry,
            "Queue the items again now (dead, deferred or cancelled -> queued): attempts and "
            "timeouts reset, last error kept");
  AddAction(*items, context, exit_code, flags, db::ItemAction::kReschedule,
            "Claim the queued or deferred items not before --at TIMESTAMP or --in DURATION");
}

}  // namespace coexist::cli
