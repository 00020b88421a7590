#include "batch/worker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <stdexcept>
#include <thread>

#include "batch/budget.h"
#include "batch/operation.h"
#include "batch/range_chunk_call.h"
#include "batch/range_walk.h"
#include "batch/record_sql.h"
#include "batch/runner.h"
#include "batch/worker_session.h"
#include "common/log.h"
#include "db/connection.h"
#include "db/failure.h"
#include "db/sqlstate.h"
#include "pacing/pacer.h"

namespace coexist::batch {

using policies::Action;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

struct Worker::Outcome {
  std::vector<Item> apply;  // decided: apply in this chunk
  std::vector<long long> applied;
  std::vector<Failure> failures;
  std::vector<Failure> refused;  // failed before any SQL ran: the item does not fit the operation
  std::vector<Deferral> deferrals;
  std::vector<Deferral> timeouts;  // timed out (or rolled back) again after the split: deferred
  // Items naming a key with no row in the target (batch.missing_rows), of
  // which `skipped` were done without the operation and `no_row` died.
  long long missing = 0;
  std::vector<long long> skipped;
  std::vector<Failure> no_row;
  long long dead = 0;
  long long escalated = 0;
  long long revoked = 0;
  long long signalled = 0;
  // Of failures and refused: items on their first attempt. Retries of items
  // already known to fail say nothing new (batch.max_consecutive_failures).
  long long first_attempt_failures = 0;
  bool timed_out = false;  // the operation hit statement_timeout or lock_timeout
  milliseconds lock_wait{0};

  long long deferred() const { return static_cast<long long>(deferrals.size() + timeouts.size()); }
  long long settled() const {
    return static_cast<long long>(applied.size() + failures.size() + refused.size() +
                                  skipped.size() + no_row.size()) +
           deferred();
  }
};

namespace {

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// Defers the timed-out items; those the queue store found dead instead
// (batch.max_timeouts) leave `timeouts`: returns how many died.
long long DeferTimeouts(db::QueueStore& queue, pqxx::transaction_base& tx, long long run_id,
                        std::vector<Deferral>& timeouts) {
  auto died = queue.DeferItems(tx, run_id, timeouts);
  std::erase_if(timeouts, [&](const Deferral& d) {
    return std::binary_search(died.begin(), died.end(), d.item_id);
  });
  return static_cast<long long>(died.size());
}

// The live edit locks by record key.
std::map<RecordKey, EditLock> EditLocksByKey(std::vector<EditLock> locks) {
  std::map<RecordKey, EditLock> out;
  for (auto& lock : locks) out.emplace(lock.key, std::move(lock));
  return out;
}

// Those of `locks` on `item`'s records, in its key order.
std::vector<EditLock> LocksOf(const Item& item, const std::map<RecordKey, EditLock>& locks) {
  std::vector<EditLock> out;
  for (const auto& key : item.keys) {
    auto lock = locks.find(key);
    if (lock != locks.end()) out.push_back(lock->second);
  }
  return out;
}

// Counts NOTIFY coexist_edit_lock_released on the aux connection.
struct Listener : pqxx::notification_receiver {
  explicit Listener(pqxx::connection_base& conn)
      : pqxx::notification_receiver(conn, "coexist_edit_lock_released") {}
  void operator()(const std::string& /*payload*/, int /*pid*/) override { ++received; }
  long long received = 0;
};

}  // namespace

void Counters::AddDeferral(const std::string& reason) {
  std::lock_guard lock(reasons_mutex_);
  ++deferrals_by_reason_[reason];
}

void Counters::NoteFailure(const std::string& error) {
  std::lock_guard lock(reasons_mutex_);
  last_failure_ = error;
}

std::string Counters::LastFailure() const {
  std::lock_guard lock(reasons_mutex_);
  return last_failure_;
}

RunCounts Counters::Snapshot() const {
  RunCounts counts;
  counts.claimed = claimed;
  counts.done = done;
  counts.deferred = deferred;
  counts.dead = dead;
  counts.missing = missing;
  counts.escalated = escalated;
  counts.revoked = revoked;
  counts.signalled = signalled;
  std::lock_guard lock(reasons_mutex_);
  counts.deferrals_by_reason = deferrals_by_reason_;
  return counts;
}

std::vector<Item> KeysInFlight::Take(int worker, const std::vector<Item>& items) {
  std::lock_guard lock(mutex_);
  std::vector<Item> taken;
  for (const auto& item : items) {
    // An item is taken with all its keys or not at all. A key this worker
    // already took for this chunk is refused too: two items sharing a key
    // never share a statement (the claim already orders them, docs/batch.md;
    // this keeps the chunk's keys unique regardless).
    bool free = std::none_of(item.keys.begin(), item.keys.end(),
                             [&](const RecordKey& key) { return holder_.count(key) > 0; });
    if (!free) continue;
    for (const auto& key : item.keys) holder_.emplace(key, worker);
    taken.push_back(item);
  }
  return taken;
}

void KeysInFlight::Release(int worker) {
  {
    std::lock_guard lock(mutex_);
    std::erase_if(holder_, [worker](const auto& entry) { return entry.second == worker; });
    ++releases_;
  }
  released_.notify_all();
}

void KeysInFlight::WaitForRelease(milliseconds timeout) {
  std::unique_lock lock(mutex_);
  auto seen = releases_;
  released_.wait_for(lock, timeout, [&] { return releases_ != seen; });
}

struct Worker::Db {
  std::unique_ptr<pqxx::connection> conn;
  std::unique_ptr<pqxx::connection> aux;  // LISTEN and blocker lookups, when the policy waits
  std::unique_ptr<db::QueueStore> queue;
  std::unique_ptr<RecordSql> sql;
  std::unique_ptr<RecordSql> aux_sql;
  std::unique_ptr<Operation> operation;
  std::unique_ptr<Listener> listener;
  // A range job's cheap way is one server call (batch/range_chunk_call.h).
  bool range_call = false;
};

Worker::Worker(int index, std::string conninfo, const config::Config& config,
               const policies::Policy& policy, long long run_id, Counters& counters,
               const std::atomic<bool>& stop, pacing::Pacer& pacer, KeysInFlight& keys,
               RunBudget& budget)
    : index_(index),
      conninfo_(std::move(conninfo)),
      config_(config),
      policy_(policy),
      run_id_(run_id),
      counters_(counters),
      stop_(stop),
      pacer_(pacer),
      keys_(keys),
      budget_(budget) {}

Worker::~Worker() = default;

void Worker::Run() {
  db_ = std::make_unique<Db>();
  auto& conn_ = db_->conn;
  conn_ = db::Connect(conninfo_, config_.database.application_name);
  SetUpWorkerSession(*conn_, config_, index_);
  db_->sql = std::make_unique<RecordSql>(*conn_, config_);
  db_->queue = std::make_unique<db::QueueStore>(*conn_, QueueJobOf(config_, db_->sql->target()));
  db_->operation = std::make_unique<Operation>(*conn_, config_, db_->sql->key_type());
  if (range_ != nullptr) {
    db_->range_call = CreateRangeChunkCall(*conn_, config_, *db_->sql, *db_->operation);
  }
  if (policy_.WantsBlockers() || policy_.WaitsForEditLocks()) {
    db_->aux = db::Connect(conninfo_, config_.database.application_name);
    LowerBackendPriority(*db_->aux, config_, index_);
    db_->aux_sql = std::make_unique<RecordSql>(*db_->aux, config_);
    db_->listener = std::make_unique<Listener>(*db_->aux);
  }
  if (range_ != nullptr && !WalkRange()) {
    spdlog::debug("worker finished worker={} reason={}", index_,
                  ToString(stop_reason_.value_or(StopReason::kDrained)));
    return;
  }
  long long after = 0;
  while (true) {
    auto size = NextChunkSize();
    if (!size) break;
    if (RunChunk(after, *size)) continue;
    if (after > 0) {  // one pass from the start: retried items sit below `after`
      after = 0;
      continue;
    }
    if (waiting_.empty() || !WaitForWaiting()) break;
  }
  spdlog::debug("worker finished worker={} reason={}", index_,
                ToString(stop_reason_.value_or(StopReason::kDrained)));
}

std::optional<int> Worker::NextChunkSize() {
  while (true) {
    if (stop_) {
      stop_reason_ = StopReason::kStopped;
      return std::nullopt;
    }
    if (TooManyFailuresInARow()) {
      stop_reason_ = StopReason::kFailuresInARow;
      return std::nullopt;
    }
    if (budget_.OutOfTime(steady_clock::now())) {
      stop_reason_ = StopReason::kMaxDuration;
      return std::nullopt;
    }
    auto gate = policy_.MayClaim(std::chrono::system_clock::now());
    if (!gate.allowed) {
      stop_reason_ = gate.reason;
      return std::nullopt;
    }
    // Blocks while the run is paused or throttled; nullopt: pacing says stop.
    auto size = pacer_.BeforeChunk();
    if (!size) {
      stop_reason_ = stop_ ? StopReason::kStopped : pacer_.WhyStopped();
      return std::nullopt;
    }
    auto allowed = budget_.Allow(*size, steady_clock::now());
    if (allowed.stop) {
      stop_reason_ = allowed.stop;
      return std::nullopt;
    }
    if (allowed.size > 0) return allowed.size;
    // Held back by max_rate, or max_items in a sibling's hands: a short
    // wait, then every check again (a stop is seen within it).
    budget_.WaitForSettle(std::min<steady_clock::duration>(allowed.wait, milliseconds(200)));
  }
}

bool Worker::WalkRange() {
  // However the walk ends, the siblings waiting for it stop waiting.
  struct Walked {
    std::atomic<int>& walking;
    bool counted = false;
    void Done() {
      if (!counted) --walking;
      counted = true;
    }
    ~Walked() { Done(); }
  } walked{range_->walking};
  RangeChunkParts parts{config_, *db_->sql, *db_->operation, run_id_};
  auto judge = [this](const pqxx::failure& e, bool& timed_out) {
    return JudgeFailure(e, timed_out).error;
  };
  // Each worker starts at a segment of its own and stays with it until it
  // is walked, then helps with the others in turn, its sibling runs'
  // included: a segment another chunk holds at that moment is passed by,
  // and when every segment left is held, the worker waits a little.
  const auto& segments = range_->segments;
  std::vector<bool> walked_segment(segments.size(), false);
  size_t left = segments.size();
  size_t at = segments.empty() ? 0 : index_ % segments.size();
  size_t held_in_a_row = 0;
  constexpr int kChunksAfterContention = 16;
  int chunks_since_contention = kChunksAfterContention;
  while (left > 0) {
    if (walked_segment[at]) {
      at = (at + 1) % segments.size();
      continue;
    }
    auto size = NextChunkSize();
    if (!size) return false;
    ChunkAllowance allowance(budget_, *size);
    auto started = steady_clock::now();
    // A held row costs the cheap read a wasted statement: after one, the
    // next chunks lock what is free, then try the cheap read again.
    RangeRead read = chunks_since_contention >= kChunksAfterContention ? RangeRead::kAllFree
                                                                       : RangeRead::kWhatIsFree;
    RangeChunkResult chunk;
    for (;;) {
      if (read == RangeRead::kAllFree && db_->range_call) {
        chunk = ApplyRangeChunkInOneCall(*db_->conn, parts, *range_, segments[at], *size, judge);
        if (chunk.fenced) ThrowFenced();
      } else {
        pqxx::work tx(*db_->conn);
        HoldRun(tx);
        chunk = ApplyRangeChunk(tx, parts, *range_, segments[at], *size, read, judge);
        if (!chunk.retake) tx.commit();
      }
      if (!chunk.retake) break;
      read = RangeRead::kWhatIsFree;
      chunks_since_contention = 0;
    }
    ++chunks_since_contention;
    if (chunk.walked || chunk.busy) {
      if (chunk.walked) {
        walked_segment[at] = true;
        --left;
        held_in_a_row = 0;
      } else if (++held_in_a_row >= left) {
        held_in_a_row = 0;
        std::this_thread::sleep_for(milliseconds(20));
      }
      at = (at + 1) % segments.size();
      continue;
    }
    held_in_a_row = 0;
    allowance.Used(chunk.applied);
    counters_.claimed += chunk.applied;
    counters_.done += chunk.applied;
    if (chunk.applied > 0) counters_.failures_in_a_row = 0;
    if (!chunk.error.empty()) counters_.NoteFailure(chunk.error);
    auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - started);
    spdlog::debug(
        "range chunk finished worker={} segment={} keys={} applied={} exceptions={} took_ms={}",
        index_, segments[at], chunk.keys, chunk.applied, chunk.exceptions, took.count());
    pacer_.AfterChunk({.items = chunk.keys, .took = took, .hit_timeout = chunk.timed_out});
  }
  // The exceptions are retried once every segment is walked: a sibling
  // still walking may send more.
  walked.Done();
  while (range_->walking > 0) {
    if (stop_) {
      stop_reason_ = StopReason::kStopped;
      return false;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

bool Worker::RunChunk(long long& after, int size) {
  // However the chunk ends, its keys are free for the siblings afterwards.
  struct ReleaseKeys {
    KeysInFlight& keys;
    int worker;
    ~ReleaseKeys() { keys.Release(worker); }
  } release{keys_, index_};
  ChunkAllowance allowance(budget_, size);
  Outcome out;
  auto now = steady_clock::now();
  auto started = now;
  std::vector<long long> exclude;
  for (const auto& [id, w] : waiting_) {
    if (w.due > now) exclude.push_back(id);
  }
  {
    pqxx::work tx(*db_->conn);
    HoldRun(tx);
    auto claimed = db_->queue->ClaimItems(tx, run_id_, size, after, exclude, policy_.TakesOver());
    if (claimed.empty()) return false;
    after = claimed.back().item_id;
    // Items whose key a sibling worker holds stay queued (this transaction
    // only locked their queue rows) for a later chunk.
    auto items = keys_.Take(index_, claimed);
    if (items.empty()) {
      tx.abort();
      keys_.WaitForRelease(milliseconds(50));
      return true;
    }
    items = SettleMissing(tx, std::move(items), out);
    if (items.empty()) {
      // batch.missing_rows settled every item (skip, fail): nothing to apply.
    } else if (policy_.TakesOver()) {
      Decide(tx, items, out);
      // status_partition, step 1: the records become the batch's (CX004
      // for online writers) and the row locks go with this commit.
      db_->sql->TakeOver(tx, run_id_, out.apply);
      db_->queue->DeferItems(tx, run_id_, out.deferrals);
      out.dead += db_->queue->FailItems(tx, run_id_, out.refused);
    } else {
      std::optional<ApplyFailure> failed;
      if (!ApplyUnprobed(tx, items, out, failed)) {
        Decide(tx, items, out);
        // The failed try stands for the first try of the same items only:
        // a smaller set (some deferred) is tried afresh, or an item could
        // be charged with the error of one that is no longer in it.
        if (out.apply.size() != items.size()) failed.reset();
        ApplyScanning(tx, out.apply, out, false, failed);
      }
      Finish(tx, out);
    }
    try {
      tx.commit();
    } catch (const pqxx::failure& e) {
      // status_partition's takeovers are handed back by the sweep instead.
      if (policy_.TakesOver() || db::Classify(e) != db::FailureKind::kInDoubt) throw;
      if (!CommittedInDoubt(std::current_exception(), out)) return true;
    }
  }
  if (policy_.TakesOver() && !out.apply.empty()) {
    // Step 2: process what we own, complete, hand back, in one transaction.
    pqxx::work tx(*db_->conn);
    HoldRun(tx);
    std::vector<long long> ids;
    for (const auto& item : out.apply) ids.push_back(item.item_id);
    auto owned = db_->queue->RelockItems(tx, ids);
    ApplyScanning(tx, owned, out);
    db_->queue->CompleteItems(tx, run_id_, out.applied);
    out.dead += db_->queue->FailItems(tx, run_id_, out.failures);
    out.dead += DeferTimeouts(*db_->queue, tx, run_id_, out.timeouts);
    db_->sql->HandBack(tx, out.apply);
    tx.commit();
  }
  Publish(out);
  allowance.Used(out.settled());
  int settled = static_cast<int>(out.settled());
  auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - started);
  spdlog::debug("chunk finished worker={} size={} settled={} took_ms={} lock_wait_ms={}", index_,
                size, settled, took.count(), out.lock_wait.count());
  pacer_.AfterChunk(
      {.items = settled, .took = took, .hit_timeout = out.timed_out, .lock_wait = out.lock_wait});
  return true;
}

// One plain read of the chunk's keys finds the items naming a key with no
// row in the target: counted and reported (an items_missing event, a log
// line) under every batch.missing_rows mode, never silently done. apply:
// they go on with the others (an operation that creates rows); skip: done
// here without the operation; fail: dead here, whatever attempts are left.
// Returns the items that go on.
std::vector<Item> Worker::SettleMissing(pqxx::dbtransaction& tx, std::vector<Item> items,
                                        Outcome& out) {
  std::vector<RecordKey> keys;
  for (const auto& item : items) keys.insert(keys.end(), item.keys.begin(), item.keys.end());
  auto existing = db_->sql->ExistingRecords(tx, keys);
  std::set<RecordKey> found(existing.begin(), existing.end());
  // A chunk's keys are distinct (KeysInFlight::Take): all found, none missing.
  if (found.size() == keys.size()) return items;
  auto mode = config_.batch.missing_rows;
  std::vector<Item> rest;
  nlohmann::json ids = nlohmann::json::array();
  nlohmann::json absent_keys = nlohmann::json::array();
  for (auto& item : items) {
    std::vector<RecordKey> absent;
    for (const auto& key : item.keys) {
      if (!found.count(key)) absent.push_back(key);
    }
    if (absent.empty()) {
      rest.push_back(std::move(item));
      continue;
    }
    ++out.missing;
    ids.push_back(item.item_id);
    for (const auto& key : absent) absent_keys.push_back(key);
    if (mode == config::MissingRows::kSkip) {
      out.skipped.push_back(item.item_id);
    } else if (mode == config::MissingRows::kFail) {
      std::string which =
          absent.size() == 1 ? "key " + absent[0] : std::to_string(absent.size()) + " of its keys";
      out.no_row.push_back({item.item_id, "no row: " + config_.target.Name() + " has no row for " +
                                              which + " (batch.missing_rows: fail)"});
    } else {
      rest.push_back(std::move(item));
    }
  }
  const char* name = mode == config::MissingRows::kSkip   ? "skip"
                     : mode == config::MissingRows::kFail ? "fail"
                                                          : "apply";
  db_->queue->AddEvent(tx, EventKind::kItemsMissing, run_id_,
                       nlohmann::json{{"target", config_.target.Name()},
                                      {"missing_rows", name},
                                      {"items", ids.size()},
                                      {"item_ids", ids},
                                      {"keys", absent_keys}}
                           .dump());
  spdlog::warn("items missing their rows worker={} items={} missing_rows={} item_ids={} keys={}",
               index_, ids.size(), name, ids.dump(), log::Value(absent_keys.dump()));
  db_->queue->CompleteItems(tx, run_id_, out.skipped);
  out.dead += db_->queue->FailItems(tx, run_id_, out.no_row, /*dead_now=*/true);
  return rest;
}

bool Worker::TooManyFailuresInARow() {
  int limit = config_.batch.max_consecutive_failures;
  long long in_a_row = counters_.failures_in_a_row;
  if (limit == 0 || in_a_row < limit) return false;
  if (!counters_.failures_in_a_row_logged.exchange(true)) {
    spdlog::error(
        "claiming stopped: {} items failed their first attempt in a row and none was done "
        "(batch.max_consecutive_failures {}); the operation or the payloads fail for every item. "
        "Fix them and run again (`coexist queue retry --dead` first if any died). last_error={}",
        in_a_row, limit, log::Value(FirstLine(counters_.LastFailure())));
  }
  return true;
}

void Worker::HoldRun(pqxx::dbtransaction& tx) {
  if (!db_->queue->HoldRun(tx, run_id_)) ThrowFenced();
}

void Worker::ThrowFenced() const {
  throw RunFencedError("run " + std::to_string(run_id_) +
                       " was marked abandoned while it worked (its control connection was "
                       "lost); its workers stop and the chunk in flight rolls back");
}

// A chunk's items are decided in two halves: first by the edit locks on
// their records (honoured, waited for, revoked or deferred as the policy
// says), then by their rows (row-locked by an online transaction? the
// batch's own?), which the policy turns into apply, defer or wait.
void Worker::Decide(pqxx::dbtransaction& tx, const std::vector<Item>& items, Outcome& out) {
  auto candidates = DecideOnEditLocks(tx, items, out);
  DecideOnRows(tx, candidates, out);
  RecheckEditLocks(tx, out);
}

std::vector<const Item*> Worker::DecideOnEditLocks(pqxx::dbtransaction& tx,
                                                   const std::vector<Item>& items, Outcome& out) {
  // An item of several records under keys: one cannot be applied: applying
  // it to its first record only would be silently wrong.
  bool one_key = config_.operation.keys == config::ItemKeys::kOne;
  std::vector<const Item*> fitting;
  std::vector<RecordKey> keys;
  for (const auto& item : items) {
    if (one_key && item.keys.size() > 1) {
      out.refused.push_back(
          {item.item_id, "the item names " + std::to_string(item.keys.size()) +
                             " records but operation.keys is one: set operation.keys: many "
                             "(then $1 is an array of the item's keys) and retry the item"});
      if (item.attempts == 0) ++out.first_attempt_failures;
      continue;
    }
    fitting.push_back(&item);
    keys.insert(keys.end(), item.keys.begin(), item.keys.end());
  }
  auto locks = EditLocksByKey(db_->sql->LiveEditLocks(tx, keys));
  std::vector<const Item*> candidates;
  for (const auto* item : fitting) {
    auto held = LocksOf(*item, locks);
    if (held.empty() || OnEditLock(tx, *item, held, out)) candidates.push_back(item);
  }
  return candidates;
}

void Worker::DecideOnRows(pqxx::dbtransaction& tx, const std::vector<const Item*>& candidates,
                          Outcome& out) {
  auto now = steady_clock::now();
  std::vector<RecordKey> candidate_keys;
  for (const auto* item : candidates) {
    candidate_keys.insert(candidate_keys.end(), item->keys.begin(), item->keys.end());
  }
  // The probe takes the free rows without waiting. Its locks stay when no
  // item waits for a row; otherwise LockInKeyOrder takes the rows again
  // (under a policy that never waits for rows, no savepoint is needed).
  std::optional<Savepoint> probe;
  if (!policy_.DefersEveryRowLock()) probe.emplace(tx, "probe");
  auto rows = GatherFacts(*db_->sql, tx, *db_->sql, tx, candidate_keys, policy_.TakesOver());

  std::vector<const Item*> going;                 // applied once the chunk holds all their rows
  std::map<long long, policies::Decision> waits;  // of those, the ones waiting for a row
  for (const auto* item : candidates) {
    // An item is one unit: row-locked when any of its records is, the
    // batch's when all of them are.
    auto facts = ItemFacts(*item, rows);
    facts.deferrals = item->deferrals;
    facts.waited = Waited(item->item_id);
    auto d = policy_.Decide(facts);
    if (d.escalated) ++out.escalated;
    switch (d.action) {
      case Action::kApply:
        going.push_back(item);
        break;
      case Action::kDefer:
        out.deferrals.push_back({item->item_id, d.reason, d.escalated});
        waiting_.erase(item->item_id);
        break;
      case Action::kWaitEditLock:
        StartWaiting(item->item_id, now);
        break;
      default:  // row-lock waits, cancel, terminate
        StartWaiting(item->item_id, now);
        going.push_back(item);
        waits.emplace(item->item_id, d);
        break;
    }
  }
  if (waits.empty()) {
    if (probe) probe->Release();
    for (const auto* item : going) {
      out.apply.push_back(*item);
      waiting_.erase(item->item_id);
    }
    return;
  }
  // Waiting for a row while holding one that sorts after it could close a
  // cycle with an online transaction that locks in key order too (it holds
  // the awaited row and wants the later one): the probe's locks go, and
  // the rows are taken again in key order.
  if (!probe) throw std::logic_error(std::string(policy_.Name()) + " waits for a row it defers");
  probe->Rollback();
  LockInKeyOrder(tx, going, waits, rows.row_locked, out);
}

// The rows of `going` in key order: each run of rows the probe found free
// in one statement that does not wait, then the next row another
// transaction held, waited for as the item's decision in `waits` says,
// while the chunk holds only rows before it. An item is applied when the
// chunk holds all its rows; one whose wait ended without the row is
// deferred or left for a later chunk (WaitForRowLock), and so is one whose
// free row was taken since the probe (waiting for it there would hold
// later rows).
void Worker::LockInKeyOrder(pqxx::dbtransaction& tx, const std::vector<const Item*>& going,
                            std::map<long long, policies::Decision>& waits,
                            const std::set<RecordKey>& held_elsewhere, Outcome& out) {
  std::map<RecordKey, std::vector<const Item*>> items_of;
  for (const auto* item : going) {
    for (const auto& key : item->keys) items_of[key].push_back(item);
  }
  std::set<long long> not_now;  // items this chunk does not apply
  auto leave_for_later = [&](const Item& item) {
    if (not_now.insert(item.item_id).second) StartWaiting(item.item_id, steady_clock::now());
  };
  auto wanted = [&](const RecordKey& key) {
    const auto& items = items_of[key];
    return std::any_of(items.begin(), items.end(),
                       [&](const Item* item) { return !not_now.count(item->item_id); });
  };
  std::vector<RecordKey> keys;
  for (const auto& entry : items_of) keys.push_back(entry.first);
  auto ordered = db_->sql->ExistingRecords(tx, keys);
  size_t next = 0;
  while (next < ordered.size()) {
    std::vector<RecordKey> free_run;
    for (; next < ordered.size() && !held_elsewhere.count(ordered[next]); ++next) {
      if (wanted(ordered[next])) free_run.push_back(ordered[next]);
    }
    auto locked = db_->sql->LockRecords(tx, free_run);
    std::set<RecordKey> got(locked.begin(), locked.end());
    for (const auto& key : free_run) {
      if (got.count(key)) continue;
      for (const auto* item : items_of[key]) leave_for_later(*item);
    }
    if (next == ordered.size()) break;
    const RecordKey& key = ordered[next++];
    for (const auto* item : items_of[key]) {
      if (not_now.count(item->item_id)) continue;
      auto wait = waits.find(item->item_id);
      if (wait == waits.end()) {  // no policy applies an item whose row is held
        leave_for_later(*item);
        continue;
      }
      if (WaitForRowLock(tx, *item, key, wait->second, out) != RowWait::kLocked) {
        not_now.insert(item->item_id);
        continue;
      }
      break;  // the chunk holds the row now, for the chunk's other items of it too
    }
  }
  for (const auto* item : going) {
    if (not_now.count(item->item_id)) continue;
    out.apply.push_back(*item);
    waiting_.erase(item->item_id);
  }
}

// The edit locks again, now that this chunk holds the rows it applies to:
// one taken since the first read (a moment ago, or while the batch waited
// for a row an online user held, who may take it in that transaction) is
// honoured like the others. None can be taken after this read:
// acquire_edit_lock share-locks the row first, so it waits for this chunk.
void Worker::RecheckEditLocks(pqxx::dbtransaction& tx, Outcome& out) {
  std::vector<RecordKey> held;
  for (const auto& item : out.apply) held.insert(held.end(), item.keys.begin(), item.keys.end());
  auto locks = EditLocksByKey(db_->sql->LiveEditLocks(tx, held));
  if (locks.empty()) return;
  std::erase_if(out.apply, [&](const Item& item) {
    auto on_item = LocksOf(item, locks);
    return !on_item.empty() && !OnEditLock(tx, item, on_item, out);
  });
}

bool Worker::OnEditLock(pqxx::dbtransaction& tx, const Item& item,
                        const std::vector<EditLock>& locks, Outcome& out) {
  policies::RecordFacts facts;
  facts.edit_locked = true;
  facts.deferrals = item.deferrals;
  facts.waited = Waited(item.item_id);
  auto d = policy_.Decide(facts);
  if (d.escalated) ++out.escalated;
  auto now = steady_clock::now();
  if (d.action == Action::kRevokeEditLock) {
    // Every lock on the item's records, in key order; the item goes on
    // only when all of them are gone.
    for (const auto& lock : locks) {
      auto owner = db_->sql->RevokeEditLock(tx, lock.key, run_id_, item.item_id,
                                            config_.policy.lock_wait_initial);
      if (!owner) {  // its owner is saving right now; come back next chunk
        StartWaiting(item.item_id, now);
        return false;
      }
      if (!owner->empty()) {
        ++out.revoked;
        spdlog::info("edit lock revoked item_id={} key={} owner={}", item.item_id, lock.key,
                     log::Value(owner->substr(0, 200)));
      }
    }
    return true;
  }
  if (d.action == Action::kWaitEditLock) {
    // Until the last of them expires (a release NOTIFY wakes the worker
    // sooner), within what the policy still lets the item wait.
    milliseconds expires_in{0};
    for (const auto& lock : locks) expires_in = std::max(expires_in, lock.expires_in);
    auto remaining = policy_.MaxWait() - facts.waited;
    StartWaiting(item.item_id, now + std::min<milliseconds>(expires_in + milliseconds(10),
                                                            std::max(remaining, milliseconds(0))));
    return false;
  }
  out.deferrals.push_back({item.item_id, d.reason.empty() ? "edit_locked" : d.reason, d.escalated});
  waiting_.erase(item.item_id);
  return false;
}

Worker::RowWait Worker::WaitForRowLock(pqxx::dbtransaction& tx, const Item& item,
                                       const RecordKey& key, policies::Decision& d, Outcome& out) {
  policies::RecordFacts facts;
  facts.row_locked = true;
  facts.deferrals = item.deferrals;
  std::vector<Blocker> blockers;
  bool cancelled = false;
  bool terminated = false;
  while (true) {
    bool terminate = d.action == Action::kTerminateBlocker && !terminated;
    bool cancel = d.action == Action::kCancelBlocker && !cancelled;
    if ((terminate || cancel) && !blockers.empty() && db_->aux) {
      // On the aux connection, in its own transaction: the events rows stay
      // even when this chunk rolls back. Without pg_signal_backend the
      // signal is refused: the batch then waits like online_priority and
      // defers at the end of its wait, instead of failing the run.
      try {
        pqxx::nontransaction atx(*db_->aux);
        auto n = db_->aux_sql->SignalBlockers(atx, blockers, policy_.SignalPattern(), terminate,
                                              run_id_, item.item_id, key, db_->conn->backendpid());
        out.signalled += n.cancelled + n.terminated;
        spdlog::info("online backends signalled item_id={} key={} cancelled={} terminated={}",
                     item.item_id, key, n.cancelled, n.terminated);
      } catch (const pqxx::sql_error& e) {
        spdlog::warn("online backends not signalled item_id={} key={} error={}", item.item_id, key,
                     log::Value(FirstLine(e.what())));
      }
      (terminate ? terminated : cancelled) = true;
    }
    auto step_started = steady_clock::now();
    bool locked = LockStep(tx, key, d.step, facts, blockers);
    out.lock_wait += std::chrono::duration_cast<milliseconds>(steady_clock::now() - step_started);
    if (locked) return RowWait::kLocked;
    facts.waited = Waited(item.item_id);
    d = policy_.Decide(facts);
    if (d.action == Action::kDefer) {
      out.deferrals.push_back({item.item_id, d.reason, d.escalated});
      waiting_.erase(item.item_id);
      return RowWait::kDeferred;
    }
    // One step per chunk unless the policy waits in the transaction: the
    // chunk's other rows are not held while the record stays locked.
    if (!policy_.WaitsInTransaction() || stop_) return RowWait::kLater;
  }
}

bool Worker::LockStep(pqxx::dbtransaction& tx, const RecordKey& key, milliseconds step,
                      policies::RecordFacts& facts, std::vector<Blocker>& blockers) {
  if (!policy_.WantsBlockers() || !db_->aux) return db_->sql->LockRecordStep(tx, key, step);
  // Who blocks us is only visible while we wait: ask from the aux
  // connection, a moment into the step.
  int pid = db_->conn->backendpid();
  auto probe = std::async(std::launch::async, [this, pid, step] {
    std::this_thread::sleep_for(std::min<milliseconds>(step / 2, milliseconds(50)));
    pqxx::read_transaction atx(*db_->aux);
    return db_->aux_sql->Blockers(atx, pid, policy_.SignalPattern());
  });
  bool locked = db_->sql->LockRecordStep(tx, key, step);
  auto found = probe.get();
  if (!found.empty()) {
    facts.blockers_seen = true;
    facts.blockers_are_online =
        std::all_of(found.begin(), found.end(), [](const Blocker& b) { return b.online; });
    blockers = std::move(found);
  }
  return locked;
}

// Nothing in the way (skip_locked, which defers every locked row, and no
// live edit lock on the chunk's records): the operation runs first, without
// the probe that would lock each row beforehand, with lock_timeout cut to
// kUnprobedLockTimeout so that a row another transaction holds is never
// waited for. A lock it cannot get at once rolls the try back, and the chunk
// goes the probing way (so do the next kProbeFirstChunks chunks: someone
// is in the way). After the operation the chunk holds its rows, so the edit
// locks are read again, as RecheckEditLocks does: one taken meanwhile rolls
// the try back too. Any other failure is the probing way's first try when
// that way decides to apply the same items.
bool Worker::ApplyUnprobed(pqxx::dbtransaction& tx, const std::vector<Item>& items, Outcome& out,
                           std::optional<ApplyFailure>& failed) {
  constexpr const char* kUnprobedLockTimeout = "1ms";
  constexpr int kProbeFirstChunks = 16;
  if (!policy_.DefersEveryRowLock() || policy_.TakesOver()) return false;
  if (probe_first_chunks_ > 0) {
    --probe_first_chunks_;
    return false;
  }
  bool one_key = config_.operation.keys == config::ItemKeys::kOne;
  std::vector<RecordKey> keys;
  for (const auto& item : items) {
    if (one_key && item.keys.size() > 1) return false;  // refused on the probing way
    keys.insert(keys.end(), item.keys.begin(), item.keys.end());
  }
  if (!db_->sql->LiveEditLocks(tx, keys).empty()) return false;
  Savepoint sub(tx, "unprobed");
  // Cut for this try only: rolling back to the savepoint restores it too.
  auto lock_timeout =
      tx.exec_params1(
            "SELECT current_setting('lock_timeout'), set_config('lock_timeout', $1, true)",
            kUnprobedLockTimeout)[0]
          .as<std::string>();
  try {
    db_->operation->Apply(tx, items);
  } catch (const pqxx::failure& e) {
    const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
    if (sql != nullptr && db::SqlStateOf(*sql) == db::sqlstate::kLockNotAvailable) {
      sub.Rollback();
      probe_first_chunks_ = kProbeFirstChunks;
      return false;
    }
    failed = JudgeFailure(e, out.timed_out);  // throws what stops the run
    sub.Rollback();
    return false;
  }
  if (!db_->sql->LiveEditLocks(tx, keys).empty()) {
    sub.Rollback();
    return false;
  }
  tx.exec_params("SELECT set_config('lock_timeout', $1, true)", lock_timeout);
  sub.Release();
  for (const auto& item : items) {
    out.apply.push_back(item);
    out.applied.push_back(item.item_id);
    waiting_.erase(item.item_id);
  }
  return true;
}

Worker::ApplyFailure Worker::JudgeFailure(const pqxx::failure& e, bool& timed_out) const {
  ApplyFailure failure{e.what(), ""};
  auto& error = failure.error;
  while (!error.empty() && error.back() == '\n') error.pop_back();
  switch (db::Classify(e)) {
    case db::FailureKind::kConnectionLost:
    case db::FailureKind::kInDoubt:
    case db::FailureKind::kBug:
      throw;
    // A refusal no item can help (a right revoked, a table gone, the server
    // out of resources or read-only) stops the run with the chunk rolled
    // back and no item charged; charged, it would kill the whole queue in a
    // few chunks.
    case db::FailureKind::kConfiguration:
      throw OperationRefusedError(error);
    case db::FailureKind::kServer:
      throw TempFailError("the server could not run the operation: " + error,
                          "no item was charged; the next run picks them up.");
    // A timeout, deadlock or serialization failure says nothing about the
    // items: the statement is tried again in smaller pieces, and what
    // fails again is deferred, never charged an attempt.
    case db::FailureKind::kRetryable:
      if (dynamic_cast<const pqxx::deadlock_detected*>(&e) != nullptr) {
        failure.transient = "deadlock";
      } else if (dynamic_cast<const pqxx::transaction_rollback*>(&e) != nullptr) {
        failure.transient = "serialization";
      } else {
        failure.transient = "timeout";
        timed_out = true;  // the pacer shrinks the next chunks
      }
      break;
    case db::FailureKind::kItem:
      break;
  }
  return failure;
}

// Spring Batch's chunk scanning: the whole set in a savepoint; when it fails,
// each half in its own, down to single items, which then fail alone. A
// statement or lock timeout is not the items' fault: the set is retried once
// in halves (pacing's split on timeout), and what times out again is
// deferred, not failed.
void Worker::ApplyScanning(pqxx::dbtransaction& tx, const std::vector<Item>& items, Outcome& out,
                           bool split_after_timeout, const std::optional<ApplyFailure>& first_try) {
  if (items.empty()) return;
  auto started = steady_clock::now();
  ApplyFailure failure;
  if (first_try) {
    failure = *first_try;
  } else {
    try {
      Savepoint sub(tx, "apply");
      db_->operation->Apply(tx, items);
      sub.Release();
      for (const auto& item : items) out.applied.push_back(item.item_id);
      return;
    } catch (const pqxx::failure& e) {
      failure = JudgeFailure(e, out.timed_out);
    }
  }
  // Set when trying again may pass: the reason the items are deferred if
  // the halves fail the same way ("timeout", "deadlock", "serialization").
  const std::string& transient = failure.transient;
  std::string& error = failure.error;
  if (!transient.empty()) {
    auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - started);
    spdlog::warn("chunk rolled back reason={} items={} took_ms={} retry={}", transient,
                 items.size(), took.count(), split_after_timeout ? "deferred" : "halves");
    if (split_after_timeout) {
      for (const auto& item : items) out.timeouts.push_back({item.item_id, transient, false});
      return;
    }
    auto piece = static_cast<std::size_t>(pacing::SplitOnTimeout(static_cast<int>(items.size())));
    for (std::size_t at = 0; at < items.size(); at += piece) {
      auto end = items.begin() + static_cast<long>(std::min(items.size(), at + piece));
      ApplyScanning(tx, std::vector<Item>(items.begin() + static_cast<long>(at), end), out, true);
    }
    return;
  }
  if (items.size() == 1) {
    spdlog::warn("item failed item_id={} key={} error={}", items[0].item_id, items[0].key,
                 log::Value(error));
    out.failures.push_back({items[0].item_id, error});
    if (items[0].attempts == 0) ++out.first_attempt_failures;
    return;
  }
  auto middle = items.begin() + static_cast<long>(items.size() / 2);
  ApplyScanning(tx, std::vector<Item>(items.begin(), middle), out, split_after_timeout);
  ApplyScanning(tx, std::vector<Item>(middle, items.end()), out, split_after_timeout);
}

void Worker::Finish(pqxx::dbtransaction& tx, Outcome& out) {
  db_->queue->CompleteItems(tx, run_id_, out.applied);
  out.dead += db_->queue->FailItems(tx, run_id_, out.failures);
  out.dead += db_->queue->FailItems(tx, run_id_, out.refused);
  db_->queue->DeferItems(tx, run_id_, out.deferrals);
  out.dead += DeferTimeouts(*db_->queue, tx, run_id_, out.timeouts);
}

bool Worker::WaitForWaiting() {
  std::vector<long long> ids;
  for (const auto& [id, w] : waiting_) ids.push_back(id);
  {
    pqxx::read_transaction tx(*db_->conn);
    auto alive = db_->queue->StillClaimable(tx, run_id_, ids);
    std::set<long long> keep(alive.begin(), alive.end());
    std::erase_if(waiting_, [&](const auto& entry) { return !keep.count(entry.first); });
  }
  if (waiting_.empty()) return false;
  auto now = steady_clock::now();
  auto earliest = steady_clock::time_point::max();
  for (const auto& [id, w] : waiting_) earliest = std::min(earliest, w.due);
  if (earliest <= now) return true;
  // At most a second, so SIGTERM is noticed; a release NOTIFY wakes us first.
  auto timeout = std::min<std::chrono::microseconds>(
      std::chrono::duration_cast<std::chrono::microseconds>(earliest - now),
      std::chrono::seconds(1));
  if (db_->aux) {
    if (db_->aux->await_notification(timeout.count() / 1'000'000, timeout.count() % 1'000'000) >
        0) {
      for (auto& [id, w] : waiting_) w.due = steady_clock::now();
    }
  } else {
    std::this_thread::sleep_for(timeout);
  }
  return true;
}

milliseconds Worker::Waited(long long item_id) const {
  auto it = waiting_.find(item_id);
  if (it == waiting_.end()) return milliseconds(0);
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - it->second.first_seen);
}

void Worker::StartWaiting(long long item_id, steady_clock::time_point due) {
  auto [it, inserted] = waiting_.try_emplace(item_id, Waiting{steady_clock::now(), due});
  if (!inserted) it->second.due = due;
}

ChunkCommit ReadChunkCommit(db::QueueStore& queue, pqxx::transaction_base& tx, long long run_id,
                            const std::vector<long long>& applied) {
  if (applied.empty()) return ChunkCommit::kUnknown;
  auto done = queue.DoneByRun(tx, run_id, applied);
  if (done.empty()) return ChunkCommit::kRolledBack;
  if (done.size() == applied.size()) return ChunkCommit::kCommitted;
  throw std::logic_error("run " + std::to_string(run_id) + " completed " +
                         std::to_string(done.size()) + " of the " + std::to_string(applied.size()) +
                         " items of a chunk in doubt");
}

// Read on a connection of its own: the worker's is broken when COMMIT lost
// it. A chunk that rolled back left its items claimable, so the run claims
// them again like any other; one that committed is counted as if COMMIT had
// answered. The worker goes on only while its connection (with the
// session's settings) is still open.
bool Worker::CommittedInDoubt(const std::exception_ptr& error, const Outcome& out) {
  ChunkCommit commit = ChunkCommit::kUnknown;
  try {
    auto conn = db::Connect(conninfo_, config_.database.application_name);
    db::QueueStore queue(*conn, QueueJobOf(config_, db_->sql->target()));
    pqxx::read_transaction tx(*conn);
    commit = ReadChunkCommit(queue, tx, run_id_, out.applied);
  } catch (const std::exception& e) {
    spdlog::error("chunk commit in doubt and the queue could not be read run_id={} error={}",
                  run_id_, log::Value(FirstLine(e.what())));
    std::rethrow_exception(error);
  }
  const char* said = commit == ChunkCommit::kCommitted    ? "committed"
                     : commit == ChunkCommit::kRolledBack ? "rolled_back"
                                                          : "unknown";
  spdlog::warn("chunk commit in doubt worker={} items={} applied={} outcome={}", index_,
               out.settled(), out.applied.size(), said);
  if (!db_->conn->is_open()) {
    if (commit == ChunkCommit::kCommitted) Publish(out);
    std::rethrow_exception(error);
  }
  return commit == ChunkCommit::kCommitted;
}

void Worker::Publish(const Outcome& out) {
  counters_.claimed += out.settled();
  counters_.done += static_cast<long long>(out.applied.size() + out.skipped.size());
  counters_.missing += out.missing;
  counters_.deferred += out.deferred();
  counters_.dead += out.dead;
  counters_.escalated += out.escalated;
  counters_.revoked += out.revoked;
  counters_.signalled += out.signalled;
  // One item done shows the operation can work: the count starts again.
  if (!out.applied.empty()) {
    counters_.failures_in_a_row = 0;
  } else if (out.first_attempt_failures > 0) {
    counters_.failures_in_a_row += out.first_attempt_failures;
    counters_.NoteFailure(!out.failures.empty() ? out.failures.back().error
                                                : out.refused.back().error);
  }
  for (const auto* list : {&out.deferrals, &out.timeouts}) {
    for (const auto& d : *list) {
      counters_.AddDeferral(d.reason);
      spdlog::debug("item deferred item_id={} reason={} policy={}", d.item_id, d.reason,
                    policy_.Name());
    }
  }
}

}  // namespace coexist::batch
