#pragma once

#include "policies/registry.h"

namespace coexist::policies {

// Where `now` stands relative to a set of windows (pure, for tests).
struct WindowState {
  bool active = false;  // inside some window
  // The end of the active window (the latest, when windows overlap).
  std::chrono::system_clock::time_point ends_at{};
};
WindowState EvaluateWindows(const std::vector<Window>& windows,
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

  struct Options {
    // At least one; each {time_zone, start, end, weekdays}, with the
    // policy's `mode` (read_only, the default, or allow).
    std::vector<Window> windows;
    // Claiming stops this long before a window ends. 0s..24h
    milliseconds drain_margin = std::chrono::minutes(5);
    // How long a row lock is waited for before the record is deferred. 0s..24h
    milliseconds max_wait = std::chrono::seconds(30);
    // A run that drained the queue ends its read_only windows for online
    // users at once, not at their clock end; the next run's start sets them
    // again.
    bool release_when_done = true;
  };
  static Options ReadOptions(config::Section& s, const ReadContext& context);

  explicit TimeWindow(config::PolicyConfig config)
      : config_(std::move(config)), options_(OptionsOf<Options>(config_)) {}
  const char* Name() const override { return kName; }
  Decision Decide(const RecordFacts& facts) const override;
  ClaimGate MayClaim(std::chrono::system_clock::time_point now) const override;
  milliseconds MaxWait() const override { return options_.max_wait; }
  std::vector<Window> Windows() const override { return options_.windows; }
  bool ReleasesWindowsWhenDone() const override { return options_.release_when_done; }

 private:
  config::PolicyConfig config_;
  Options options_;
};

}  // namespace coexist::policies
