#pragma once

// A range chunk's cheap way (RangeRead::kAllFree) in ONE server call: the
// session-local function whose SQL and steps schema/range_chunk_function.h
// has, created on a worker's connection and called there outside an
// explicit transaction, so that the call is the chunk's whole transaction.
// docs/batch.md, "Range jobs".
//
// Thread safety: one per connection, used by one thread.

#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "config/config.h"

namespace coexist::batch {

class Operation;
class RecordSql;

// Creates the function on `conn` (a worker's, with `sql` and `operation`
// prepared on it). false when the session may not create it (no TEMP right
// on the database): the walk then takes every chunk by statements. Throws
// other libpqxx errors. Only for a job with batch.range and an operation
// without params.
bool CreateRangeChunkCall(pqxx::connection_base& conn, const config::Config& config,
                          const RecordSql& sql, const Operation& operation);

// What the call did (the steps above).
enum class RangeCallState { kFenced, kBusy, kWalked, kRetake, kApplied };

struct RangeCallResult {
  RangeCallState state = RangeCallState::kRetake;
  int keys = 0;           // keys the chunk locked (kApplied)
  long long applied = 0;  // rows the operation was applied to (kApplied)
};

// Runs the call for `segment` of pass `pass` on `conn`, with no transaction
// open there. Throws what the call throws (pqxx::failure): a held row, the
// operation's error, a lost connection; the call changed nothing then.
RangeCallResult CallRangeChunk(pqxx::connection_base& conn, long long run_id,
                               const std::string& job, int segment, long long pass, int size,
                               bool skip_queued_keys);

}  // namespace coexist::batch
