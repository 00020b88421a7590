#pragma once

namespace coexist {

// Process exit statuses, sysexits(3)-style. Every command maps its failures
// to one of these in one place (cli/failure.h, which main.cpp calls);
// docs/operations.md lists them.
enum class ExitCode : int {
  kOk = 0,
  // `batch run`: the run worked, but not every item it settled is done
  // (docs/batch.md). Small numbers, below sysexits' range, as sysexits has none.
  kItemsDeferred = 2,  // some items were deferred to the next run
  kItemsDead = 3,      // some items failed max_attempts times and are dead
  // `batch run`/`batch daemon`: another run of the same job holds the job's
  // lock (an overlapping cron run, a second host); nothing was done.
  kJobBusy = 4,
  // ... and has held it suspiciously long (batch.busy_timeout): a session
  // that is not a coexist run squats the lock, or a run stopped beating.
  kJobStuck = 5,
  kUsage = 64,        // EX_USAGE: bad command line
  kDataError = 65,    // EX_DATAERR: bad input data (enqueue files, ...)
  kNoInput = 66,      // EX_NOINPUT: an input file does not exist or is unreadable
  kUnavailable = 69,  // EX_UNAVAILABLE: a needed service or program is missing
  kSoftware = 70,     // EX_SOFTWARE: internal error, a bug
  kCantCreate = 73,   // EX_CANTCREAT: cannot create an output file
  kTempFail = 75,     // EX_TEMPFAIL: database unreachable; try again later
  kConfig = 78,       // EX_CONFIG: invalid configuration
};

constexpr int ToInt(ExitCode code) { return static_cast<int>(code); }

}  // namespace coexist
