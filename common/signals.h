#pragma once

#include <functional>

namespace coexist::signals {

// Process-wide handling of SIGINT, SIGTERM and SIGHUP.
//
// Install() blocks the three signals in the calling thread, so every thread
// started afterwards inherits the mask, and starts a watcher thread that
// receives them with sigtimedwait. Call it first thing in main, before any
// other thread exists. Without Install() (in tests) the default dispositions
// stay and nothing here runs.
//
// On a signal the watcher calls the innermost live Handler. With none, or on
// a second SIGINT/SIGTERM while the first is being handled, it runs every
// live Cleanup (newest first) and exits with 128 + the signal number: that is
// how a throwaway cluster is removed on Ctrl-C during a short command.
void Install();

using Callback = std::function<void(int signo)>;

// Registers a graceful handler for the lifetime of the object: a command
// that can stop cleanly (print partial results, drain) sets a flag here.
// The callback runs on the watcher thread; it must not block. The
// destructor waits for a callback that is running, so the callback may use
// whatever outlives the Handler (declare the Handler after it).
class Handler {
 public:
  explicit Handler(Callback callback);
  ~Handler();
  Handler(const Handler&) = delete;
  Handler& operator=(const Handler&) = delete;

 private:
  int id_;
};

// Registers an emergency cleanup for the lifetime of the object. It runs on
// the watcher thread just before the process exits on a signal, so it must
// not depend on other threads making progress, nor create or destroy a
// Handler or Cleanup. Once cleanups run, a ~Cleanup on another thread blocks
// until the process exits, so a cleanup may use what its Cleanup guards; the
// owner's other threads keep running, though, so state they change too needs
// the owner's own lock.
class Cleanup {
 public:
  explicit Cleanup(std::function<void()> cleanup);
  ~Cleanup();
  Cleanup(const Cleanup&) = delete;
  Cleanup& operator=(const Cleanup&) = delete;

 private:
  int id_;
};

}  // namespace coexist::signals
