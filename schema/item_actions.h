#pragma once

// `coexist items cancel|skip|retry|reschedule`: an operator's action on the
// items of one job's queue that a filter selects (docs/operations.md,
// "Acting on items"). Every statement on coexist.queue is here, beside the
// queue store's (schema_fence_test keeps such SQL in schema/).
//
// An item a live run holds is never touched: an item in a chunk's open
// transaction (its row lock, taken by the claim's FOR UPDATE SKIP LOCKED
// and held until the chunk commits) and an item a running status_partition
// run has taken over (coexist.takeovers). The action locks the items it
// changes with FOR UPDATE SKIP LOCKED, so a claim and the action never
// share an item: whichever locks it first has it, and the other passes it
// by (a claim then no longer sees it pending; the action no longer finds a
// completed item in the queue).
//
// Errors: pqxx's, uncaught (42P01 when the schema is older than 0034,
// 42501 without the rights on coexist.queue and events). Thread safety: a
// plain function; a connection is used by one thread at a time.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pqxx {
class connection_base;
}  // namespace pqxx

namespace coexist::db {

enum class ItemAction {
  kCancel,      // queued, deferred, dead -> cancelled: never run
  kSkip,        // queued, deferred, dead -> done, not applied
  kRetry,       // dead, deferred, cancelled -> queued now; attempts and timeouts reset
  kReschedule,  // queued, deferred: not claimed before a time
};

std::string_view ToString(ItemAction action);
// The states the action applies to, in the order above.
std::vector<std::string> StatesOf(ItemAction action);
// Every state an item of coexist.queue can be in.
const std::vector<std::string>& ItemStates();

// Which items: all of `job`'s queue rows that match every filter set.
struct ItemFilter {
  std::string job;
  // Keys in the canonical text of the job's key type (CanonicalKeys): an
  // item matches when one of its records has one of them.
  std::vector<std::string> keys;
  std::vector<std::string> states;  // names from ItemStates()
  std::string reason;               // "": any; else a substring of last_error or defer_reason
  // Updated at or after now - since_age, or at or after since_time (a
  // timestamptz literal); neither: any time.
  std::optional<std::chrono::milliseconds> since_age;
  std::optional<std::string> since_time;
};

struct ItemActionRequest {
  ItemAction action = ItemAction::kCancel;
  ItemFilter filter;
  // kReschedule: not claimed before now + in, or before at (a timestamptz
  // literal); exactly one is set.
  std::optional<std::chrono::milliseconds> in;
  std::optional<std::string> at;
  std::string actor;  // who, for the event
  std::string why;    // "" when not given
  bool dry_run = false;
  int sample = 10;  // how many changed items' ids and keys come back
};

struct ItemActionResult {
  bool job_known = false;  // the job has a queue item, a done chunk or a run
  // The items the filter matched, by their state (zeros left out).
  std::map<std::string, long long> matched;
  // The items changed (the dry run: that it would change), by their state
  // before the action.
  std::map<std::string, long long> changed;
  long long changed_total = 0;
  // Matched items in a state the action applies to that a live run holds:
  // left alone. `running_runs`: the job's running runs, oldest first.
  long long held = 0;
  std::vector<long long> running_runs;
  // The first `sample` changed items, by id: id and lead key.
  std::vector<std::pair<long long, std::string>> sample;
  std::string not_before;  // kReschedule: the time, as the server prints it
  long long event_id = 0;  // the audit row; 0 for a dry run or when nothing changed
};

// Canonical text of each of `keys` in `key_type` (db::KeyTypeOf), as
// enqueue casts them. Throws DataError (65) naming the first key that is
// not a value of the type. In a transaction of its own.
std::vector<std::string> CanonicalKeys(pqxx::connection_base& conn, const std::string& key_type,
                                       const std::vector<std::string>& keys);

// One item of the queue as `coexist items list` shows it.
struct ItemRow {
  long long item_id = 0;
  std::string record_key;   // the lead key
  std::string record_keys;  // "" for an item of one record, else "{k1,k2}"
  std::string state;
  int attempts = 0;
  std::string last_error, defer_reason;  // "" when none
  std::string not_before, updated_at;    // as the server prints them; not_before "" when none
};

// `coexist items list`: up to `limit` of the items `filter` matches, by
// item_id, in a read-only transaction of its own (done items that left the
// queue for their chunk are not listed: no action applies to them). Throws
// UsageError (64) for a since_time the server cannot read.
std::vector<ItemRow> ListItems(pqxx::connection_base& conn, const ItemFilter& filter, int limit);

// Carries out `request` in one transaction of its own: reads what the
// filter matches, locks and changes the items it may change, and writes
// one coexist.events row (items_cancelled, items_skipped, items_retried or
// items_rescheduled; actor, details: the action, filter, counts by state,
// why, db_user and up to 20 item ids) when it changed any. A dry run does
// the same reads and locks and rolls back. Throws UsageError (64) for a
// since_time or `at` the server cannot read as a timestamp; changes
// nothing when nothing matched or the job is unknown (job_known false).
ItemActionResult ActOnItems(pqxx::connection_base& conn, const ItemActionRequest& request);

}  // namespace coexist::db
