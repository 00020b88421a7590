// coexist locks list|release|sweep, queue status|retry|purge, runs list|show|sweep:
// what operators use to see and repair state without writing SQL.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "admin/edit_locks.h"
#include "batch/runner.h"
#include "cli/context.h"
#include "common/error.h"
#include "common/log.h"
#include "config_core/duration.h"
#include "dashboard/state.h"
#include "db/connection.h"
#include "schema/events.h"
#include "schema/queue_store_ops.h"

namespace coexist::cli {
namespace {

struct AdminFlags {
  bool json = false;
  bool all = false;
  std::string target = "products";
  std::string record;  // the record's key, as text
  std::string owner;
  std::string older_than;
  std::string job;
  bool dead = false;
  int limit = 20;
  long long run_id = 0;
  std::string kind;
  std::string since;
};

nlohmann::json LockJson(const admin::EditLockRow& l) {
  return {{"target", l.target},         {"record_key", l.record_key},
          {"owner", l.owner},           {"acquired_at", l.acquired_at},
          {"expires_at", l.expires_at}, {"held_seconds", l.held_seconds},
          {"expired", l.expired}};
}

void PrintLocks(const std::vector<admin::EditLockRow>& locks, bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& l : locks) out.push_back(LockJson(l));
    std::cout << out.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("{:<20} {:>10} {:<20} {:<25} {:<25} {:>8}\n", "target", "record",
                           "owner", "acquired", "expires", "held_s");
  for (const auto& l : locks) {
    std::cout << fmt::format("{:<20} {:>10} {:<20} {:<25} {:<25} {:>8.0f}{}\n", l.target,
                             l.record_key, l.owner, l.acquired_at, l.expires_at, l.held_seconds,
                             l.expired ? " (expired)" : "");
  }
  std::cout << locks.size() << " lock" << (locks.size() == 1 ? "" : "s") << '\n';
}

int Release(Context& context, const AdminFlags& f, bool record_given) {
  admin::ReleaseSelector selector;
  int chosen = record_given + !f.owner.empty() + !f.older_than.empty();
  if (chosen != 1) {
    throw UsageError("locks release needs exactly one of --record, --owner, --older-than",
                     "e.g. coexist locks release --owner alice, or --older-than 2h.");
  }
  if (record_given) {
    selector.target = f.target;
    selector.record_key = f.record;
  }
  if (!f.owner.empty()) selector.owner = f.owner;
  if (!f.older_than.empty()) {
    auto parsed = config::ParseDuration(f.older_than);
    if (!parsed)
      throw UsageError("--older-than '" + f.older_than + "' is not a duration", "e.g. 30m, 2h.");
    selector.older_than = std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
  }
  auto conn = db::Connect(context.Server(), "coexist-admin");
  auto released = admin::ReleaseEditLocks(*conn, selector, admin::CurrentActor());
  PrintLocks(released, f.json);
  return 0;
}

void AddLocks(CLI::App& app, Context& context, int& exit_code, AdminFlags& f) {
  auto* locks =
      app.add_subcommand("locks", "Offline edit locks: list, release (audited), sweep expired");
  locks->require_subcommand(1);
  auto* list =
      locks->add_subcommand("list", "Who holds which edit lock, since when, expiring when");
  list->add_flag("--all", f.all, "include expired locks");
  list->add_flag("--json", f.json, "print JSON");
  list->callback([&] {
    auto conn = db::Connect(context.Server(), "coexist-admin");
    PrintLocks(admin::ListEditLocks(*conn, f.all), f.json);
    exit_code = 0;
  });
  auto* release = locks->add_subcommand(
      "release",
      "Release edit locks by record, by owner, or held longer than a duration; each "
      "release is recorded in coexist.events with who did it");
  auto* record = release->add_option("--record", f.record, "the record's key (with --target)");
  release->add_option("--target", f.target, "the record's table (default products)");
  release->add_option("--owner", f.owner, "every lock of this owner (session timeout)");
  release->add_option("--older-than", f.older_than, "locks held longer than this, e.g. 2h");
  release->add_flag("--json", f.json, "print JSON");
  release->callback([&, record] { exit_code = Release(context, f, record->count() > 0); });
  auto* sweep = locks->add_subcommand("sweep", "Delete expired locks, auditing each");
  sweep->callback([&] {
    auto conn = db::Connect(context.Server(), "coexist-admin");
    std::cout << admin::SweepExpiredEditLocks(*conn, admin::CurrentActor())
              << " expired locks swept\n";
    exit_code = 0;
  });
}

void PrintQueueStatus(const db::QueueStatus& s, bool json) {
  if (json) {
    nlohmann::json out = {{"jobs", nlohmann::json::array()},
                          {"top_dead_errors", nlohmann::json::array()},
                          {"top_retry_errors", nlohmann::json::array()}};
    for (const auto& j : s.jobs) {
      out["jobs"].push_back(
          {{"job", j.job},
           {"by_state", j.by_state},
           {"oldest_queued_seconds",
            j.oldest_queued_seconds ? nlohmann::json(*j.oldest_queued_seconds) : nlohmann::json()},
           {"defer_reasons", j.defer_reasons}});
    }
    for (const auto& [name, list] : {std::pair{"top_dead_errors", &s.top_dead_errors},
                                     std::pair{"top_retry_errors", &s.top_retry_errors}}) {
      for (const auto& e : *list) {
        out[name].push_back({{"job", e.job}, {"error", e.error}, {"items", e.items}});
      }
    }
    std::cout << out.dump(2) << '\n';
    return;
  }
  if (s.jobs.empty()) std::cout << "no queued items\n";
  for (const auto& j : s.jobs) {
    std::cout << fmt::format("job {}: queued {}, deferred {}, done {}, dead {}", j.job,
                             j.by_state.at("queued"), j.by_state.at("deferred"),
                             j.by_state.at("done"), j.by_state.at("dead"));
    if (j.by_state.at("cancelled") > 0)
      std::cout << fmt::format(", cancelled {}", j.by_state.at("cancelled"));
    if (j.oldest_queued_seconds)
      std::cout << fmt::format(", oldest waiting {:.0f}s", *j.oldest_queued_seconds);
    std::cout << '\n';
    for (const auto& [reason, n] : j.defer_reasons)
      std::cout << "  deferred: " << n << " " << reason << '\n';
  }
  for (const auto& [title, list] :
       {std::pair{"top errors of dead items:\n", &s.top_dead_errors},
        std::pair{"top errors of items to be tried again:\n", &s.top_retry_errors}}) {
    if (!list->empty()) std::cout << title;
    for (const auto& e : *list) {
      std::cout << fmt::format("  {:>6}  {}  {}\n", e.items, e.job, e.error);
    }
  }
}

// The configuration's retention, or --older-than for all three kinds.
db::PurgeAges PurgeAgesOf(Context& context, const AdminFlags& f) {
  if (f.older_than.empty()) {
    const auto& r = context.Config().retention;
    return {r.done_items, r.events, r.runs};
  }
  auto parsed = config::ParseDuration(f.older_than);
  if (!parsed) {
    throw UsageError("--older-than '" + f.older_than + "' is not a duration", "e.g. 7d, 12h.");
  }
  auto age = std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
  if (age <= std::chrono::milliseconds(0)) {
    throw UsageError("--older-than must be longer than 0s",
                     "0s would purge everything done up to now; e.g. --older-than 1h.");
  }
  return {age, age, age};
}

int Purge(Context& context, const AdminFlags& f) {
  auto ages = PurgeAgesOf(context, f);
  auto conn = db::Connect(context.Server(), "coexist-admin");
  auto purged = db::PurgeOldRows(*conn, ages, admin::CurrentActor());
  auto age = [](std::chrono::milliseconds a) {
    return a.count() > 0 ? config::FormatDuration(a) : std::string("kept");
  };
  if (f.json) {
    std::cout << nlohmann::json{{"done_items", purged.done_items},
                                {"events", purged.events},
                                {"runs", purged.runs}}
                     .dump(2)
              << '\n';
  } else {
    std::cout << fmt::format(
        "purged {} done items (older than {}), {} events ({}), {} finished runs ({})\n",
        purged.done_items, age(ages.done_items), purged.events, age(ages.events), purged.runs,
        age(ages.runs));
  }
  return 0;
}

void AddQueue(CLI::App& app, Context& context, int& exit_code, AdminFlags& f) {
  auto* queue = app.add_subcommand("queue", "Inspect and repair the queue");
  queue->require_subcommand(1);
  auto* status = queue->add_subcommand(
      "status", "Counts by state, oldest waiting item, top errors of dead items");
  status->add_option("--job", f.job, "one job (default: all)");
  status->add_flag("--json", f.json, "print JSON");
  status->callback([&] {
    auto conn = db::Connect(context.Server(), "coexist-admin");
    PrintQueueStatus(db::ReadQueueStatus(*conn, f.job), f.json);
    exit_code = 0;
  });
  auto* retry = queue->add_subcommand("retry", "Put items back into the queue");
  retry->add_flag("--dead", f.dead, "dead items: attempts reset, last error kept")->required();
  retry->add_option("--job", f.job, "one job (default: all)");
  retry->callback([&] {
    auto conn = db::Connect(context.Server(), "coexist-admin");
    std::cout << db::RetryDeadItems(*conn, f.job, admin::CurrentActor())
              << " dead items queued again\n";
    exit_code = 0;
  });
  auto* purge = queue->add_subcommand(
      "purge",
      "Delete done items, events and finished runs older than the configuration's retention "
      "(default 7d, 30d, 90d), a few thousand rows a statement; queued, deferred and dead "
      "items and running runs are kept");
  purge->add_option("--older-than", f.older_than,
                    "one age for all three instead of retention:, e.g. 14d");
  purge->add_flag("--json", f.json, "print JSON");
  purge->callback([&] { exit_code = Purge(context, f); });
}

// runs.details holds the settings a run started with, merged with its
// summary (`batch run --json`'s object) once it finished.
constexpr const char* kRunSettings[] = {"workers", "chunk_size", "adaptive", "chunk_time_ms"};

void PrintRun(const db::RunDetail& detail, bool json) {
  auto details = nlohmann::json::parse(detail.details_json);
  nlohmann::json settings = nlohmann::json::object();
  nlohmann::json summary = details;
  for (const char* key : kRunSettings) {
    if (details.contains(key)) settings[key] = details[key];
    summary.erase(key);
  }
  if (!details.contains("outcome")) summary = nullptr;  // still running, or never finished
  const auto& r = detail.run;
  if (json) {
    nlohmann::json out = dashboard::RunJson(r);
    out["settings"] = settings;
    out["summary"] = summary;
    out["details"] = details;
    out["events"] = detail.events_by_kind;
    std::cout << out.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("run {} of job {} (policy {}): {}\n", r.run_id, r.job, r.policy,
                           r.outcome);
  std::cout << fmt::format("  host {}, pid {}, started {}, {}, {:.1f} s\n", r.host, r.pid,
                           r.started_at, r.ended_at.empty() ? "not ended" : "ended " + r.ended_at,
                           r.seconds);
  std::cout << fmt::format("  claimed {}, done {}, deferred {}, dead {}\n", r.claimed, r.done,
                           r.deferred, r.dead);
  if (summary.is_object() && summary.contains("stop_reason")) {
    std::cout << "  claiming stopped: " << summary["stop_reason"].get<std::string>() << '\n';
  }
  if (summary.is_object() && summary.contains("deferrals_by_reason") &&
      !summary["deferrals_by_reason"].empty()) {
    std::string reasons;
    for (const auto& [reason, n] : summary["deferrals_by_reason"].items()) {
      reasons += (reasons.empty() ? "" : ", ") + reason + " " + n.dump();
    }
    std::cout << "  deferred by reason: " << reasons << '\n';
  }
  std::string events;
  for (const auto& [kind, n] : detail.events_by_kind) {
    events += (events.empty() ? "" : ", ") + kind + " " + std::to_string(n);
  }
  std::cout << "  events: " << (events.empty() ? "none" : events) << '\n';
}

void AddRuns(CLI::App& app, Context& context, int& exit_code, AdminFlags& f) {
  auto* runs = app.add_subcommand("runs", "Batch runs: list, show one");
  runs->require_subcommand(1);
  auto* list = runs->add_subcommand("list", "Recent runs, newest first");
  list->add_option("--job", f.job, "one job (default: all)");
  list->add_option("--limit", f.limit, "how many (default 20)")->check(CLI::Range(1, 100000));
  list->add_flag("--json", f.json, "print JSON");
  list->callback([&] {
    auto conn = db::Connect(context.Server(), "coexist-admin");
    auto rows = db::ListRuns(*conn, f.job, f.limit);
    if (f.json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& r : rows) out.push_back(dashboard::RunJson(r));
      std::cout << out.dump(2) << '\n';
    } else {
      // host:pid tells a job's shared runs (batch.runs: shared) apart.
      std::cout << fmt::format("{:>6} {:<14} {:<17} {:<11} {:<25} {:>8} {:>8} {:>8} {:>6}  {}\n",
                               "run", "job", "policy", "outcome", "started", "seconds", "done",
                               "deferred", "dead", "host:pid");
      for (const auto& r : rows) {
        std::cout << fmt::format(
            "{:>6} {:<14} {:<17} {:<11} {:<25} {:>8.1f} {:>8} {:>8} {:>6}  {}:{}\n", r.run_id,
            r.job, r.policy, r.outcome, r.started_at, r.seconds, r.done, r.deferred, r.dead, r.host,
            r.pid);
      }
    }
    exit_code = 0;
  });
  auto* sweep = runs->add_subcommand(
      "sweep",
      "Clear what dead runs of the configuration's job left (kill -9, a lost host or server): "
      "mark them abandoned, hand their status_partition records back; exit 4 when a run of the "
      "job is at work (it has done so)");
  sweep->add_flag("--json", f.json, "print JSON");
  sweep->callback([&] {
    auto result = batch::SweepDeadRuns(context.Server().conninfo(), context.Config());
    if (f.json) {
      std::cout << nlohmann::json{{"abandoned_runs", result.abandoned},
                                  {"handed_back", result.handed_back}}
                       .dump(2)
                << '\n';
    } else {
      std::string ids;
      for (long long id : result.abandoned) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
      std::cout << fmt::format("{} dead run{} marked abandoned{}; {} record{} handed back\n",
                               result.abandoned.size(), result.abandoned.size() == 1 ? "" : "s",
                               ids.empty() ? "" : " (" + ids + ")", result.handed_back,
                               result.handed_back == 1 ? "" : "s");
    }
    exit_code = 0;
  });
  auto* show = runs->add_subcommand(
      "show",
      "One run: its counts, its settings, its summary (as batch run --json writes it) and "
      "its events by kind");
  show->add_option("run_id", f.run_id, "the run's id")->required();
  show->add_flag("--json", f.json,
                 "print JSON: the run's row, settings, summary (null while it runs) and events");
  show->callback([&] {
    auto conn = db::Connect(context.Server(), "coexist-admin");
    auto detail = db::ShowRun(*conn, f.run_id);
    if (!detail) throw UsageError("no run " + std::to_string(f.run_id), "see 'coexist runs list'.");
    PrintRun(*detail, f.json);
    exit_code = 0;
  });
}

// One line per event: when, what, then only the fields it has.
std::string EventLine(const db::EventRow& e) {
  std::string line = e.at + "  " + e.kind;
  if (!e.job.empty()) line += " job=" + e.job;
  if (e.run_id) line += " run=" + std::to_string(*e.run_id);
  if (e.item_id) line += " item=" + std::to_string(*e.item_id);
  if (!e.record_key.empty()) {
    line += " record=" + (e.target.empty() ? "" : e.target + ":") + e.record_key;
  }
  if (!e.actor.empty()) line += " actor=" + log::Value(e.actor);
  if (!e.subject.empty()) line += " subject=" + log::Value(e.subject);
  if (e.details_json != "{}") line += " " + e.details_json;
  return line;
}

int ListEvents(Context& context, const AdminFlags& f, bool record_given) {
  db::EventFilter filter;
  if (!f.kind.empty()) {
    filter.kind = ParseEventKind(f.kind);
    if (!filter.kind) {
      std::string kinds;
      for (EventKind k : kEveryEventKind)
        kinds += (kinds.empty() ? "" : ", ") + std::string(ToString(k));
      throw UsageError("--kind '" + f.kind + "' is not an event kind",
                       "give one of " + kinds + " (docs/schema.md).");
    }
  }
  filter.job = f.job;
  filter.limit = f.limit;
  if (record_given) filter.record_key = f.record;
  if (!f.since.empty()) {
    if (auto age = config::ParseDuration(f.since)) {
      filter.since_age = std::chrono::duration_cast<std::chrono::milliseconds>(*age);
    } else {
      filter.since_time = f.since;
    }
  }
  auto conn = db::Connect(context.Server(), "coexist-admin");
  std::vector<db::EventRow> rows;
  try {
    rows = db::ListEvents(*conn, filter);
  } catch (const pqxx::data_exception& e) {
    // Class 22: the server could not read --since as a timestamp, or
    // --record as a key of a target's key type (coexist.canonical_key).
    if (std::string(e.what()).find("timestamp") != std::string::npos || !record_given) {
      throw UsageError("--since '" + f.since + "' is neither a duration nor a timestamp",
                       "e.g. --since 2h, or --since '2026-12-01 08:00+00'.");
    }
    std::string what = e.what();
    throw UsageError("--record '" + f.record + "' is not a key of the targets' key types: " +
                         what.substr(0, what.find('\n')),
                     "give the key as the target's key column spells it (e.g. 42, or a uuid).");
  }
  if (f.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : rows) out.push_back(dashboard::EventJson(e));
    std::cout << out.dump(2) << '\n';
  } else {
    for (const auto& e : rows) std::cout << EventLine(e) << '\n';
    std::cout << rows.size() << " event" << (rows.size() == 1 ? "" : "s") << " (newest first)\n";
  }
  return 0;
}

void AddEvents(CLI::App& app, Context& context, int& exit_code, AdminFlags& f) {
  auto* events = app.add_subcommand(
      "events",
      "The audit trail (coexist.events): deferrals, dead items, revoked and released edit locks, "
      "signalled backends, retries, purges, pacing; newest first");
  events->add_option("--kind", f.kind, "one kind, e.g. item_dead (docs/schema.md lists them)");
  auto* record = events->add_option("--record", f.record, "one record's key (of any target)");
  events->add_option("--since", f.since,
                     "only events this recent (a duration, e.g. 2h) or from this time on (a "
                     "timestamp, e.g. '2026-12-01 08:00+00')");
  events->add_option("--job", f.job, "one job (default: all)");
  events->add_option("--limit", f.limit, "how many, newest first (default 20)")
      ->check(CLI::Range(1, 100000));
  events->add_flag("--json", f.json, "print JSON");
  events->callback([&, record] { exit_code = ListEvents(context, f, record->count() > 0); });
}

}  // namespace

void AddAdminCommands(CLI::App& app, Context& context, int& exit_code) {
  static AdminFlags flags;
  AddLocks(app, context, exit_code, flags);
  AddQueue(app, context, exit_code, flags);
  AddRuns(app, context, exit_code, flags);
  AddEvents(app, context, exit_code, flags);
}

}  // namespace coexist::cli
