#pragma once

// `coexist enqueue`: adds items to a job's queue in bulk (one statement per
// 10,000 items, never a round trip per item), all in one transaction. An
// item with an idempotency key that the job already has is a duplicate and
// is not added again.

#include <istream>
#include <optional>
#include <string>
#include <vector>

namespace coexist::batch {

struct EnqueueItem {
  long long key = 0;
  std::string payload = "{}";  // a JSON object
  std::optional<std::string> idempotency_key;
};

struct EnqueueResult {
  long long added = 0;
  long long duplicates = 0;
};

// CSV: key[,payload[,idempotency_key]] per line, RFC 4180 quoting, an
// optional header line starting with "key". JSON lines: one object per line
// with "key", optional "payload" (object) and "idempotency_key" (string).
// Blank lines are skipped. Throws coexist::Error(kDataError) naming
// `name:line` for a malformed line.
std::vector<EnqueueItem> ParseCsv(std::istream& in, const std::string& name);
std::vector<EnqueueItem> ParseJsonLines(std::istream& in, const std::string& name);

// Inserts the items. Throws TempFailError when the server is unreachable.
EnqueueResult EnqueueItems(const std::string& conninfo, const std::string& job,
                           const std::vector<EnqueueItem>& items);

// Enqueues what a query returns, all inside the server: its columns, by
// position whatever their names, are the key, and optionally the payload
// (jsonb) and the idempotency key (text).
// Throws coexist::UsageError when the query returns another shape.
EnqueueResult EnqueueSelect(const std::string& conninfo, const std::string& job,
                            const std::string& select_sql);

}  // namespace coexist::batch
