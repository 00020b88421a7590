#pragma once

#include "policies/policy.h"

namespace coexist::policies {

// Where `now` stands relative to a set of windows (pure, for tests).
struct WindowState {
  bool active = false;  // inside some window
  // The end of the active window (the latest, when windows overlap).
  std::chrono::system_clock::time_point ends_at{};
};
WindowState EvaluateWindows(const std::vector<config::WindowConfig>& windows,
                            std::chrono::system_clock::time_point now);

// time_window: separate by time. The batch claims only inside a window and
// stops claiming drain_margin before it ends; while a read_only window is
// active the database refuses online writes (CX003), so records are normally
// free. A row lock still held (mode allow, or a transaction from before the
// window) is waited for in steps up to max_wait; an edit-locked record is
// deferred.
class TimeWindow : public Policy {
 public:
  static constexpr const char* kName = "time_window";
  explicit TimeWindow(config::PolicyConfig config) : config_(std::move(config)) {}
  const char* Name() const override { return kName; }
  Decision Decide(const RecordFacts& facts) const override;
  ClaimGate MayClaim(std::chrono::system_clock::time_point now) const override;

 private:
  config::PolicyConfig config_;
};

}  // namespace coexist::policies
