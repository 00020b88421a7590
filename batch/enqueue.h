#pragma once

// `coexist enqueue`: adds items to a job's queue in bulk (one statement per
// 10,000 items, never a round trip per item), all in one transaction. An
// item with an idempotency key that the job already has is a duplicate and
// is not added again.

#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "config_core/target.h"

namespace coexist::batch {

struct EnqueueItem {
  std::string key;             // as given; canonicalised through the key's type on insert
  std::string payload = "{}";  // a JSON object
  std::optional<std::string> idempotency_key;
  // An item of several records (JSON lines' "keys"): all its keys, `key`
  // unused. Stored distinct, in the key type's order.
  std::vector<std::string> keys;
  // The input's shard field (CSV's 4th, JSON lines' "shard"), read only when
  // asked for (database.shard_by: column; batch/shards.h); empty when none.
  std::string shard;
  // The input line it came from, for messages about it.
  long line = 0;
};

struct EnqueueResult {
  long long added = 0;
  long long duplicates = 0;
  // Of the added items, those naming a key with no row in the target
  // (EnqueueTarget::table given and readable), and the first few of those
  // keys ("1,2" for an item of several). The run counts them again
  // (batch.missing_rows).
  long long missing = 0;
  std::vector<std::string> missing_keys;
  // False when nothing was counted: no table given, or the role may not
  // read the target's key column.
  bool missing_counted = false;
};

// Where the keys go, beyond their type: with `table`, messages name the key
// column and the added items whose keys have no row in it are counted
// (EnqueueResult::missing); with `refuse_missing` too, such an item refuses
// the whole enqueue (coexist::Error(kDataError), nothing added).
struct EnqueueTarget {
  const config::TargetTable* table = nullptr;
  bool refuse_missing = false;
};

// CSV: key[,payload[,idempotency_key]] per line, RFC 4180 quoting, an
// optional header line starting with "key"; a key written as an array
// literal ("{3,1,2}") names an item's several records. JSON lines: one object per line
// with "key" (or "keys": a non-empty array of keys, for an item of several
// records), optional "payload" (object) and "idempotency_key" (string).
// Blank lines are skipped. With `integer_keys` (the key column is an
// integer type: db::IsIntegerType) a key must be an integer within bigint;
// otherwise any non-empty text (JSON: a string or a number, as written),
// which EnqueueItems checks against the key column's type. With
// `shard_field` a CSV line may have a 4th field and a JSON line a "shard"
// string: the shard the item goes to. Throws coexist::Error(kDataError)
// naming `name:line` for a malformed line.
std::vector<EnqueueItem> ParseCsv(std::istream& in, const std::string& name,
                                  bool integer_keys = true, bool shard_field = false);
std::vector<EnqueueItem> ParseJsonLines(std::istream& in, const std::string& name,
                                        bool integer_keys = true, bool shard_field = false);

// EnqueueItems and EnqueueSelect analyze the queue table after a statement
// that added at least this many items (a run started right after is planned
// on statistics that know them; batch/enqueue.cpp).
inline constexpr long long kAnalyzeQueueAfter = 1000;

// Inserts the items, each key cast to `key_type` (the target key column's)
// and kept in its canonical text form: a key read from a file is text, and
// is taken when it parses as a value of that type (042 is 42, a uuid in
// upper case its lower-case self). Throws coexist::Error(kDataError) when
// some do not, naming the first few with their input lines, the key column
// and both types, with nothing enqueued; TempFailError when the server is
// unreachable.
EnqueueResult EnqueueItems(const std::string& conninfo, const std::string& job,
                           const std::vector<EnqueueItem>& items,
                           const std::string& key_type = "bigint",
                           const EnqueueTarget& target = {});

// Enqueues what a query returns, all inside the server: its columns, by
// position whatever their names, are the key (an array: the keys of an item
// of several records), and optionally the payload (jsonb) and the
// idempotency key (text). A key is taken when it casts to `key_type` and
// back to its own type unchanged (numeric 3.00 is integer 3; 3.05 is
// refused, never rounded); a text key when it parses as `key_type`, as a
// file's does. Throws coexist::Error(kDataError) naming the first few keys
// that are not, the key column and both types, with nothing enqueued;
// coexist::UsageError when the query returns another shape.
EnqueueResult EnqueueSelect(const std::string& conninfo, const std::string& job,
                            const std::string& select_sql, const std::string& key_type = "bigint",
                            const EnqueueTarget& target = {});

}  // namespace coexist::batch
