#pragma once

// Range jobs (batch.range): the job's items are the target's rows matching
// batch.range.where, walked in key order (keyset, never OFFSET) chunk by
// chunk. Each chunk reads its next keys above the checkpoint, locks what it
// can (FOR UPDATE SKIP LOCKED), applies the operation to those rows with the
// queued path's Operation, sends the rows it could not have to coexist.queue
// as exceptions, and moves its checkpoint (coexist.range_checkpoints) in the
// same transaction. When every segment is walked, the run's workers retry
// the exceptions through the queue path, under the policy's deferral limits.
// docs/batch.md, "Range jobs". Private to batch/ (libpqxx).

#include <atomic>
#include <functional>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "batch/runner.h"
#include "config/config.h"

namespace coexist::batch {

// A run's pass over the range, shared by its workers.
struct RangeWalk {
  long long pass = 0;
  bool resumed = false;       // the pass was started by an earlier run
  std::vector<int> segments;  // the pass's segments still to walk
  // The job had queue items (exceptions of an earlier pass, dead or
  // deferred) when the walk started: a chunk leaves their keys to the queue.
  bool skip_queued_keys = false;
  std::atomic<int> walking{0};  // workers still walking their segments
};

class Operation;
class RecordSql;

// A pass is split into this many segments per worker: a worker whose
// segment is walked helps with the others (its run's, and with shared runs
// its sibling runs'), so a slow segment or a run that joins late does not
// leave workers idle.
inline constexpr int kSegmentsPerWorker = 4;

// Step 2b of a range job's run: joins the job's unfinished pass (started by
// an earlier run, or by a shared sibling starting beside it), or starts the
// next one, split into workers x kSegmentsPerWorker segments by the keys the
// predicate selects now. `tx` is the run's control connection's; it holds
// the pass-start lock until it commits.
void PreparePass(pqxx::transaction_base& tx, const config::Config& config, RecordSql& sql,
                 bool job_has_items, RangeWalk& walk);

// The pass as the checkpoints say now.
RangeProgress ReadProgress(pqxx::transaction_base& tx, const config::Config& config,
                           const RangeWalk& walk);

// What a worker's range chunk works with (its connection's).
struct RangeChunkParts {
  const config::Config& config;
  RecordSql& sql;
  const Operation& operation;
  long long run_id;
};

// How a chunk takes its rows. kAllFree: read and locked in one statement
// (FOR UPDATE NOWAIT), the cheap way when no other transaction holds any of
// them, as on most chunks. kWhatIsFree: read, then locked what can be (SKIP
// LOCKED), the rows held going to the queue.
enum class RangeRead { kAllFree, kWhatIsFree };

struct RangeChunkResult {
  bool walked = false;  // no key left in the segment: it is finished
  bool busy = false;    // another chunk holds the segment now: nothing done
  // kAllFree could not finish (a row held, or the operation failed): the
  // transaction is aborted, nothing done; the chunk is taken again with
  // kWhatIsFree in a new one.
  bool retake = false;
  int keys = 0;              // keys the chunk read
  long long applied = 0;     // rows the operation was applied to
  long long exceptions = 0;  // rows sent to coexist.queue
  bool timed_out = false;    // the operation hit statement_timeout or lock_timeout
  std::string error;         // why the operation failed, when it did
  bool fenced = false;       // the run is no longer running: nothing done
};

// Judges the operation's failure (the worker's JudgeFailure): throws what
// stops the run; otherwise returns the error and sets `timed_out`.
using JudgeFailureFn = std::function<std::string(const pqxx::failure&, bool& timed_out)>;

// One chunk of `segment` of `walk`'s pass, in `tx` (the caller starts it,
// fences the run and commits): at most `size` keys above the checkpoint,
// the locked rows applied, the others matching still sent to the queue, the
// checkpoint moved to the chunk's last key. A segment of a later pass (a
// shared sibling started it once this one was walked) counts as walked.
RangeChunkResult ApplyRangeChunk(pqxx::transaction_base& tx, const RangeChunkParts& parts,
                                 const RangeWalk& walk, int segment, int size, RangeRead read,
                                 const JudgeFailureFn& judge);

// The cheap way (RangeRead::kAllFree) of the same chunk as one server call
// on `conn`, which has no transaction open and the call created on it
// (batch/range_chunk_call.h): the run's fence, the chunk and its checkpoint
// commit together or not at all. `retake` when a row is held, edit-locked or
// owned by a run, or the operation failed: nothing was done, and the chunk
// is taken the careful way. What stops the run is thrown as
// ApplyRangeChunk's judge throws it.
RangeChunkResult ApplyRangeChunkInOneCall(pqxx::connection_base& conn, const RangeChunkParts& parts,
                                          const RangeWalk& walk, int segment, int size,
                                          const JudgeFailureFn& judge);

}  // namespace coexist::batch
