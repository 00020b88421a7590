#pragma once

// The SQL of a range chunk's cheap way (batch/range_chunk_call.h) in ONE
// server call: a session-local PL/pgSQL function, pg_temp.coexist_range_chunk,
// does what batch/range_walk.cpp's statements do one round trip each, under
// the same rules, and is called alone, outside an explicit transaction, so
// that the call is the chunk's whole transaction (one round trip a chunk,
// against BEGIN, UPDATE, COMMIT for a set-based statement):
//
//   1. the run's fence (coexist.hold_run): not running -> 'fenced';
//   2. the segment's checkpoint row, FOR UPDATE SKIP LOCKED: held by
//      another chunk -> 'busy'; finished or of another pass -> 'walked';
//   3. up to `size` keys above the checkpoint that match batch.range.where,
//      in key order, FOR UPDATE NOWAIT: a row held elsewhere raises
//      55P03 and the whole call rolls back; none left -> the segment is
//      finished, 'walked';
//   4. keys an earlier pass left queued (queued or deferred) are passed by:
//      they are the queue's;
//   5. a live edit lock, or a row a run owns (target.owner_column), on any
//      key left -> 'retake' before anything is written: the chunk is taken
//      again the careful way, whose statements send them to the queue;
//   6. the operation, by its prepared statement (`statement`, run with
//      SQL EXECUTE), on the keys left; its error rolls the call back;
//   7. the checkpoint moved to the chunk's last key -> 'applied'.
//
// Each statement of a VOLATILE function takes a new snapshot (READ
// COMMITTED), so step 5 reads the edit locks after step 3 locked the rows,
// as the careful way does: an editor's acquire_edit_lock waits for the row
// lock, so no edit lock appears in between.
//
// With operation.set, coexist writes the UPDATE and it repeats the
// predicate, so step 3 only reads where the chunk ends (its last key and
// how many there are; no lock: a lock first writes every row once more
// before the UPDATE writes it) and step 6 comes before step 5: the UPDATE
// of the matching rows from the checkpoint to there (step 4's keys left
// out), under a 1 ms lock_timeout (a held row raises 55P03: the careful
// way), takes the rows' locks itself and checks the predicate again on the
// version it changes (a row changed since the read so that it no longer
// matches is left alone); then a live edit lock or an owned row anywhere
// in the chunk's key range (changed or not: a false alarm only costs the
// careful way) raises 55P03 too, which rolls the whole call back, UPDATE
// included. Under the UPDATE's row locks no edit lock can appear
// (acquire_edit_lock waits for them), so what step 5 reads after it is what
// holds. docs/batch.md, "Range jobs".
//
// Pure text: no database, no libpqxx.

#include <functional>
#include <optional>
#include <string>

namespace coexist::db {

// What the function is built around: the target's names, already quoted
// (quote_name), the job's predicate and the operation.
struct RangeChunkSpec {
  std::string table;                        // "schema"."table"
  std::string key;                          // "key column"
  std::string key_type;                     // its type, as format_type gives it
  std::string where;                        // batch.range.where, as written
  std::optional<std::string> owner_column;  // target.owner_column, quoted
  // operation.set: the UPDATE it stands for of the rows a condition on them
  // selects (batch::SetUpdate). Unset for chunk_sql and item_sql, whose
  // prepared statement (`statement`, keys as $1) runs by name.
  std::function<std::string(const std::string& rows)> set_update;
  std::string statement;
};

// CREATE OR REPLACE FUNCTION pg_temp.coexist_range_chunk(run_id, job,
// segment, pass, size, skip_queued_keys) for `spec`.
std::string RangeChunkFunctionSql(const RangeChunkSpec& spec);

// The call: one row of (state, keys, applied), state one of 'fenced',
// 'busy', 'walked', 'retake', 'applied'.
inline constexpr const char* kRangeChunkCallSql =
    "SELECT cx_state, cx_keys, cx_applied FROM pg_temp.coexist_range_chunk($1, $2, $3, $4, $5, $6)";

}  // namespace coexist::db
