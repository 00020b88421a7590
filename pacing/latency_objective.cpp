#include "pacing/latency_objective.h"

#include <algorithm>
#include <cmath>

namespace coexist::pacing {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

const char* ToString(LatencyState state) {
  switch (state) {
    case LatencyState::kLearning:
      return "learning";
    case LatencyState::kWithin:
      return "within";
    case LatencyState::kOver:
      return "over";
  }
  return "?";
}

LatencyObjective::LatencyObjective(const LatencyObjectiveOptions& options, Clock::time_point start)
    : options_(options),
      state_(options.baseline ? LatencyState::kWithin : LatencyState::kLearning),
      start_(start),
      baseline_(options.baseline),
      last_change_(start) {
  if (baseline_) Begin(start);
}

void LatencyObjective::Begin(Clock::time_point now) {
  state_ = LatencyState::kWithin;
  last_change_ = now;
  if (!options_.slow_start) return;
  duty_ = std::max(options_.min_duty, std::min(1.0, kSlowStartDuty));
  chunk_scale_ = options_.min_chunk_scale;
}

double LatencyObjective::ratio() const {
  if (!baseline_ || baseline_->count() <= 0) return 0;
  return static_cast<double>(latency_.count()) / static_cast<double>(baseline_->count());
}

namespace {

// Nearest rank: the smallest value with at least `percentile` % of the
// values at or below it. `values` is reordered.
microseconds Percentile(std::vector<microseconds>& values, double percentile) {
  auto rank = static_cast<size_t>(std::ceil(percentile / 100.0 * values.size()));
  auto nth =
      values.begin() + static_cast<std::ptrdiff_t>(std::clamp<size_t>(rank, 1, values.size()) - 1);
  std::nth_element(values.begin(), nth, values.end());
  return *nth;
}

}  // namespace

std::vector<microseconds> LatencyObjective::SamplesSince(Clock::time_point since) const {
  std::vector<microseconds> values;
  for (const auto& s : samples_) {
    if (s.at > since) values.push_back(s.latency);
  }
  return values;
}

std::optional<microseconds> LatencyObjective::PercentileSince(Clock::time_point since) const {
  auto values = SamplesSince(since);
  if (values.size() < static_cast<size_t>(kMinSamples)) return std::nullopt;
  return Percentile(values, options_.percentile);
}

std::optional<microseconds> LatencyObjective::limit() const {
  if (!baseline_) return std::nullopt;
  return Limit(options_.objective);
}

std::optional<microseconds> LatencyObjective::BaselineSince(Clock::time_point since) const {
  auto values = SamplesSince(since);
  if (values.size() < static_cast<size_t>(kMinSamples)) return std::nullopt;
  // Groups as large as a decision's: the samples of decision_time.
  size_t group_size = kMinSamples;
  if (options_.decision_time.count() > 0 && !samples_.empty()) {
    auto span = samples_.back().at - std::max(since, samples_.front().at);
    if (span > Clock::duration::zero()) {
      double per_decision = static_cast<double>(values.size()) *
                            std::chrono::duration<double>(options_.decision_time).count() /
                            std::chrono::duration<double>(span).count();
      group_size =
          std::clamp<size_t>(static_cast<size_t>(per_decision), kMinSamples, values.size());
    }
  }
  // A decision sees the percentile of about kMinSamples probes, which reads
  // higher than the percentile of many: the baseline is the same statistic
  // (the median of the percentiles of consecutive groups of kMinSamples), so
  // quiet probes compare as 1.0x, not as more.
  std::vector<microseconds> group_percentiles;
  for (size_t at = 0; at + group_size <= values.size(); at += group_size) {
    std::vector<microseconds> group(values.begin() + static_cast<std::ptrdiff_t>(at),
                                    values.begin() + static_cast<std::ptrdiff_t>(at + group_size));
    group_percentiles.push_back(Percentile(group, options_.percentile));
  }
  auto median = Percentile(group_percentiles, 50);
  return std::max(median, microseconds(1));
}

void LatencyObjective::SetBatchActive(Clock::time_point now, bool active) {
  if (active) {
    idle_since_.reset();
  } else if (!idle_since_) {
    idle_since_ = now;
  }
}

LatencyObjective::Clock::duration LatencyObjective::FloorRelearnAfter() const {
  return 2 * std::max<Clock::duration>(options_.learn_time, options_.window);
}

bool LatencyObjective::RelearnDue(Clock::time_point now) const {
  if (options_.baseline || options_.relearn_every.count() <= 0) return false;
  if (state_ == LatencyState::kLearning || FullSpeed()) return false;
  if (over_at_floor_since_) {
    auto floor = now - std::max(*over_at_floor_since_, baseline_at_);
    auto give_up = FloorRelearnAfter() + 2 * options_.learn_time + std::chrono::seconds(5);
    if (floor >= FloorRelearnAfter() && floor < give_up) return true;
  }
  // A probe that measures nothing while the batch stands still (a server too
  // busy to answer) must not hold the batch forever: give up this time.
  auto since = now - std::max(baseline_at_, full_duty_at_);
  auto give_up = options_.relearn_every + 2 * options_.learn_time + std::chrono::seconds(5);
  return since >= options_.relearn_every && since < give_up;
}

std::vector<LatencyEvent> LatencyObjective::Observe(Clock::time_point now, microseconds latency) {
  samples_.push_back({now, latency});
  last_sample_at_ = now;
  // While learning, every sample since the start counts: a sampler starved
  // on a busy host spreads its first ten over more than learn_time, and
  // pruning them kept it learning with enough seen (17 of 10 needed).
  auto keep = std::max(options_.window, options_.learn_time);
  while (state_ != LatencyState::kLearning && !samples_.empty() &&
         samples_.front().at < now - keep) {
    samples_.pop_front();
  }

  std::vector<LatencyEvent> events;
  if (state_ == LatencyState::kLearning) {
    LearnIfDue(now, events);
    return events;
  }
  if (idle_since_) {
    // Idle: online runs without the batch, which is what the baseline is.
    if (!options_.baseline && now - *idle_since_ >= options_.learn_time) {
      if (auto refreshed = BaselineSince(*idle_since_)) {
        baseline_ = *refreshed;
        baseline_at_ = now;
        latency_ = *baseline_;
        idle_since_ = now;
        over_at_floor_since_.reset();
        last_change_ = now;
        events.push_back(
            {EventKind::kLatencyBaseline, "refreshed", *baseline_, latency_, duty_, chunk_scale_});
      }
    }
    return events;
  }
  Decide(now, events);
  return events;
}

// Learning ends on the clock, not only at a sample: the sessions sampler
// may see its ten statements early in learn_time and none after it (short
// statements are rarely caught running), and a learning ended only by the
// next sample then never ended.
void LatencyObjective::LearnIfDue(Clock::time_point now, std::vector<LatencyEvent>& events) {
  if (now - start_ < options_.learn_time) return;
  auto learned = BaselineSince(start_);
  if (!learned) return;
  baseline_ = *learned;
  baseline_at_ = now;
  latency_ = *baseline_;
  Begin(now);
  events.push_back(
      {EventKind::kLatencyBaseline, "learned", *baseline_, latency_, duty_, chunk_scale_});
}

std::vector<LatencyEvent> LatencyObjective::Quiet(Clock::time_point now) {
  std::vector<LatencyEvent> events;
  if (state_ == LatencyState::kLearning) {
    LearnIfDue(now, events);
    return events;
  }
  if (idle_since_) return events;
  if (last_sample_at_ && now - *last_sample_at_ < options_.window) return events;
  // One raise per decision_time, as if each were a decision with headroom.
  auto spacing = std::max<Clock::duration>(options_.decision_time, std::chrono::milliseconds(100));
  if (now - last_change_ < spacing) return events;
  Raise(now, true, events);
  return events;
}

void LatencyObjective::Decide(Clock::time_point now, std::vector<LatencyEvent>& events) {
  if (now - last_change_ < options_.decision_time) return;
  auto p = PercentileSince(std::max(now - options_.window, last_change_));
  if (!p) return;
  latency_ = *p;
  if (FullSpeed()) full_duty_at_ = now;
  auto limit = Limit(options_.objective);
  if (latency_ > limit) {
    double excess = static_cast<double>(limit.count()) / static_cast<double>(latency_.count());
    // Shorter chunks first: measured, they buy more of online's p99 per
    // item/s given up than a lower duty (docs/pacing.md, "Measured").
    if (chunk_scale_ > options_.min_chunk_scale) {
      chunk_scale_ = std::max(options_.min_chunk_scale, chunk_scale_ * kDeepestCut);
      events.push_back(
          {EventKind::kLatencyChunkTime, "shorter", *baseline_, latency_, duty_, chunk_scale_});
    } else {
      duty_ = std::max(options_.min_duty, duty_ * std::clamp(excess, kDeepestCut, kMildestCut));
    }
    bool at_floor = duty_ <= options_.min_duty && chunk_scale_ <= options_.min_chunk_scale;
    if (!at_floor) {
      over_at_floor_since_.reset();
    } else if (!over_at_floor_since_) {
      over_at_floor_since_ = now;
    }
    last_change_ = now;
    if (state_ != LatencyState::kOver) {
      state_ = LatencyState::kOver;
      events.push_back(
          {EventKind::kLatencySlowdown, "", *baseline_, latency_, duty_, chunk_scale_});
    }
    return;
  }
  Raise(now, latency_ <= Limit(1.0 + (options_.objective - 1.0) / 2.0), events);
}

void LatencyObjective::Raise(Clock::time_point now, bool headroom,
                             std::vector<LatencyEvent>& events) {
  over_at_floor_since_.reset();
  // The reverse order: the duty first, then the chunks' length.
  if (duty_ < 1.0) {
    duty_ = headroom ? std::min(1.0, std::max(duty_ * 2.0, duty_ + 0.1))
                     : std::min(1.0, duty_ + kCreep);
    last_change_ = now;
  } else if (chunk_scale_ < 1.0 && headroom) {
    chunk_scale_ = std::min(1.0, chunk_scale_ * 2.0);
    last_change_ = now;
    events.push_back(
        {EventKind::kLatencyChunkTime, "longer", *baseline_, latency_, duty_, chunk_scale_});
  }
  if (FullSpeed()) full_duty_at_ = now;
  if (state_ == LatencyState::kOver) {
    state_ = LatencyState::kWithin;
    last_change_ = now;
    events.push_back({EventKind::kLatencyRecovered, "", *baseline_, latency_, duty_, chunk_scale_});
  }
}

microseconds LatencyObjective::Limit(double ratio) const {
  auto scaled = microseconds(
      static_cast<long long>(std::llround(static_cast<double>(baseline_->count()) * ratio)));
  return std::max(scaled, *baseline_ + options_.tolerance);
}

milliseconds LatencyObjective::RestAfter(milliseconds took) const {
  if (state_ == LatencyState::kLearning || duty_ >= 1.0) return milliseconds(0);
  double rest = static_cast<double>(took.count()) * (1.0 - duty_) / duty_;
  return std::min(kMaxRest, milliseconds(static_cast<long long>(std::ceil(rest))));
}

}  // namespace coexist::pacing
