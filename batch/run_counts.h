#pragma once

// A plain record with no dependencies: what a run has settled so far. The
// workers add to it (batch::Counters), the run's progress callback, its
// summary, its `runs` row, its Prometheus metrics and the daemon's totals
// all carry this one type instead of copying its fields one by one.

#include <map>
#include <string>

namespace coexist::batch {

struct RunCounts {
  long long claimed = 0;  // items settled (done + deferred + dead)
  long long done = 0;
  long long deferred = 0;
  long long dead = 0;
  // Items that named a key with no row in the target, whatever
  // batch.missing_rows then did with them (counted in done or dead too).
  long long missing = 0;
  long long escalated = 0;  // skip_locked escalations
  long long revoked = 0;    // edit locks revoked (batch_priority, force)
  long long signalled = 0;  // online backends cancelled or terminated
  std::map<std::string, long long> deferrals_by_reason;  // edit_locked, row_locked, ...

  // Adds `other`'s counts to these (the daemon's totals over its runs).
  RunCounts& operator+=(const RunCounts& other) {
    claimed += other.claimed;
    done += other.done;
    deferred += other.deferred;
    dead += other.dead;
    missing += other.missing;
    escalated += other.escalated;
    revoked += other.revoked;
    signalled += other.signalled;
    for (const auto& [reason, n] : other.deferrals_by_reason) deferrals_by_reason[reason] += n;
    return *this;
  }
};

// What a run in progress reports once a second, from its own counters
// (never read back from the database): RunOptions::on_progress.
struct RunProgress {
  long long run_id = 0;
  RunCounts counts;
  long long queued_at_start = 0;  // the job's queued items when the run started
  double items_per_second = 0;    // done / seconds so far
};

}  // namespace coexist::batch
