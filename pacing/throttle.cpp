#include "pacing/throttle.h"

namespace coexist::pacing {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

}  // namespace

const char* ToString(ThrottleState state) {
  switch (state) {
    case ThrottleState::kRunning:
      return "running";
    case ThrottleState::kThrottled:
      return "throttled";
    case ThrottleState::kCriticalPending:
      return "critical_pending";
    case ThrottleState::kHibernating:
      return "hibernating";
    case ThrottleState::kStopped:
      return "stopped";
  }
  return "unknown";
}

void Throttle::Start(Clock::time_point now, ThrottleState state, const std::vector<Trip>& trips,
                     std::vector<ThrottleEvent>& events) {
  if (state_ == ThrottleState::kRunning) {
    since_ = now;
    events.push_back({EventKind::kThrottleStart, ReasonOf(trips), trips});
  }
  state_ = state;
  reason_ = ReasonOf(trips);
  healthy_since_.reset();
}

std::vector<ThrottleEvent> Throttle::Observe(Clock::time_point now,
                                             const std::vector<Trip>& max_trips,
                                             const std::vector<Trip>& critical_trips) {
  std::vector<ThrottleEvent> events;
  Tick(now);
  switch (state_) {
    case ThrottleState::kStopped:
    case ThrottleState::kHibernating:
      return events;
    case ThrottleState::kCriticalPending:
      if (now < until_) return events;
      if (!critical_trips.empty()) {
        if (options_.stop_on_critical) {
          state_ = ThrottleState::kStopped;
          events.push_back({EventKind::kCriticalStop, ReasonOf(critical_trips), critical_trips});
        } else {
          state_ = ThrottleState::kHibernating;
          until_ = now + options_.hibernate_time;
          events.push_back({EventKind::kHibernate, ReasonOf(critical_trips), critical_trips});
        }
        reason_ = ReasonOf(critical_trips);
        return events;
      }
      state_ = ThrottleState::kThrottled;
      break;
    case ThrottleState::kRunning:
    case ThrottleState::kThrottled:
      if (!critical_trips.empty()) {
        Start(now, ThrottleState::kCriticalPending, critical_trips, events);
        until_ = now + options_.critical_recheck;
        return events;
      }
      break;
  }
  // Running or throttled, not critical.
  if (!max_trips.empty()) {
    Start(now, ThrottleState::kThrottled, max_trips, events);
    return events;
  }
  if (state_ == ThrottleState::kRunning) return events;
  if (!healthy_since_) healthy_since_ = now;
  if (now - *healthy_since_ >= options_.hold_time) {
    events.push_back(
        {EventKind::kThrottleStop, reason_, {}, duration_cast<milliseconds>(now - since_)});
    state_ = ThrottleState::kRunning;
    reason_.clear();
    healthy_since_.reset();
  }
  return events;
}

void Throttle::Tick(Clock::time_point now) {
  if (state_ == ThrottleState::kHibernating && now >= until_) {
    // Back to throttled: a fresh healthy reading and hold_time come first.
    state_ = ThrottleState::kThrottled;
    healthy_since_.reset();
  }
}

std::optional<Throttle::Clock::time_point> Throttle::wake_at() const {
  if (state_ == ThrottleState::kCriticalPending || state_ == ThrottleState::kHibernating) {
    return until_;
  }
  return std::nullopt;
}

}  // namespace coexist::pacing
