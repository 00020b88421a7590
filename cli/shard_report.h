#pragma once

// How a command that works every shard of database.shards reports: each
// shard's failure named by the shard (the others go on), the exit status
// the worst of them, and `batch run`'s combined summary (docs/operations.md,
// "Jobs over several databases").

#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "batch/shards.h"
#include "cli/failure.h"
#include "metrics/run_metrics.h"

namespace coexist::cli {

// The worse of two exit statuses: the higher (a failure, 64 and above,
// over 5, 4, 3, 2 and 0).
ExitCode Worst(ExitCode a, ExitCode b);

// What `shard` threw, as main would report it, with the shard's name after
// the prefix ("coexist: shard s2: cannot connect ...", "config error: shard
// s2: job.yaml:3:9: target.table: ...") and no password of `conninfo`.
Failure ShardFailure(const batch::Shard& shard, const std::exception_ptr& error);

// Prints a failure as main prints one: the message, then "HINT: ...".
void PrintFailure(std::ostream& err, const Failure& failure);

// Calls work(shard) for each shard in turn; what it throws is printed to
// std::cerr naming the shard, and the next shard goes on. Returns the worst
// of work's exit statuses and the failures'.
int EachShard(const std::vector<batch::Shard>& shards,
              const std::function<int(const batch::Shard&)>& work);

// `batch run` over the shards: one row per shard, and the totals.
struct ShardedRunReport {
  struct Row {
    std::string shard;
    ExitCode code = ExitCode::kOk;
    std::optional<batch::RunSummary> summary;  // when its run ended with one
    std::optional<Failure> failure;            // when it threw
  };
  std::string job;
  std::string policy;
  std::vector<Row> rows;  // in the order of database.shards
  batch::RunCounts counts;
  long long queued_left = 0;  // of the shards that reported it
  double seconds = 0;         // wall time of the whole command
  ExitCode code = ExitCode::kOk;
};

ShardedRunReport ReportOf(const std::vector<batch::Shard>& shards,
                          const std::vector<batch::ShardRun>& runs, const config::Config& config,
                          double seconds);
// The table on stdout; each failure goes to stderr (PrintFailure).
void PrintShardedRun(std::ostream& out, const ShardedRunReport& report);
// The --json document: the totals under the single run's keys (done,
// deferred, dead, queued_left, ...), exit_code, failed_shards, and under
// "shards" each shard's: its exit_code and its run's summary (SummaryJson),
// or its outcome (failed, busy), error and hint.
nlohmann::json ShardedRunJson(const ShardedRunReport& report);
// One Prometheus record of the job: the shards' counts added up; succeeded
// unless a shard's run failed (a busy shard did nothing, as a busy run).
metrics::RunMetrics ShardedRunMetrics(const ShardedRunReport& report);

}  // namespace coexist::cli
