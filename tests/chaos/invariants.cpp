#include "tests/chaos/invariants.h"

namespace coexist::chaos {
namespace {

struct Invariant {
  const char* name;
  const char* meaning;
  // Rows that break it (at most a few are shown); none when it holds.
  const char* sql;
};

// Items are matched to ledger rows by the uid of their payload.
const Invariant kInvariants[] = {
    {"applied_once", "no item applied twice (a ledger uid appears once)",
     "SELECT uid, count(*) AS times FROM chaos_ledger GROUP BY uid HAVING count(*) > 1"},
    {"applied_as_queued", "each ledger row carries its item's key and quantity",
     "SELECT l.uid, l.item_key, l.qty, q.item_id, q.record_key, q.payload"
     "  FROM chaos_ledger l JOIN coexist.items q ON (q.payload->>'uid')::bigint = l.uid"
     " WHERE l.item_key::text <> q.record_key OR l.qty <> (q.payload->>'qty')::bigint"},
    {"applied_is_done", "no item applied but not done",
     "SELECT l.uid, q.item_id, q.state, q.attempts, q.last_error"
     "  FROM chaos_ledger l LEFT JOIN coexist.items q ON (q.payload->>'uid')::bigint = l.uid"
     " WHERE q.state IS DISTINCT FROM 'done'"},
    {"done_is_applied", "no item done but not applied",
     "SELECT q.item_id, q.record_key, q.payload, q.run_id, q.done_at FROM coexist.items q"
     " WHERE q.state = 'done' AND NOT EXISTS"
     "  (SELECT 1 FROM chaos_ledger l WHERE l.uid = (q.payload->>'uid')::bigint)"},
    {"totals_conserved",
     "each row's settled moved by the sum of its done items' qty plus committed online writes",
     "WITH d AS (SELECT record_key::bigint AS id, sum((payload->>'qty')::bigint) AS s FROM "
     "coexist.items"
     "            WHERE state = 'done' GROUP BY record_key),"
     " o AS (SELECT key AS id, sum(delta) AS s FROM online_ledger GROUP BY key)"
     " SELECT p.id, p.settled, coalesce(d.s, 0) AS done_qty, coalesce(o.s, 0) AS online"
     "   FROM products p LEFT JOIN d USING (id) LEFT JOIN o USING (id)"
     "  WHERE p.settled <> coalesce(d.s, 0) + coalesce(o.s, 0)"},
    {"queue_drained", "nothing queued or deferred after the final clean run",
     "SELECT item_id, record_key, state, attempts, deferrals, defer_reason, not_before,"
     "       last_error FROM coexist.items WHERE state IN ('queued', 'deferred') ORDER BY item_id"},
    {"none_dead", "no item dead (no fault of the suite makes an item fail on its own)",
     "SELECT item_id, record_key, attempts, last_error FROM coexist.items WHERE state = 'dead'"
     " ORDER BY item_id"},
    {"no_takeovers", "nothing left in coexist.takeovers", "SELECT * FROM coexist.takeovers"},
    {"none_owned_by_batch", "no target row owned by the batch",
     "SELECT id, owner, version FROM products WHERE owner = 'batch'"},
    {"no_run_running", "no run left 'running'",
     "SELECT run_id, pid, started_at, heartbeat_at FROM coexist.runs WHERE outcome = 'running'"},
    {"runs_never_overlap", "no two runs completing items at the same time",
     "WITH r AS (SELECT run_id, min(done_at) AS lo, max(done_at) AS hi FROM coexist.items"
     "            WHERE state = 'done' GROUP BY run_id)"
     " SELECT a.run_id, a.lo, a.hi, b.run_id, b.lo, b.hi FROM r a JOIN r b"
     "   ON a.run_id < b.run_id AND a.lo <= b.hi AND b.lo <= a.hi"},
    {"none_done_after_run_ended", "no run completing items after it ended or was marked abandoned",
     "SELECT q.item_id, q.run_id, q.done_at, r.ended_at, r.outcome FROM coexist.items q"
     "  JOIN coexist.runs r USING (run_id)"
     " WHERE q.state = 'done' AND (r.ended_at IS NULL OR q.done_at > r.ended_at)"},
};

// A range job's (JobShape::range): its rows were marked, not enqueued, and
// the ledger's uid is the row's key.
const Invariant kRangeInvariants[] = {
    {"range_settled_once", "no row settled twice (its key appears once in the ledger)",
     "SELECT uid, count(*) AS times FROM chaos_ledger GROUP BY uid HAVING count(*) > 1"},
    {"range_all_settled", "every marked row settled after the final clean run",
     "SELECT id, qty, settled FROM products p WHERE to_settle = 1 AND NOT EXISTS"
     " (SELECT 1 FROM chaos_ledger l WHERE l.uid = p.id) ORDER BY id"},
    {"range_only_marked", "no unmarked row settled",
     "SELECT l.uid, l.qty FROM chaos_ledger l JOIN products p ON p.id = l.uid"
     " WHERE p.to_settle <> 1"},
    {"range_settled_as_marked",
     "each row's settled moved by the qty the ledger says, plus committed online writes",
     "WITH l AS (SELECT item_key AS id, sum(qty) AS s FROM chaos_ledger GROUP BY item_key),"
     " o AS (SELECT key AS id, sum(delta) AS s FROM online_ledger GROUP BY key)"
     " SELECT p.id, p.settled, p.qty, coalesce(l.s, 0) AS ledger, coalesce(o.s, 0) AS online"
     "   FROM products p LEFT JOIN l USING (id) LEFT JOIN o USING (id)"
     "  WHERE p.settled <> coalesce(l.s, 0) + coalesce(o.s, 0)"},
    {"range_pass_walked", "every segment of the pass walked after the final clean run",
     "SELECT segment, pass, last_key, upper_key FROM coexist.range_checkpoints WHERE NOT finished"},
};

// The queue's invariants that hold for a range job too (its exceptions are
// queue items without payloads).
bool AlsoForRange(const std::string& name) {
  return name == "queue_drained" || name == "none_dead" || name == "no_takeovers" ||
         name == "none_owned_by_batch" || name == "no_run_running";
}

std::string Evidence(const pqxx::result& rows) {
  std::string out;
  for (const auto& row : rows) {
    if (row.num() >= 5) {
      out += "    ... " + std::to_string(rows.size()) + " rows in all\n";
      break;
    }
    out += "    ";
    for (const auto& field : row) {
      out += std::string(field.name()) + "=" + (field.is_null() ? "NULL" : field.c_str()) + " ";
    }
    out += "\n";
  }
  return out;
}

}  // namespace

const std::vector<std::string>& InvariantNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& invariant : kInvariants) out.emplace_back(invariant.name);
    for (const auto& invariant : kRangeInvariants) out.emplace_back(invariant.name);
    return out;
  }();
  return names;
}

void CheckInvariants(Trial& trial, Findings& findings) {
  const bool range = trial.shape().range;
  for (const auto& invariant : kRangeInvariants) {
    if (!range) break;
    auto rows = trial.Query(invariant.sql);
    if (!rows.empty()) {
      findings.Add(invariant.name, std::string(invariant.meaning) + ":\n" + Evidence(rows));
    }
  }
  for (const auto& invariant : kInvariants) {
    if (range && !AlsoForRange(invariant.name)) continue;
    auto rows = trial.Query(invariant.sql);
    if (!rows.empty()) {
      findings.Add(invariant.name, std::string(invariant.meaning) + ":\n" + Evidence(rows));
    }
  }
}

}  // namespace coexist::chaos
