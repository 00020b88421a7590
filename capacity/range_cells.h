#pragma once

// The statements a range job's cell (docs/capacity.md, "Range jobs against
// queued jobs") makes on coexist's tables. They name coexist.range_checkpoints,
// coexist.items and coexist.runs, which only schema/ should: this file is
// the schema fence's one exception (tests/schema_fence_test.cpp) until
// schema/ has them (EmptyCoexistTables emptying the checkpoints, a range
// ledger check beside LedgerMismatch, the chunks beside ReadDoneChunks).
// Private to capacity/.

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "capacity/cell_result.h"

namespace coexist::capacity {

// Empties coexist.range_checkpoints: a cell's range job starts a new pass
// from the first key, never an earlier cell's.
void ForgetRangeCheckpoints(pqxx::transaction_base& tx);

// A trigger on coexist.range_checkpoints that records each chunk's applied
// rows, its run and its time in public.simulate_range_chunks (emptied): a
// range chunk leaves no done_chunks row, and the report's chunks and the
// projection model need them.
void RecordRangeChunks(pqxx::transaction_base& tx);

// The demo's ledger check of a range cell: every row of the range
// (public.batch_range_rows) applied exactly once, except those the queue
// still holds (an exception deferred, dead or queued: not applied), and no
// other row applied; the sum of the differences. A row never reached
// counts only when the pass `finished`; otherwise the window stopped the
// walk before it.
long long RangeLedgerMismatch(pqxx::transaction_base& tx, const std::string& job, bool finished);

// A range cell's chunks in the order they ended, each timed from its run's
// start: the walk's (RecordRangeChunks) and the exceptions done through
// the queue.
std::vector<ChunkPoint> ReadRangeChunks(pqxx::transaction_base& tx, const std::string& job);

}  // namespace coexist::capacity
