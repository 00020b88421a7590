#include "batch/range_walk.h"

#include <algorithm>
#include <set>

#include "batch/operation.h"
#include "batch/range_chunk_call.h"
#include "batch/record_sql.h"
#include "schema/queue_store.h"
#include "schema/range_store.h"

namespace coexist::batch {
namespace {

// The careful way's apply: under a savepoint, so that a failed operation
// leaves the chunk's other work (its exceptions, its checkpoint) to commit.
void ApplyCarefully(pqxx::transaction_base& tx, const RangeChunkParts& parts,
                    const std::vector<Item>& items, const JudgeFailureFn& judge,
                    RangeChunkResult& result, std::vector<RecordKey>& exceptions) {
  Savepoint applying(tx, "coexist_range_apply");
  try {
    parts.operation.Apply(tx, items);
    applying.Release();
    result.applied = static_cast<long long>(items.size());
  } catch (const pqxx::failure& e) {
    // Throws what stops the run; otherwise the rows go to the queue, whose
    // path tries them again by halves and charges the failing ones.
    result.error = judge(e, result.timed_out);
    applying.Rollback();
    for (const auto& item : items) exceptions.push_back(item.key);
  }
}

}  // namespace

void PreparePass(pqxx::transaction_base& tx, const config::Config& config, RecordSql& sql,
                 bool job_has_items, RangeWalk& walk) {
  const std::string& job = config.batch.job;
  db::LockPassStart(tx, job);
  auto segments = db::ReadSegments(tx, job);
  bool open = std::any_of(segments.begin(), segments.end(),
                          [](const db::RangeSegment& s) { return !s.finished; });
  walk.resumed = open;
  if (!open) {
    long long pass = segments.empty() ? 1 : segments.front().pass + 1;
    // Split where the matching rows are now: the workers walk side by side,
    // each segment with its own checkpoint.
    auto split = sql.RangeBounds(tx, config.batch.workers * kSegmentsPerWorker);
    segments = db::StartPass(tx, job, pass, split.bounds, split.rows);
  }
  walk.pass = segments.front().pass;
  walk.segments.clear();
  for (const auto& s : segments) {
    if (!s.finished) walk.segments.push_back(s.segment);
  }
  walk.skip_queued_keys = job_has_items;
}

RangeProgress ReadProgress(pqxx::transaction_base& tx, const config::Config& config,
                           const RangeWalk& walk) {
  RangeProgress progress;
  progress.pass = walk.pass;
  progress.resumed = walk.resumed;
  progress.finished = true;
  for (const auto& s : db::ReadSegments(tx, config.batch.job)) {
    progress.finished = progress.finished && s.finished;
    progress.applied += s.applied;
    progress.exceptions += s.exceptions;
  }
  return progress;
}

RangeChunkResult ApplyRangeChunk(pqxx::transaction_base& tx, const RangeChunkParts& parts,
                                 const RangeWalk& walk, int segment, int size, RangeRead read,
                                 const JudgeFailureFn& judge) {
  RangeChunkResult result;
  const std::string& job = parts.config.batch.job;
  auto locked_segment = db::TryLockSegment(tx, job, segment);
  if (!locked_segment) {
    result.busy = true;
    return result;
  }
  const auto& seg = *locked_segment;
  if (seg.finished || seg.pass != walk.pass) {
    result.walked = true;
    return result;
  }
  RecordSql::RangeChunk chunk;
  if (read == RangeRead::kAllFree) {
    auto keys = parts.sql.LockFreeRangeChunk(tx, seg.last_key, seg.upper_key, size);
    if (!keys) {
      result.retake = true;
      return result;
    }
    chunk.keys = std::move(*keys);  // all of them locked
  } else {
    chunk = parts.sql.ReadRangeChunk(tx, seg.last_key, seg.upper_key, size);
  }
  if (chunk.keys.empty()) {
    db::FinishSegment(tx, job, segment, parts.run_id);
    result.walked = true;
    return result;
  }
  result.keys = static_cast<int>(chunk.keys.size());
  // Keys an earlier pass left in the queue are the queue's: applied there,
  // once, in their order; the walk passes them by.
  std::set<RecordKey> queued;
  if (walk.skip_queued_keys) {
    for (auto& key : db::PendingKeys(tx, job, chunk.keys)) queued.insert(std::move(key));
  }
  const bool all_locked = read == RangeRead::kAllFree;
  std::set<RecordKey> locked(chunk.locked.begin(), chunk.locked.end());
  std::vector<RecordKey> apply, missed;
  for (const auto& key : chunk.keys) {
    if (queued.count(key)) continue;
    (all_locked || locked.count(key) ? apply : missed).push_back(key);
  }
  // The walk takes only what is free now, under every policy: a row with a
  // live edit lock, or one a run owns (status_partition's takeover of a
  // queued item), is the queue path's, which decides it as the policy says
  // (wait, revoke, cancel the blocker, defer), as it does row-locked rows.
  std::vector<RecordKey> exceptions;
  if (!apply.empty()) {
    std::set<RecordKey> taken;
    for (const auto& lock : parts.sql.LiveEditLocks(tx, apply)) taken.insert(lock.key);
    for (auto& key : parts.sql.BatchOwnedRecords(tx, apply)) taken.insert(std::move(key));
    if (!taken.empty()) {
      std::erase_if(apply, [&](const RecordKey& key) { return taken.count(key) > 0; });
      exceptions.assign(taken.begin(), taken.end());
    }
  }
  // A row the lock did not get is either held by another transaction or no
  // longer matches (changed since the read): only the first is an exception.
  if (!missed.empty()) {
    for (auto& key : parts.sql.MatchingRecords(tx, missed)) exceptions.push_back(std::move(key));
  }
  if (!apply.empty()) {
    std::vector<Item> items;
    items.reserve(apply.size());
    for (const auto& key : apply) items.push_back(Item{0, key, "", 0, 0, {key}});
    if (read == RangeRead::kAllFree) {
      // No savepoint on the cheap path (two round trips a chunk): a failed
      // operation has the chunk taken again the careful way, which queues
      // the rows. What stops the run (a lost connection above all: a new
      // transaction on it would reconnect without the session's settings)
      // is thrown here as the careful way would throw it.
      try {
        parts.operation.Apply(tx, items);
      } catch (const pqxx::failure& e) {
        bool timed_out = false;
        judge(e, timed_out);
        result.retake = true;
        return result;
      }
      result.applied = static_cast<long long>(apply.size());
    } else {
      ApplyCarefully(tx, parts, items, judge, result, exceptions);
    }
  }
  if (!exceptions.empty()) {
    // Queued in the chunk's key order.
    std::set<RecordKey> excepted(exceptions.begin(), exceptions.end());
    std::vector<std::vector<RecordKey>> keys;
    for (const auto& key : chunk.keys) {
      if (excepted.count(key)) keys.push_back({key});
    }
    std::vector<std::optional<std::string>> none(keys.size());
    db::InsertItems(tx, job, parts.sql.key_type(), keys, none, none);
    result.exceptions = static_cast<long long>(keys.size());
  }
  db::AdvanceSegment(tx, job, segment, chunk.keys.back(), result.applied, result.exceptions,
                     parts.run_id);
  return result;
}

RangeChunkResult ApplyRangeChunkInOneCall(pqxx::connection_base& conn, const RangeChunkParts& parts,
                                          const RangeWalk& walk, int segment, int size,
                                          const JudgeFailureFn& judge) {
  RangeChunkResult result;
  RangeCallResult call;
  try {
    call = CallRangeChunk(conn, parts.run_id, parts.config.batch.job, segment, walk.pass, size,
                          walk.skip_queued_keys);
  } catch (const pqxx::failure& e) {
    // A held row (55P03) or the operation's error: judged as the statements'
    // cheap way judges its apply, and taken again the careful way.
    bool timed_out = false;
    judge(e, timed_out);
    result.retake = true;
    return result;
  }
  switch (call.state) {
    case RangeCallState::kFenced:
      result.fenced = true;
      break;
    case RangeCallState::kBusy:
      result.busy = true;
      break;
    case RangeCallState::kWalked:
      result.walked = true;
      break;
    case RangeCallState::kRetake:
      result.retake = true;
      break;
    case RangeCallState::kApplied:
      result.keys = call.keys;
      result.applied = call.applied;
      break;
  }
  return result;
}

}  // namespace coexist::batch
