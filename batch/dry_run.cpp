#include "batch/dry_run.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>

#include "batch/check.h"
#include "batch/guard.h"
#include "batch/record_sql.h"
#include "common/error.h"
#include "db/connection.h"
#include "policies/policy.h"
#include "schema/queue_store_ops.h"

namespace coexist::batch {
namespace {

using policies::Action;

// Items are looked at in pages of this many, as a run claims them in chunks.
constexpr int kPage = 1000;

void CheckInstalled(pqxx::transaction_base& tx) {
  if (!db::QueueInstalled(tx)) {
    throw UnavailableError("coexist is not installed in this database",
                           "run `coexist db install` (or a first `batch run`) first; a dry run "
                           "installs nothing.");
  }
}

// Who holds the job's lock, if anyone: a real run starting now would exit
// as busy.
std::string BusyHolder(pqxx::transaction_base& tx, db::QueueStore& queue,
                       const config::Config& config) {
  if (!db::JobLockHeld(tx, config.batch.job)) return "";
  auto holder = queue.FindJobHolder(tx);
  return holder ? holder->description : "a session that let go of it a moment ago";
}

DryRunItem Decide(const policies::Policy& policy, const Item& item,
                  const policies::RecordFacts& facts) {
  auto d = policy.Decide(facts);
  DryRunItem out{item.item_id,       item.key, item.attempts, item.deferrals,
                 ToString(d.action), d.reason, d.escalated};
  if (out.reason.empty() && d.action != Action::kApply) {
    out.reason = facts.edit_locked ? "edit_locked" : facts.row_locked ? "row_locked" : "";
  }
  return out;
}

// The decisions for one page, as Worker::Decide would take them at first
// sight (nothing waited yet). `probe` is rolled back by the caller.
void DecidePage(pqxx::transaction_base& read, RecordSql& sql, pqxx::transaction_base& probe,
                RecordSql& probe_sql, const policies::Policy& policy,
                const std::vector<Item>& items, DryRunReport& report) {
  std::vector<RecordKey> keys;
  for (const auto& item : items) keys.insert(keys.end(), item.keys.begin(), item.keys.end());
  std::set<RecordKey> edit_locked;
  for (const auto& lock : sql.LiveEditLocks(read, keys)) edit_locked.insert(lock.key);
  // An item is edit-locked when any of its records is (Worker::Decide).
  auto is_edit_locked = [&](const Item& item) {
    return std::any_of(item.keys.begin(), item.keys.end(),
                       [&](const RecordKey& key) { return edit_locked.count(key) > 0; });
  };
  std::vector<RecordKey> candidates;
  for (const auto& item : items) {
    if (!is_edit_locked(item))
      candidates.insert(candidates.end(), item.keys.begin(), item.keys.end());
  }
  // As a run's chunk would gather them; the probe's locks are rolled back.
  auto rows = GatherFacts(probe_sql, probe, sql, read, candidates, policy.TakesOver());
  for (const auto& item : items) {
    policies::RecordFacts facts;
    if (is_edit_locked(item)) {
      facts.edit_locked = true;
    } else {
      facts = ItemFacts(item, rows);
    }
    facts.deferrals = item.deferrals;
    report.items.push_back(Decide(policy, item, facts));
  }
}

}  // namespace

DryRunReport DryRun(const std::string& conninfo, const config::Config& config) {
  auto conn = db::Connect(conninfo, config.database.application_name + " dry-run");
  auto probe_conn = db::Connect(conninfo, config.database.application_name + " dry-run");
  {
    pqxx::read_transaction tx(*conn);
    CheckInstalled(tx);
  }
  CheckedConfig checked = CheckConfig(*conn, config, kInstallCheck);
  const policies::Policy& policy = checked.policy();
  DryRunReport report;
  report.job = config.batch.job;
  report.policy = policy.Name();
  auto gate = policy.MayClaim(std::chrono::system_clock::now());
  report.may_claim = gate.allowed;
  if (!gate.allowed) report.refused_reason = ToString(gate.reason);

  RecordSql sql(*conn, config);
  RecordSql probe_sql(*probe_conn, config);
  db::QueueStore queue(*conn, QueueJobOf(config, sql.target()));
  pqxx::read_transaction read(*conn);
  report.busy = BusyHolder(read, queue, config);
  long long after = 0;
  while (true) {
    auto items = db::ClaimableItems(read, config.batch.job, after, kPage);
    if (items.empty()) break;
    after = items.back().item_id;
    if (!report.may_claim) {
      for (const auto& item : items) {
        report.items.push_back({item.item_id, item.key, item.attempts, item.deferrals,
                                "not_claimed", std::string(ToString(gate.reason)), false});
      }
      continue;
    }
    pqxx::work probe(*probe_conn);
    DecidePage(read, sql, probe, probe_sql, policy, items, report);
    probe.abort();  // the row locks go; nothing was written
  }
  for (const auto& item : report.items) ++report.by_decision[item.decision];
  auto counts = db::CountJobItems(read, config.batch.job);
  report.not_claimable_yet = std::max<long long>(
      0, counts.queued + counts.deferred - static_cast<long long>(report.items.size()));
  return report;
}

void PrintDryRun(std::ostream& out, const DryRunReport& report, size_t max_rows) {
  out << "dry run of job " << report.job << " (policy " << report.policy
      << "): nothing was changed\n";
  if (!report.busy.empty()) {
    out << "  the job is busy: " << report.busy << "; a run now would exit with status 4\n";
  }
  if (!report.may_claim) {
    out << "  claiming is not allowed now (" << report.refused_reason
        << "): a run now would claim nothing\n";
  }
  char line[200];
  std::snprintf(line, sizeof(line), "%12s %12s %8s %9s  %-18s %s\n", "item_id", "key", "attempts",
                "deferrals", "decision", "reason");
  out << line;
  for (size_t i = 0; i < report.items.size() && i < max_rows; ++i) {
    const auto& item = report.items[i];
    std::string reason = item.reason + (item.escalated ? " (escalated)" : "");
    std::snprintf(line, sizeof(line), "%12lld %12s %8d %9d  %-18s %s\n", item.item_id,
                  item.key.c_str(), item.attempts, item.deferrals, item.decision.c_str(),
                  reason.c_str());
    out << line;
  }
  if (report.items.size() > max_rows) {
    out << "  ... " << report.items.size() - max_rows << " more (--rows N, or --json FILE)\n";
  }
  out << "items " << report.items.size();
  for (const auto& [decision, n] : report.by_decision) out << ", " << decision << " " << n;
  out << "\n";
  if (report.not_claimable_yet > 0) {
    out << "  and " << report.not_claimable_yet
        << " more waiting items not claimable yet: behind an earlier item of their key (a run "
           "takes them once it is done) or deferred until policy.defer_delay\n";
  }
}

std::string DryRunJson(const DryRunReport& report) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& item : report.items) {
    items.push_back({{"item_id", item.item_id},
                     {"key", item.key},
                     {"attempts", item.attempts},
                     {"deferrals", item.deferrals},
                     {"decision", item.decision},
                     {"reason", item.reason},
                     {"escalated", item.escalated}});
  }
  nlohmann::json j = {{"job", report.job},
                      {"policy", report.policy},
                      {"may_claim", report.may_claim},
                      {"refused_reason", report.refused_reason},
                      {"busy", report.busy},
                      {"total", report.items.size()},
                      {"not_claimable_yet", report.not_claimable_yet},
                      {"by_decision", report.by_decision},
                      {"items", items}};
  return j.dump(2);
}

}  // namespace coexist::batch
