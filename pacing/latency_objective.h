#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "schema/event_kind.h"

namespace coexist::pacing {

enum class LatencyState {
  kLearning,  // measuring the baseline; no chunk runs yet
  kWithin,    // the probe's percentile is at or under objective x baseline
  kOver,      // it is above: the duty cycle is being cut
};

const char* ToString(LatencyState state);

struct LatencyObjectiveOptions {
  double objective = 1.25;                            // allowed ratio to the baseline, > 1
  std::optional<std::chrono::microseconds> baseline;  // nullopt: learned, then refreshed
  double percentile = 90;                             // of the window's probes
  std::chrono::milliseconds window{2000};             // probes one decision may look at
  std::chrono::milliseconds learn_time{2000};         // baseline measurement before the first chunk
  double min_duty = 0.05;                             // the duty cycle never drops below
  // A measured baseline is due again when the duty has been below 1 this
  // long since it was last learned (RelearnDue); zero: never (only when the
  // batch happens to be idle).
  std::chrono::milliseconds relearn_every{0};
  // Latencies within baseline + tolerance always meet the objective: the
  // probe's own jitter on a busy host is of this order, and no user sees it.
  std::chrono::microseconds tolerance{500};
  // A decision also waits this long after the last change (0: kMinSamples
  // alone decide). With the sessions signal, samples come by the hundred a
  // second: the time keeps a decision's percentile steady, and the
  // baseline's groups hold as many samples as a decision would.
  std::chrono::milliseconds decision_time{0};
  // The second knob: the share of chunk_time the chunks may be cut to
  // (chunk_scale), before the duty is cut. 1: the knob is off.
  double min_chunk_scale = 1.0;
  // Once the baseline is known, begin at kSlowStartDuty and min_chunk_scale
  // and let the decisions raise them, instead of at full speed.
  bool slow_start = false;
};

// A change the caller logs and records in coexist.events.
struct LatencyEvent {
  // latency_baseline, latency_slowdown, latency_recovered, latency_chunk_time
  EventKind kind;
  // latency_baseline: "learned" or "refreshed"; latency_chunk_time:
  // "shorter" or "longer"
  std::string reason;
  std::chrono::microseconds baseline{0};
  std::chrono::microseconds latency{0};  // the percentile that decided
  double duty = 1.0;                     // the duty cycle after the change
  double chunk_scale = 1.0;              // the chunk_time share after the change
};

// The latency objective's controller: AIMD on the batch's duty cycle (the
// share of wall time a worker spends in chunks; it rests the remainder) and
// on the chunks' length (chunk_scale x pacing.chunk_time), fed one latency
// sample at a time (a probe, or an online statement). Pure: the caller
// passes the clock, so tests drive it with made-up times and latencies. Not
// thread-safe (Pacer guards it).
//
// clang-format off
//   learning --learn_time over, >= kMinSamples samples--> within  (baseline learned;
//                                                                   skipped when configured)
//     entering within: slow_start: duty := max(min_duty, kSlowStartDuty),
//                                  chunk_scale := min_chunk_scale; else both 1
//   each decision: p = the percentile of the samples since max(now - window, last change),
//     once there are >= kMinSamples of them and decision_time passed since the last change;
//     limit(r) = max(r x baseline, baseline + tolerance); headroom = 1 + (objective - 1) / 2
//   within/over --p > limit(objective)--> over, and one knob is cut:
//     chunk_scale > min_chunk_scale:  chunk_scale := max(min_chunk_scale, chunk_scale x 0.5)
//     else:                           duty := max(min_duty, duty x clamp(limit / p, 0.5, 0.8))
//   over --p <= limit(objective)--> within, and then one knob is raised:
//     p <= limit(headroom), duty < 1:                    duty := min(1, max(duty x 2, duty + 0.1))
//     p <= limit(headroom), duty 1, chunk_scale < 1:     chunk_scale := min(1, chunk_scale x 2)
//     limit(headroom) < p <= limit(objective), duty < 1: duty := min(1, duty + kCreep)
//   every cut or raise is a change: the next decision waits for kMinSamples newer samples.
//   within/over, batch working, no sample for a window (Quiet): decided as headroom,
//     once per max(decision_time, 100ms).
//   batch idle (paused, throttled) for learn_time with a measured baseline:
//     baseline := learned again from the idle samples (latency_baseline "refreshed")
//   below full speed (duty < 1 or chunk_scale < 1) for relearn_every since the baseline
//     was learned and since it was last at full speed: RelearnDue() holds the batch idle
//     until the idle samples refresh it
//   over at the floor (min_duty, min_chunk_scale) for FloorRelearnAfter() since it got
//     there and since the baseline was learned (relearn_every > 0): RelearnDue() as well
// clang-format on
//
// The baseline is the statistic a decision uses, measured without the batch:
// the median of the percentiles of consecutive groups of samples, each as
// large as a decision's (kMinSamples, or what decision_time holds).
//
// Shorter chunks are cut first and given back last: measured on this
// project's bench, a chunk of 5 ms instead of 20 ms costs a quarter of the
// rate and takes online p99 down as far as a duty of 0.3 does (two thirds of
// the rate). A duty cut is in proportion to the excess: a percentile just
// over the limit takes kMildestCut (x0.8), one twice the limit or more
// halves the duty. A raise is fast with headroom (x2) and a creep without
// it, so the duty settles just under the objective instead of being halved
// on noise and held below. At 500 ms decisions a doubled online load is cut
// within about a second, and a load that stops is given back x2 per 500 ms
// (0.05 to 1 in 2 s).
//
// Counting only the samples after the last change means each step is judged
// on what the previous one did.
//
// A slow start is judged the same way from its first step: at a quarter of
// the duty and the shortest chunks, four decisions with headroom take it to
// full speed (x2 on the duty twice, then on the chunks twice). Starting at
// full speed, the first decision judged chunks that had already run: in a
// demo batch of 4-7 s, that first second was online's p99.
class LatencyObjective {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kMinSamples = 10;
  // The bounds of a cut's factor: at most half the duty, at least a fifth.
  static constexpr double kDeepestCut = 0.5;
  static constexpr double kMildestCut = 0.8;
  // The raise between the headroom and the objective.
  static constexpr double kCreep = 0.05;
  // The longest rest after one chunk, however low the duty cycle.
  static constexpr std::chrono::milliseconds kMaxRest{30'000};
  // The duty a slow start begins at (never below min_duty).
  static constexpr double kSlowStartDuty = 0.25;

  LatencyObjective(const LatencyObjectiveOptions& options, Clock::time_point start);

  // One probe that took `latency`, finished at `now`. Returns the events it causes.
  std::vector<LatencyEvent> Observe(Clock::time_point now, std::chrono::microseconds latency);
  // A look that found no sample (the sessions signal: no online statement
  // ended). With none for a whole window while the batch works, nobody is
  // there to protect: decided as headroom (the duty is raised). While
  // learning, it ends learning as a sample would.
  std::vector<LatencyEvent> Quiet(Clock::time_point now);
  // Whether the batch works now (false while paused or throttled by other
  // signals): the probes of a long enough idle period refresh the baseline.
  void SetBatchActive(Clock::time_point now, bool active);
  // Whether the batch should stand still now so that the baseline is learned
  // again: relearn_every passed since the last one and since the duty was
  // last 1 (a batch at full speed has nothing to be given back), or the
  // decisions have found the latency over the objective with the batch at
  // its floor (min_duty, shortest chunks) for FloorRelearnAfter(): a batch
  // that works a twentieth of the time is seldom what keeps online that
  // slow, a baseline learned at a quiet moment is (measured: 30 s at the
  // floor, 1.5-2.3x, until relearn_every). The idle probes then refresh it
  // as above, and this turns false. Never with relearn_every 0.
  bool RelearnDue(Clock::time_point now) const;
  // How long the latency must stay over at the floor before RelearnDue:
  // twice the longer of learn_time and window (a relearn costs learn_time
  // of the batch standing still).
  Clock::duration FloorRelearnAfter() const;

  LatencyState state() const { return state_; }
  double duty() const { return duty_; }
  // Full duty and full-length chunks: nothing to be given back.
  bool FullSpeed() const { return duty_ >= 1.0 && chunk_scale_ >= 1.0; }
  // The share of pacing.chunk_time a chunk should take now (1 unless the
  // second knob cut it).
  double chunk_scale() const { return chunk_scale_; }
  std::optional<std::chrono::microseconds> baseline() const { return baseline_; }
  // The percentile of the last decision (0 before the first).
  std::chrono::microseconds latency() const { return latency_; }
  // latency() / baseline(), 0 while learning.
  double ratio() const;
  // The latency the objective allows now (objective x baseline, tolerance
  // included); nullopt while learning.
  std::optional<std::chrono::microseconds> limit() const;
  const LatencyObjectiveOptions& options() const { return options_; }

  // How long a worker rests after a chunk that took `took`, so that it works
  // duty() of its time: took x (1 - duty) / duty, at most kMaxRest.
  std::chrono::milliseconds RestAfter(std::chrono::milliseconds took) const;

 private:
  struct Sample {
    Clock::time_point at;
    std::chrono::microseconds latency;
  };
  std::vector<std::chrono::microseconds> SamplesSince(Clock::time_point since) const;
  // The options' percentile of the samples taken after `since`;
  // nullopt when fewer than kMinSamples.
  std::optional<std::chrono::microseconds> PercentileSince(Clock::time_point since) const;
  // The baseline learned from the samples taken after `since` (see above).
  std::optional<std::chrono::microseconds> BaselineSince(Clock::time_point since) const;
  // The latency that `ratio` x baseline allows, tolerance included.
  std::chrono::microseconds Limit(double ratio) const;
  // Ends learning once learn_time has passed and kMinSamples were seen.
  void LearnIfDue(Clock::time_point now, std::vector<LatencyEvent>& events);
  void Decide(Clock::time_point now, std::vector<LatencyEvent>& events);
  // The raise (and the return to within) of a decision that found room.
  void Raise(Clock::time_point now, bool headroom, std::vector<LatencyEvent>& events);
  // Enters within with the baseline known: the knobs where options_ says
  // the batch begins.
  void Begin(Clock::time_point now);

  LatencyObjectiveOptions options_;
  LatencyState state_;
  Clock::time_point start_;
  std::deque<Sample> samples_;  // the newest, within max(window, learn_time)
  std::optional<std::chrono::microseconds> baseline_;
  std::chrono::microseconds latency_{0};
  double duty_ = 1.0;
  double chunk_scale_ = 1.0;
  Clock::time_point last_change_{};
  std::optional<Clock::time_point> idle_since_;  // the batch idle since (refresh window start)
  Clock::time_point baseline_at_{};              // when the baseline was last learned
  Clock::time_point full_duty_at_{};             // when the duty was last 1
  // Since when every decision found the latency over with the batch at its
  // floor; nullopt once one found it within or the batch above the floor.
  std::optional<Clock::time_point> over_at_floor_since_;
  std::optional<Clock::time_point> last_sample_at_;
};

}  // namespace coexist::pacing
