#include "metrics/run_metrics.h"

#include <fcntl.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "metrics/textfile.h"

namespace coexist::metrics {
namespace {

double Seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// What a previous file recorded for the job in `metric` (a series with the
// job label only); nullopt when there is no file or no such line.
std::optional<double> PreviousValue(const std::filesystem::path& path, const std::string& metric,
                                    const std::string& job) {
  std::ifstream in(path);
  std::regex line("^" + metric + "\\{job=\"" +
                  std::regex_replace(job, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                  "\"\\} ([0-9.e+]+)$");
  for (std::string text; std::getline(in, text);) {
    std::smatch match;
    if (std::regex_match(text, match, line)) return std::stod(match[1]);
  }
  return std::nullopt;
}

std::chrono::system_clock::time_point TimeOf(double seconds) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::duration<double>(seconds)));
}

// Holds an exclusive flock on a folder while the textfile's processes on
// this host (shared runs of one job) decide and write, one at a time. Any
// reader of the folder can take that lock: after 5 s the write goes ahead
// without it rather than keep the run from ending.
class FolderLock {
 public:
  explicit FolderLock(const std::filesystem::path& folder)
      : fd_(open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ < 0) return;
    for (int attempt = 0; attempt < 500 && flock(fd_, LOCK_EX | LOCK_NB) != 0; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~FolderLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_;
};

}  // namespace

std::string Exposition(const RunMetrics& run, std::chrono::system_clock::time_point last_success) {
  prometheus::Registry registry;
  auto gauge = [&](const std::string& name,
                   const std::string& help) -> prometheus::Family<prometheus::Gauge>& {
    return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
  };
  const std::map<std::string, std::string> job{{"job", run.job}, {"policy", run.policy}};
  gauge("coexist_batch_last_run_timestamp_seconds", "When the last run of the job ended.")
      .Add({{"job", run.job}})
      .Set(Seconds(run.finished_at));
  gauge("coexist_batch_last_success_timestamp_seconds",
        "When the last successful run of the job ended.")
      .Add({{"job", run.job}})
      .Set(Seconds(last_success));
  gauge("coexist_batch_last_run_success", "1 when the last run worked, 0 when it failed.")
      .Add(job)
      .Set(run.succeeded ? 1 : 0);
  gauge("coexist_batch_last_run_duration_seconds", "How long the last run took.")
      .Add(job)
      .Set(run.seconds);
  auto& items = gauge("coexist_batch_last_run_items", "Items the last run settled, by outcome.");
  for (const auto& [outcome, n] : {std::pair{"done", run.counts.done},
                                   {"deferred", run.counts.deferred},
                                   {"dead", run.counts.dead}}) {
    auto labels = job;
    labels["outcome"] = outcome;
    items.Add(labels).Set(static_cast<double>(n));
  }
  auto& deferrals =
      gauge("coexist_batch_last_run_deferrals", "Items the last run deferred, by reason.");
  for (const auto& [reason, n] : run.counts.deferrals_by_reason) {
    auto labels = job;
    labels["reason"] = reason;
    deferrals.Add(labels).Set(static_cast<double>(n));
  }
  gauge("coexist_batch_last_run_revocations", "Edit locks the last run revoked (batch_priority).")
      .Add(job)
      .Set(static_cast<double>(run.counts.revoked));
  gauge("coexist_batch_last_run_escalations", "Items the last run escalated (skip_locked).")
      .Add(job)
      .Set(static_cast<double>(run.counts.escalated));
  if (run.latency) {
    gauge("coexist_batch_last_run_latency_objective_on",
          "1 when the last run was paced by its online latency objective, 0 when its probe "
          "could not run.")
        .Add(job)
        .Set(run.latency->on ? 1 : 0);
    gauge("coexist_batch_last_run_latency_slowdowns",
          "Times the last run halved its duty cycle for the online latency objective.")
        .Add(job)
        .Set(static_cast<double>(run.latency->slowdowns));
    gauge("coexist_batch_last_run_latency_over_seconds",
          "Seconds the last run's latency probe was over the objective.")
        .Add(job)
        .Set(run.latency->seconds_over);
    gauge("coexist_batch_last_run_latency_baseline_seconds",
          "The online latency baseline the last run was paced against.")
        .Add(job)
        .Set(run.latency->baseline_ms / 1000);
  }
  if (run.together) {
    const auto& t = *run.together;
    const std::map<std::string, std::string> job_only{{"job", run.job}};
    gauge("coexist_batch_last_runs_together",
          "Runs of the job that worked alongside the last run, that run included.")
        .Add(job_only)
        .Set(static_cast<double>(t.runs));
    gauge("coexist_batch_last_runs_together_running",
          "Of those, the runs still running when the last run ended.")
        .Add(job_only)
        .Set(static_cast<double>(t.running));
    gauge("coexist_batch_last_runs_together_failed", "Of those, the runs that failed or died.")
        .Add(job_only)
        .Set(static_cast<double>(t.failed));
    auto& together_items = gauge("coexist_batch_last_runs_together_items",
                                 "Items the runs together settled, by outcome.");
    for (const auto& [outcome, n] :
         {std::pair{"done", t.done}, {"deferred", t.deferred}, {"dead", t.dead}}) {
      together_items.Add({{"job", run.job}, {"outcome", outcome}}).Set(static_cast<double>(n));
    }
    gauge("coexist_batch_last_runs_together_duration_seconds",
          "From the first start of the runs together to the last end.")
        .Add(job_only)
        .Set(t.seconds);
  }
  if (run.stop_reason) {
    // One series, the reason as a label: a budget that ran out before the
    // queue did (max_duration, max_items) is what an alert looks for.
    gauge("coexist_batch_last_run_stop_reason",
          "1 for the reason the last run stopped claiming (drained, max_duration, ...).")
        .Add({{"job", run.job}, {"reason", std::string(ToString(*run.stop_reason))}})
        .Set(1);
  }
  gauge("coexist_batch_queued_items", "Items of the job still queued when the last run ended.")
      .Add({{"job", run.job}})
      .Set(static_cast<double>(run.queued_left));
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

bool WriteTextfile(const std::filesystem::path& path, const RunMetrics& run) {
  auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  FolderLock lock(folder);
  // A sibling shared run on this host that ended later wrote the newer
  // view of the job (its runs together include this one's figures).
  auto previous_end = PreviousValue(path, "coexist_batch_last_run_timestamp_seconds", run.job);
  if (previous_end && TimeOf(*previous_end) > run.finished_at) return false;
  auto last_success =
      run.succeeded
          ? run.finished_at
          : TimeOf(PreviousValue(path, "coexist_batch_last_success_timestamp_seconds", run.job)
                       .value_or(0));
  ReplaceFile(path, Exposition(run, last_success));
  return true;
}

}  // namespace coexist::metrics
