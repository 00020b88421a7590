#pragma once

// The statements on coexist.range_checkpoints: where a range job's walk
// stands (docs/batch.md, "Range jobs"). A pass splits the job's key range
// into segments, one row each; a chunk locks its segment's row, and its
// apply and the row's new checkpoint commit in the caller's transaction.
//
// Keys are the key type's canonical text (db::RecordKey). Errors are
// libpqxx's, uncaught.
//
// Thread safety: plain functions; a transaction is used by one thread.

#include <optional>
#include <string>
#include <vector>

namespace pqxx {
class transaction_base;
}  // namespace pqxx

namespace coexist::db {

// One segment of a pass.
struct RangeSegment {
  int segment = 0;
  long long pass = 0;
  std::optional<std::string> upper_key;  // inclusive; nullopt: no bound
  std::optional<std::string> last_key;   // the checkpoint; nullopt: from the start
  bool finished = false;
  long long applied = 0;
  long long exceptions = 0;
  // Its share of the rows the predicate selected when the pass started
  // (0035): progress and an ETA are its rows walked against it.
  long long expected = 0;
};

// The job's segments of its current pass, by segment; empty when no pass
// was ever started.
std::vector<RangeSegment> ReadSegments(pqxx::transaction_base& tx, const std::string& job);

// Serializes the start of the job's passes until `tx` ends (0035): shared
// runs that start at once read, under it, whether a pass is open before
// one of them starts the next.
void LockPassStart(pqxx::transaction_base& tx, const std::string& job);

// Starts pass `pass` of the job over the bounds `uppers` (each segment's
// inclusive last key, ascending; the last segment has no bound), the
// `matching_rows` the predicate selects now shared among the segments as
// their `expected`: the old pass's rows go. Returns the new segments.
std::vector<RangeSegment> StartPass(pqxx::transaction_base& tx, const std::string& job,
                                    long long pass, const std::vector<std::string>& uppers,
                                    long long matching_rows);

// Locks the segment's row (FOR UPDATE SKIP LOCKED) and reads it: the chunk
// that holds it is the only one walking the segment until it commits.
// nullopt: another chunk (of this run or a sibling run) holds it now.
std::optional<RangeSegment> TryLockSegment(pqxx::transaction_base& tx, const std::string& job,
                                           int segment);

// The chunk's checkpoint: `last_key` and its counts, by `run_id`.
void AdvanceSegment(pqxx::transaction_base& tx, const std::string& job, int segment,
                    const std::string& last_key, long long applied, long long exceptions,
                    long long run_id);

// No key is left above the checkpoint: the segment is walked.
void FinishSegment(pqxx::transaction_base& tx, const std::string& job, int segment,
                   long long run_id);

}  // namespace coexist::db
