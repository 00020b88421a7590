#include "pacing/chunk_sizer.h"

#include <algorithm>
#include <cmath>

namespace coexist::pacing {

ChunkSizer::ChunkSizer(const ChunkSizerOptions& options) : options_(options) {
  options_.min_chunk = std::clamp(options_.min_chunk, 1, kMaxChunkSize);
  options_.max_chunk = std::clamp(options_.max_chunk, options_.min_chunk, kMaxChunkSize);
  size_ = options_.adaptive ? Clamp(options_.initial_size)
                            : std::clamp(options_.initial_size, 1, kMaxChunkSize);
}

int ChunkSizer::Clamp(double size) const {
  double clamped = std::clamp(size, double(options_.min_chunk), double(options_.max_chunk));
  return static_cast<int>(std::lround(clamped));
}

void ChunkSizer::Record(int items, std::chrono::milliseconds took, bool hit_timeout) {
  if (!options_.adaptive || items <= 0) return;
  // A chunk faster than the clock's resolution still took some time.
  double seconds = std::max<double>(took.count(), 1) / 1000.0;
  double rate = items / seconds;
  double target = options_.target.count() / 1000.0;
  bool far_too_slow = hit_timeout || took.count() > options_.shrink_after * options_.target.count();
  if (far_too_slow) {
    // The average lags by design; a chunk this slow means the database is
    // busy now, so trust the newest chunk alone and restart the average.
    rate_ = rate;
    double next = rate * target;
    if (hit_timeout) next = std::min(next, items / 2.0);
    size_ = Clamp(std::min(next, double(size_)));
    return;
  }
  rate_ = rate_ == 0 ? rate : options_.rate_weight * rate + (1 - options_.rate_weight) * rate_;
  double next = std::min(rate_ * target, size_ * options_.max_growth);
  size_ = Clamp(next);
}

void ChunkSizer::SetTarget(std::chrono::milliseconds target) {
  options_.target = std::max(target, std::chrono::milliseconds(1));
  if (!options_.adaptive) {
    options_.adaptive = true;
    size_ = Clamp(size_);
  }
}

void ChunkSizer::SetFixed(int size) {
  options_.adaptive = false;
  size_ = std::clamp(size, 1, kMaxChunkSize);
}

int SplitOnTimeout(int items) { return std::max(1, (items + 1) / 2); }

}  // namespace coexist::pacing
