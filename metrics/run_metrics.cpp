#include "metrics/run_metrics.h"

#include <fcntl.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/error.h"

namespace coexist::metrics {
namespace {

double Seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// The last-success timestamp a previous file recorded for the job; epoch 0
// when there is none.
std::chrono::system_clock::time_point PreviousSuccess(const std::filesystem::path& path,
                                                      const std::string& job) {
  std::ifstream in(path);
  std::regex line("^coexist_batch_last_success_timestamp_seconds\\{job=\"" +
                  std::regex_replace(job, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                  "\"\\} ([0-9.e+]+)$");
  for (std::string text; std::getline(in, text);) {
    std::smatch match;
    if (std::regex_match(text, match, line)) {
      return std::chrono::system_clock::time_point(
          std::chrono::duration_cast<std::chrono::system_clock::duration>(
              std::chrono::duration<double>(std::stod(match[1]))));
    }
  }
  return {};
}

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
  gauge("coexist_batch_queued_items", "Items of the job still queued when the last run ended.")
      .Add({{"job", run.job}})
      .Set(static_cast<double>(run.queued_left));
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

void WriteTextfile(const std::filesystem::path& path, const RunMetrics& run) {
  auto last_success = run.succeeded ? run.finished_at : PreviousSuccess(path, run.job);
  std::string text = Exposition(run, last_success);
  auto fail = [&](const std::string& what, int error) {
    throw Error(
        ExitCode::kCantCreate,
        "cannot write metrics to " + path.string() + ": " + what + ": " + std::strerror(error),
        "check that the folder exists and that this user may create files in it.");
  };
  // A fresh, unpredictable name in the target's folder (mkstemp: O_CREAT |
  // O_EXCL, so a symlink planted there is never followed), made durable
  // (fsync) before the rename replaces the old file in one step.
  auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::string temp = (folder / ("." + path.filename().string() + ".XXXXXX")).string();
  int fd = mkstemp(temp.data());
  if (fd < 0) fail("cannot create a temporary file in " + folder.string(), errno);
  auto discard = [&](const std::string& what) {
    int error = errno;
    close(fd);
    unlink(temp.c_str());
    fail(what, error);
  };
  // mkstemp makes it 0600; node_exporter reads it as another user.
  if (fchmod(fd, 0644) != 0) discard("chmod");
  for (size_t written = 0; written < text.size();) {
    ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) discard("write");
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) discard("fsync");
  if (close(fd) != 0) {
    int error = errno;
    unlink(temp.c_str());
    fail("close", error);
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    int error = errno;
    unlink(temp.c_str());
    fail("rename", error);
  }
  // The rename itself survives a crash once the folder is synced.
  int dir = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    fsync(dir);
    close(dir);
  }
}

}  // namespace coexist::metrics
