#include "metrics/job_metrics.h"

#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <map>
#include <utility>

namespace coexist::metrics {

std::string JobsExposition(const std::vector<db::JobRow>& jobs,
                           std::chrono::system_clock::time_point read_at) {
  prometheus::Registry registry;
  auto gauge = [&](const std::string& name,
                   const std::string& help) -> prometheus::Family<prometheus::Gauge>& {
    return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
  };
  auto& items =
      gauge("coexist_job_items", "The job's items by state (done items leave after retention).");
  auto& running = gauge("coexist_job_running_runs", "The job's runs working now, on any host.");
  auto& paused = gauge("coexist_job_paused", "1 while the job is paused (coexist jobs pause).");
  auto& rate =
      gauge("coexist_job_items_per_second", "Items a second of the job's running runs together.");
  auto& eta = gauge("coexist_job_eta_seconds",
                    "Seconds until the queued and deferred items are done at the current rate.");
  auto& latency = gauge("coexist_job_online_latency_ratio",
                        "The highest online latency a running run's objective measured, over its "
                        "baseline.");
  auto& objective = gauge("coexist_job_online_latency_objective",
                          "The strictest online latency objective of the job's running runs.");
  auto& pacing = gauge("coexist_job_runs_by_pacing_state",
                       "The job's running runs by their pacer's state (running, throttled, "
                       "paused, hibernating, ...), as their heartbeats wrote it.");
  auto& duty = gauge("coexist_job_pacing_duty",
                     "The lowest duty cycle a running run's latency objective has set (1: full "
                     "speed).");
  auto& segments = gauge("coexist_job_range_segments", "A range job's key-range segments.");
  auto& applied = gauge("coexist_job_range_rows_applied", "Rows a range job has applied.");
  auto& range_rows = gauge("coexist_job_range_rows",
                           "A range job's pass: the rows it expected when it started, and those "
                           "walked so far (applied or sent to the queue).");
  for (const auto& j : jobs) {
    const std::map<std::string, std::string> job{{"job", j.job}};
    for (const auto& [state, count] : {std::pair{"queued", j.queued},
                                       {"deferred", j.deferred},
                                       {"done", j.done},
                                       {"dead", j.dead},
                                       {"cancelled", j.cancelled}}) {
      items.Add({{"job", j.job}, {"state", state}}).Set(static_cast<double>(count));
    }
    running.Add(job).Set(static_cast<double>(j.running_runs));
    paused.Add(job).Set(j.pause ? 1 : 0);
    if (auto r = j.Rate()) rate.Add(job).Set(*r);
    if (auto e = j.EtaSeconds()) eta.Add(job).Set(*e);
    if (j.online_latency_ratio) latency.Add(job).Set(*j.online_latency_ratio);
    if (j.online_latency_objective) objective.Add(job).Set(*j.online_latency_objective);
    for (const auto& [state, runs] : j.runs_by_pacing_state) {
      pacing.Add({{"job", j.job}, {"state", state}}).Set(static_cast<double>(runs));
    }
    if (j.pacing_duty) duty.Add(job).Set(*j.pacing_duty);
    if (j.range_segments > 0) {
      segments.Add({{"job", j.job}, {"state", "finished"}})
          .Set(static_cast<double>(j.range_finished));
      segments.Add({{"job", j.job}, {"state", "all"}}).Set(static_cast<double>(j.range_segments));
      range_rows.Add({{"job", j.job}, {"state", "expected"}})
          .Set(static_cast<double>(j.range_expected));
      range_rows.Add({{"job", j.job}, {"state", "walked"}})
          .Set(static_cast<double>(j.range_walked));
      applied.Add(job).Set(static_cast<double>(j.range_applied));
    }
  }
  // A stale file (its timer stopped) is told from a quiet job by this.
  gauge("coexist_jobs_read_timestamp_seconds", "When coexist jobs read the database.")
      .Add({})
      .Set(std::chrono::duration<double>(read_at.time_since_epoch()).count());
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

}  // namespace coexist::metrics
