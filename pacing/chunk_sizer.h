#pragma once

#include <chrono>

namespace coexist::pacing {

// Sizes chunks so that each takes about `target` (pt-online-schema-change's
// --chunk-time). After each chunk the measured items per second feed a
// decaying average (EWMA); the next size is average x target, clamped to
// min_chunk..max_chunk, growing by at most max_growth per chunk, and
// shrinking at once (from the newest chunk alone) when a chunk took longer
// than shrink_after x target or hit a timeout.
//
// In fixed mode (adaptive = false) every chunk has `fixed_size` items.
//
// Pure arithmetic, no clock: the caller measures durations. Not thread-safe
// (Pacer guards it with its mutex).
struct ChunkSizerOptions {
  bool adaptive = true;
  std::chrono::milliseconds target{200};
  int min_chunk = 10;
  int max_chunk = 5000;
  double max_growth = 1.2;
  double shrink_after = 2.0;
  double rate_weight = 0.3;  // weight of the newest chunk in the average
  // The first chunk's size, and every chunk's in fixed mode (clamped to
  // min_chunk..max_chunk in adaptive mode).
  int initial_size = 500;
};

// Largest chunk an operator may set (batch.chunk_size's upper bound).
inline constexpr int kMaxChunkSize = 100000;

class ChunkSizer {
 public:
  explicit ChunkSizer(const ChunkSizerOptions& options);

  // The size of the next chunk, >= 1.
  int Next() const { return size_; }

  // Feeds one finished chunk: `items` processed in `took`. hit_timeout: the
  // chunk was cancelled by a statement or lock timeout (counts as far too
  // slow; the next size is at most half of `items`). A chunk of 0 items
  // (nothing left to claim) teaches nothing and is ignored.
  void Record(int items, std::chrono::milliseconds took, bool hit_timeout);

  // Operator overrides (control socket). SetTarget switches to adaptive mode
  // with a new target, starting from the current size; SetFixed switches to
  // fixed mode with `size` (clamped to 1..kMaxChunkSize).
  void SetTarget(std::chrono::milliseconds target);
  void SetFixed(int size);

  bool adaptive() const { return options_.adaptive; }
  std::chrono::milliseconds target() const { return options_.target; }
  // The decaying average of items per second; 0 before the first chunk.
  double rate() const { return rate_; }

 private:
  int Clamp(double size) const;

  ChunkSizerOptions options_;
  int size_;
  double rate_ = 0;
};

// The chunk-split protocol: a chunk of `items` that hit a statement or lock
// timeout is retried once in pieces of this size (half, rounded up, >= 1)
// before its items are deferred or counted as attempts.
int SplitOnTimeout(int items);

}  // namespace coexist::pacing
