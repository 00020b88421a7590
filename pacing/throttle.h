#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "pacing/load.h"
#include "schema/event_kind.h"

namespace coexist::pacing {

enum class ThrottleState {
  kRunning,          // chunks may run
  kThrottled,        // max_load tripped, or healthy for less than hold_time
  kCriticalPending,  // critical_load tripped once; checked again after critical_recheck
  kHibernating,      // critical twice: no chunk and no health check for hibernate_time
  kStopped,          // critical twice with critical_action: stop
};

const char* ToString(ThrottleState state);

struct ThrottleOptions {
  std::chrono::milliseconds hold_time{2000};
  std::chrono::milliseconds critical_recheck{1000};
  std::chrono::milliseconds hibernate_time{60000};
  bool stop_on_critical = false;  // critical_action: stop
};

// A change the caller logs and records in coexist.events.
struct ThrottleEvent {
  EventKind kind;      // throttle_start, throttle_stop, hibernate, critical_stop
  std::string reason;  // the tripped signals ("lock_waiters"), or what ended it
  std::vector<Trip> trips;
  std::chrono::milliseconds throttled_for{0};  // throttle_stop: how long it lasted
};

// The throttle's state machine, fed one health reading at a time. Pure: the
// caller passes the clock, so tests drive it with made-up times. Not
// thread-safe (Pacer guards it).
//
//   running --max trips--> throttled --healthy for hold_time--> running
//   running/throttled --critical trips--> critical_pending
//   critical_pending --critical again after critical_recheck--> hibernating | stopped
//   critical_pending --not critical--> throttled (hold_time applies)
//   hibernating --hibernate_time over--> throttled (a fresh healthy reading
//                                        and hold_time before running)
class Throttle {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Throttle(const ThrottleOptions& options) : options_(options) {}

  // One fresh health reading taken at `now`. Returns the events it causes.
  std::vector<ThrottleEvent> Observe(Clock::time_point now, const std::vector<Trip>& max_trips,
                                     const std::vector<Trip>& critical_trips);
  // Ends hibernation when its time is over (call before deciding to read).
  void Tick(Clock::time_point now);

  ThrottleState state() const { return state_; }
  // Why chunks do not run now ("" when running).
  const std::string& reason() const { return reason_; }
  // When a health reading is needed next, at the latest: the recheck time
  // while critical_pending, the hibernation's end while hibernating.
  std::optional<Clock::time_point> wake_at() const;

 private:
  void Start(Clock::time_point now, ThrottleState state, const std::vector<Trip>& trips,
             std::vector<ThrottleEvent>& events);

  ThrottleOptions options_;
  ThrottleState state_ = ThrottleState::kRunning;
  std::string reason_;
  Clock::time_point since_{};                       // when the throttle started
  std::optional<Clock::time_point> healthy_since_;  // throttled and healthy since
  Clock::time_point until_{};                       // recheck or hibernation end
};

}  // namespace coexist::pacing
