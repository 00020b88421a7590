#include "pacing/pacer.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "common/log.h"
#include "pacing/control_socket.h"
#include "pacing/health_monitor.h"
#include "pacing/latency_objective.h"
#include "pacing/latency_probe.h"
#include "pacing/load.h"
#include "pacing/session_sampler.h"
#include "pacing/throttle.h"

namespace coexist::pacing {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

double Milliseconds(microseconds value) { return static_cast<double>(value.count()) / 1000.0; }

// The options for `signal`: percentile and tolerance default per signal.
LatencyObjectiveOptions LatencyOptionsFrom(const config::OnlineLatencyConfig& c,
                                           config::LatencySignal signal, milliseconds chunk_time) {
  bool sessions = signal == config::LatencySignal::kSessions;
  double min_chunk_scale = c.min_chunk_time
                               ? std::min(1.0, static_cast<double>(c.min_chunk_time->count()) /
                                                   static_cast<double>(chunk_time.count()))
                               : c.kMinChunkScale;
  return {
      .objective = c.objective,
      .baseline = c.baseline,
      .percentile = c.percentile.value_or(sessions ? c.kSessionsPercentile : c.kProbePercentile),
      .window = c.window,
      .learn_time = c.learn_time,
      .min_duty = c.min_duty,
      .relearn_every = c.relearn_every,
      .tolerance = c.tolerance.value_or(sessions ? microseconds(0) : c.kProbeTolerance),
      .min_chunk_scale = min_chunk_scale,
      .slow_start = c.start == config::LatencyStart::kSlow};
}

// The sessions signal: a decision takes the samples of kSessionsDecision,
// or of 10 reads when they take longer, however many statements they found.
constexpr milliseconds kSessionsDecision{500};
LatencyObjectiveOptions SessionsOptionsFrom(const config::OnlineLatencyConfig& c,
                                            milliseconds chunk_time) {
  auto options = LatencyOptionsFrom(c, config::LatencySignal::kSessions, chunk_time);
  options.decision_time =
      std::max<milliseconds>(kSessionsDecision, LatencyObjective::kMinSamples * c.probe_interval);
  return options;
}

const char* ToString(config::LatencySignal signal) {
  return signal == config::LatencySignal::kSessions ? "sessions" : "probe";
}

bool FileExists(const std::string& path) {
  std::error_code ec;
  return !path.empty() && std::filesystem::exists(path, ec);
}

json TripsToJson(const std::vector<Trip>& trips) {
  json list = json::array();
  for (const auto& t : trips) {
    list.push_back({{"signal", t.signal}, {"value", t.value}, {"threshold", t.threshold}});
  }
  return list;
}

// " lock_waiters=12 threshold=10": the tripped signals as log pairs.
std::string TripsForLog(const std::vector<Trip>& trips) {
  std::string text;
  for (const auto& t : trips) text += " " + t.signal + "=" + json(t.value).dump();
  return text;
}

}  // namespace

PacerOptions PacerOptionsFrom(const config::Config& config, std::string conninfo) {
  return PacerOptions{.pacing = config.pacing,
                      .chunk_size = config.batch.chunk_size,
                      .job = config.batch.job,
                      .target = config.target,
                      .conninfo = std::move(conninfo),
                      .batch_application_name = config.database.application_name,
                      .await_job_pause = true};
}

struct Pacer::Impl {
  PacerOptions options;
  ControlState control;
  std::mutex mutex;  // guards everything below
  ChunkSizer sizer;
  Throttle throttle;
  HealthMonitor monitor;
  Clock::time_point next_check{};
  Signals last_signals;
  std::string pause_reason;  // "operator", "pause_file", "job_paused" or "" (running)
  // Whether the job's pause was read yet, as UpdatePause saw it with the
  // pause itself (PacerOptions::await_job_pause).
  bool job_pause_read = false;
  Clock::time_point paused_since{};
  std::optional<StopReason> stop_reason;
  // The latency objective (pacing.online_latency); empty when not
  // configured or when its probe could not run (latency_off says why).
  std::optional<LatencyObjective> latency;
  std::string latency_off;
  // For the run's LatencySummary: what the controller did while it ran.
  double latency_objective = 0;
  double last_baseline_ms = 0;
  long long latency_slowdowns = 0;
  std::optional<Clock::time_point> over_since;
  Clock::duration time_over{0};
  Clock::time_point learning_deadline{};
  // Each worker's last chunk, for its rest under the duty cycle. The rest
  // is computed with the duty cycle of now, so a raised duty shortens a
  // rest already begun.
  struct LastChunk {
    Clock::time_point ended;
    milliseconds took{0};
  };
  std::unordered_map<std::thread::id, LastChunk> last_chunk;
  // The signal the objective is held to now: the configured one, or the
  // probe after the sessions signal fell back (signal_fallback says why).
  config::LatencySignal signal = config::LatencySignal::kProbe;
  std::string signal_fallback;
  // The chunk_time the second knob scales (pacing.chunk_time, or the
  // operator's chunk-time), and the scale the sizer has now.
  milliseconds chunk_time_base{0};
  double applied_chunk_scale = 1.0;
  Clock::time_point sessions_learning_until{};
  bool sessions_read = false;     // the sampler has read pg_stat_activity once
  long long sessions_reads = 0;   // reads of pg_stat_activity while learning
  long long sessions_seen = 0;    // online statements sampled while learning
  long long latency_samples = 0;  // latencies the objective was fed (status)
  std::unique_ptr<ControlServer> server;
  std::unique_ptr<SessionSampler> sampler;
  std::unique_ptr<LatencyProbe> probe;  // last: its thread stops first

  // The sampler's thread calls back into this: it is stopped and joined
  // before any member goes (moved out under the mutex, joined outside it).
  ~Impl() {
    std::unique_ptr<SessionSampler> stopping;
    {
      std::lock_guard lock(mutex);
      stopping = std::move(sampler);
    }
    stopping.reset();
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  explicit Impl(PacerOptions o)
      : options(std::move(o)),
        control(options.pacing.max_load),
        sizer(ChunkSizerOptions{.adaptive = options.pacing.adaptive,
                                .target = options.pacing.chunk_time,
                                .min_chunk = options.pacing.min_chunk,
                                .max_chunk = options.pacing.max_chunk,
                                .max_growth = options.pacing.max_growth,
                                .shrink_after = options.pacing.shrink_after,
                                .rate_weight = options.pacing.rate_weight,
                                .initial_size = options.chunk_size}),
        throttle(ThrottleOptions{
            .hold_time = options.pacing.hold_time,
            .critical_recheck = options.pacing.critical_recheck,
            .hibernate_time = options.pacing.hibernate_time,
            .stop_on_critical = options.pacing.critical_action == config::CriticalAction::kStop}),
        monitor(HealthMonitorOptions{.conninfo = options.conninfo,
                                     .application_name = options.application_name,
                                     .target = options.target,
                                     .throttle_query = options.pacing.throttle_query}) {
    if (!options.pacing.control_socket.empty()) {
      server = std::make_unique<ControlServer>(options.pacing.control_socket, control);
    }
    chunk_time_base = options.pacing.chunk_time;
    if (options.pacing.online_latency) StartLatencyObjective(*options.pacing.online_latency);
  }

  void StartLatencyObjective(const config::OnlineLatencyConfig& c) {
    latency_objective = c.objective;
    if (c.signal == config::LatencySignal::kSessions) {
      StartSessions(c);
    } else {
      StartProbe(c);
    }
  }

  // Fixed chunks (pacing.adaptive: false) have no length to shorten: the
  // duty is the only knob.
  LatencyObjectiveOptions Fixed(LatencyObjectiveOptions o) const {
    if (!options.pacing.adaptive) o.min_chunk_scale = 1.0;
    return o;
  }

  void StartSessions(const config::OnlineLatencyConfig& c) {
    auto now = Clock::now();
    signal = config::LatencySignal::kSessions;
    latency.emplace(Fixed(SessionsOptionsFrom(c, options.pacing.chunk_time)), now);
    learning_deadline = now + 2 * c.learn_time + std::chrono::seconds(5);
    // Learning must see online statements; too few by then: the probe. The
    // window opens at the sampler's first read (OnSessions): its connection
    // may take long on a busy host, and no statement is counted before. A
    // sampler that never reads falls back at learning_deadline.
    sessions_learning_until = learning_deadline;
    sessions_read = false;
    sessions_reads = 0;
    // The sampler's thread calls OnSessions, which reads `sampler`: it
    // waits for the mutex until the pointer is set.
    std::lock_guard assigning(mutex);
    sampler = std::make_unique<SessionSampler>(
        SessionSamplerOptions{
            .conninfo = options.conninfo,
            .application_name = options.application_name + "-latency-sessions",
            // The dashboard's reads (a daemon serving it samples its
            // history every 2 s) are coexist's own too.
            .exclude_prefixes = {options.application_name, options.batch_application_name,
                                 "coexist-dashboard"},
            .interval = c.probe_interval},
        [this](const std::vector<SessionSample>& samples) { OnSessions(samples); },
        [this](const ProbeUnavailable& why) {
          std::lock_guard lock(mutex);
          FallBackToProbe(why.reason, why.fix);
        });
  }

  void StartProbe(const config::OnlineLatencyConfig& c) {
    auto now = Clock::now();
    signal = config::LatencySignal::kProbe;
    latency.emplace(
        Fixed(LatencyOptionsFrom(c, config::LatencySignal::kProbe, options.pacing.chunk_time)),
        now);
    ApplyChunkScale();
    // A probe that produces nothing (a server too busy to answer) must not
    // hold the batch forever: pacing falls back to the count signals.
    learning_deadline = now + 2 * c.learn_time + std::chrono::seconds(5);
    probe = std::make_unique<LatencyProbe>(
        LatencyProbeOptions{.conninfo = options.conninfo,
                            .application_name = options.application_name + "-latency-probe",
                            .target = options.target,
                            .kind = c.probe,
                            .interval = c.probe_interval,
                            .timeout = std::max<milliseconds>(c.window, std::chrono::seconds(1))},
        [this](microseconds value) { OnProbe(value); },
        [this](const ProbeUnavailable& why) {
          std::lock_guard lock(mutex);
          StopLatencyObjective(why.reason, why.fix);
        });
  }

  // The sessions signal cannot hold the objective: the probe takes over,
  // learning its own baseline, and the run says so once (mutex held; may be
  // called on the sampler's thread, which then stops on its own).
  void FallBackToProbe(const std::string& reason, const std::string& fix) {
    if (!latency || signal != config::LatencySignal::kSessions) return;
    if (sampler) sampler->Stop();
    signal_fallback = reason;
    spdlog::warn("latency signal sessions unavailable, falling back to the probe reason={} fix={}",
                 log::Value(reason), log::Value(fix));
    Record(EventKind::kLatencySignalFallback, reason, {{"fix", fix}, {"signal", "probe"}});
    StartProbe(*options.pacing.online_latency);
    PublishState();
  }

  void OnSessions(const std::vector<SessionSample>& samples) {
    std::lock_guard lock(mutex);
    if (!latency || signal != config::LatencySignal::kSessions) return;
    auto now = Clock::now();
    if (!sessions_read) {
      sessions_read = true;
      const auto& c = *options.pacing.online_latency;
      sessions_learning_until = now + c.learn_time + std::chrono::seconds(1);
      learning_deadline =
          std::max(learning_deadline, now + 2 * c.learn_time + std::chrono::seconds(5));
    }
    if (latency->state() == LatencyState::kLearning) {
      ++sessions_reads;
      sessions_seen += static_cast<long long>(samples.size());
    }
    for (const auto& s : samples) {
      ++latency_samples;
      for (const auto& e : latency->Observe(now, s.latency)) OnLatencyEvent(e);
    }
    if (samples.empty()) {
      for (const auto& e : latency->Quiet(now)) OnLatencyEvent(e);
    }
    if (auto limit = latency->limit(); limit && sampler) sampler->SetCensorAfter(*limit);
  }

  // Pacing goes on by the count signals alone, and says so (mutex held).
  void StopLatencyObjective(const std::string& reason, const std::string& fix) {
    if (!latency) return;
    EndOverSpan(Clock::now());
    latency.reset();
    ApplyChunkScale();  // chunks get chunk_time back
    latency_off = reason;
    spdlog::warn("latency objective off, pacing by the count signals reason={} fix={}",
                 log::Value(reason), log::Value(fix));
    Record(EventKind::kLatencyObjectiveOff, reason, {{"fix", fix}});
    PublishState();
  }

  void OnProbe(microseconds value) {
    std::lock_guard lock(mutex);
    if (!latency) return;
    ++latency_samples;
    for (const auto& e : latency->Observe(Clock::now(), value)) OnLatencyEvent(e);
  }

  // The second knob: chunks sized to chunk_time x the objective's scale
  // (the operator's chunk-time, when set, is the one scaled).
  void ApplyChunkScale() {
    double scale = latency ? latency->chunk_scale() : 1.0;
    if (!sizer.adaptive() || scale == applied_chunk_scale) return;
    applied_chunk_scale = scale;
    auto scaled = std::chrono::duration<double, std::milli>(chunk_time_base) * scale;
    sizer.SetTarget(std::max(milliseconds(1), duration_cast<milliseconds>(scaled)));
  }

  void EndOverSpan(Clock::time_point now) {
    if (!over_since) return;
    time_over += now - *over_since;
    over_since.reset();
  }

  void OnLatencyEvent(const LatencyEvent& e) {
    ApplyChunkScale();
    if (e.baseline.count() > 0) last_baseline_ms = Milliseconds(e.baseline);
    if (e.kind == EventKind::kLatencySlowdown) {
      ++latency_slowdowns;
      if (!over_since) over_since = Clock::now();
    }
    if (e.kind == EventKind::kLatencyRecovered) EndOverSpan(Clock::now());
    json details = {{"baseline_ms", Milliseconds(e.baseline)},
                    {"latency_ms", Milliseconds(e.latency)},
                    {"objective", latency->options().objective},
                    {"duty", e.duty},
                    {"chunk_time_ms", sizer.target().count()}};
    if (e.kind == EventKind::kLatencyBaseline) {
      spdlog::info("latency baseline {} baseline_ms={:.3f}", e.reason, Milliseconds(e.baseline));
    } else {
      spdlog::info("{} latency_ms={:.3f} baseline_ms={:.3f} duty={:.2f} chunk_time_ms={}",
                   ToString(e.kind), Milliseconds(e.latency), Milliseconds(e.baseline), e.duty,
                   sizer.target().count());
    }
    Record(e.kind, e.reason, std::move(details));
    PublishState();
  }

  std::string LatencyJson() const {
    if (!options.pacing.online_latency) return "";
    if (!latency) return json{{"state", "off"}, {"reason", latency_off}}.dump();
    json j = {
        {"state", ToString(latency->state())},       {"signal", ToString(signal)},
        {"objective", latency->options().objective}, {"duty", latency->duty()},
        {"chunk_scale", latency->chunk_scale()},     {"percentile", latency->options().percentile}};
    j["samples"] = latency_samples;
    if (!signal_fallback.empty()) j["signal_fallback"] = signal_fallback;
    if (auto b = latency->baseline()) {
      j["baseline_ms"] = Milliseconds(*b);
      j["latency_ms"] = Milliseconds(latency->latency());
      j["ratio"] = latency->ratio();
    }
    return j.dump();
  }

  // The sessions signal's learning window is over: its time has passed and
  // the sampler has read as often as that time allows at probe_interval. A
  // starved sampler (a busy host) reads less often, so the window waits for
  // its reads rather than judge the workload by a few of them; the learning
  // deadline still bounds it.
  bool SessionsLearningOver(Clock::time_point now) const {
    if (now >= learning_deadline) return true;
    if (now < sessions_learning_until) return false;
    const auto& c = *options.pacing.online_latency;
    auto window = c.learn_time + std::chrono::seconds(1);
    auto reads = window / std::max<milliseconds>(c.probe_interval, milliseconds(1));
    return sessions_reads >= static_cast<long long>(reads);
  }

  // How long this worker must still wait before its next chunk under the
  // latency objective: learning, or resting after its last chunk.
  milliseconds LatencyWait(Clock::time_point now) {
    if (!latency) return milliseconds(0);
    auto step = options.pacing.online_latency->probe_interval;
    if (latency->state() == LatencyState::kLearning) {
      if (signal == config::LatencySignal::kSessions && SessionsLearningOver(now)) {
        FallBackToProbe("learning saw " + std::to_string(sessions_seen) +
                            " online statements, fewer than " +
                            std::to_string(LatencyObjective::kMinSamples),
                        "run the batch while the application works, or set "
                        "pacing.online_latency.signal: probe.");
        return step;
      }
      if (now < learning_deadline) return step;
      StopLatencyObjective("no baseline: the probe measured nothing before the first chunk",
                           "set pacing.online_latency.baseline, or check that the probe's "
                           "statement can run (docs/pacing.md).");
      return milliseconds(0);
    }
    auto it = last_chunk.find(std::this_thread::get_id());
    if (it == last_chunk.end()) return milliseconds(0);
    auto until = it->second.ended + latency->RestAfter(it->second.took);
    if (now >= until) return milliseconds(0);
    return std::min(duration_cast<milliseconds>(until - now) + milliseconds(1), step);
  }

  // Logs an event and records it in coexist.events; a failed insert is
  // logged, never fatal (the batch must not die of its audit trail).
  void Record(EventKind kind, const std::string& reason, json details) {
    details["reason"] = reason;
    details["signals"] = SignalsToJson(last_signals);
    try {
      monitor.RecordEvent(kind, options.job, options.run_id, details.dump());
    } catch (const std::exception& e) {
      spdlog::warn("pacing event not recorded kind={} error={}", ToString(kind),
                   log::Value(e.what()));
    }
  }

  void OnThrottleEvent(const ThrottleEvent& e) {
    json details = {{"tripped", TripsToJson(e.trips)}};
    if (e.kind == EventKind::kThrottleStart) {
      spdlog::info("throttle started reason={}{}", e.reason, TripsForLog(e.trips));
    } else if (e.kind == EventKind::kThrottleStop) {
      details["throttled_ms"] = e.throttled_for.count();
      spdlog::info("throttle stopped reason={} throttled_ms={}", e.reason, e.throttled_for.count());
    } else if (e.kind == EventKind::kHibernate) {
      details["hibernate_ms"] = options.pacing.hibernate_time.count();
      spdlog::warn("hibernating reason={} hibernate_ms={}{}", e.reason,
                   options.pacing.hibernate_time.count(), TripsForLog(e.trips));
    } else {
      spdlog::warn("critical load stop reason={}{}", e.reason, TripsForLog(e.trips));
    }
    Record(e.kind, e.reason, std::move(details));
  }

  void ApplyOverrides() {
    auto o = control.TakeSizingOverride();
    if (!o) return;
    if (o->chunk_time) {
      chunk_time_base = *o->chunk_time;
      applied_chunk_scale = 0;  // scaled anew below
      sizer.SetTarget(*o->chunk_time);
      ApplyChunkScale();
    }
    if (o->chunk_size) sizer.SetFixed(*o->chunk_size);
  }

  // The operator's pause (socket or file) and the job's (in the database)
  // are throttles of their own, with the same events, so the audit trail
  // shows who held the batch.
  void UpdatePause(Clock::time_point now) {
    auto [read, job_pause] = control.job_pause();
    job_pause_read = read;
    std::string reason = control.paused()                        ? "operator"
                         : FileExists(options.pacing.pause_file) ? "pause_file"
                         : job_pause                             ? "job_paused"
                                                                 : "";
    if (reason == pause_reason) return;
    if (!pause_reason.empty()) {
      auto held = duration_cast<milliseconds>(now - paused_since);
      spdlog::info("throttle stopped reason={} throttled_ms={}", pause_reason, held.count());
      Record(EventKind::kThrottleStop, pause_reason, {{"throttled_ms", held.count()}});
    }
    if (!reason.empty()) {
      paused_since = now;
      json details = json::object();
      if (reason == "job_paused") {
        details["paused_by"] = job_pause->by;
        details["pause_reason"] = job_pause->reason;
        spdlog::info("throttle started reason={} paused_by={} pause_reason={}", reason,
                     log::Value(job_pause->by), log::Value(job_pause->reason));
      } else {
        spdlog::info("throttle started reason={}", reason);
      }
      Record(EventKind::kThrottleStart, reason, std::move(details));
    }
    pause_reason = reason;
  }

  void CheckHealth(Clock::time_point now) {
    throttle.Tick(now);
    if (throttle.state() == ThrottleState::kHibernating || now < next_check) return;
    next_check = now + options.pacing.check_interval;
    try {
      last_signals = monitor.Read();
    } catch (const std::exception& e) {
      // Blind for one interval: keep the current state and try again.
      spdlog::warn("health check failed error={}", log::Value(e.what()));
      return;
    }
    auto max_trips = Evaluate(last_signals, control.max_load(), true);
    auto critical_trips = Evaluate(last_signals, options.pacing.critical_load, false);
    for (const auto& e : throttle.Observe(now, max_trips, critical_trips)) OnThrottleEvent(e);
    if (auto wake = throttle.wake_at(); wake && *wake < next_check) next_check = *wake;
  }

  std::optional<StopReason> ReasonToStop() {
    if (control.stop_requested()) return control.stop_reason();
    if (FileExists(options.pacing.stop_file)) return StopReason::kStopFile;
    if (throttle.state() == ThrottleState::kStopped) return StopReason::kCriticalLoad;
    return std::nullopt;
  }

  void PublishState() {
    StatusSnapshot s;
    s.state = stop_reason             ? "stopping"
              : !pause_reason.empty() ? "paused"
                                      : ToString(throttle.state());
    s.reason = stop_reason             ? std::string(ToString(*stop_reason))
               : !pause_reason.empty() ? pause_reason
                                       : throttle.reason();
    if (s.state == "running" && latency && latency->state() == LatencyState::kLearning) {
      s.state = "learning";  // the baseline is measured before the first chunk
      s.reason = "online_latency";
    }
    s.adaptive = sizer.adaptive();
    s.chunk_size = sizer.Next();
    s.chunk_time = sizer.target();
    s.signals_json = SignalsToJson(last_signals).dump();
    s.latency_json = LatencyJson();
    control.Publish(s);
  }

  // One decision: run a chunk of *size, stop (nullopt), or wait `wait`.
  struct Decision {
    bool stop = false;
    std::optional<int> size;
    milliseconds wait{0};
  };

  Decision Step(Clock::time_point now) {
    ApplyOverrides();
    UpdatePause(now);
    CheckHealth(now);
    auto reason = ReasonToStop();
    if (reason && !stop_reason) spdlog::info("pacing stop reason={}", ToString(*reason));
    stop_reason = reason;
    PublishState();
    if (stop_reason) return {.stop = true};
    bool may_run = pause_reason.empty() && throttle.state() == ThrottleState::kRunning &&
                   (!options.await_job_pause || job_pause_read);
    // A due baseline holds the batch like a pause, probed without it.
    bool relearning = may_run && latency && latency->RelearnDue(now);
    if (latency) latency->SetBatchActive(now, may_run && !relearning);
    if (relearning) return {.wait = options.pacing.online_latency->probe_interval};
    if (may_run) {
      if (auto wait = LatencyWait(now); wait > milliseconds(0)) return {.wait = wait};
      return {.size = sizer.Next()};
    }
    auto until_check = duration_cast<milliseconds>(next_check - now);
    if (auto wake = throttle.wake_at()) until_check = duration_cast<milliseconds>(*wake - now);
    auto wait = std::min(until_check, options.pacing.check_interval);
    return {.wait = std::max(wait, milliseconds(1))};
  }
};

Pacer::Pacer(PacerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  std::lock_guard lock(impl_->mutex);
  impl_->PublishState();
}

Pacer::~Pacer() = default;

std::optional<int> Pacer::BeforeChunk() {
  for (;;) {
    auto seen = impl_->control.generation();
    Impl::Decision decision;
    {
      std::lock_guard lock(impl_->mutex);
      decision = impl_->Step(Clock::now());
    }
    if (decision.stop) return std::nullopt;
    if (decision.size) return decision.size;
    impl_->control.WaitForChange(seen, decision.wait);
  }
}

void Pacer::AfterChunk(const ChunkReport& report) {
  std::lock_guard lock(impl_->mutex);
  impl_->sizer.Record(report.items, report.took, report.hit_timeout);
  impl_->monitor.ReportBatch(report.lock_wait, report.statement_latency.value_or(report.took));
  impl_->last_chunk[std::this_thread::get_id()] = {Clock::now(), report.took};
  if (report.hit_timeout) {
    spdlog::info("chunk timed out items={} took_ms={} next_chunk={}", report.items,
                 report.took.count(), impl_->sizer.Next());
  }
  impl_->PublishState();
}

void Pacer::PublishStatus(long long done, std::optional<long long> total, double rate) {
  impl_->control.PublishProgress(done, total, rate);
}

void Pacer::SetJobPause(std::optional<db::JobPause> pause) {
  impl_->control.SetJobPause(std::move(pause));
}

void Pacer::SetRunId(long long run_id) {
  std::lock_guard lock(impl_->mutex);
  impl_->options.run_id = run_id;
}

std::optional<StopReason> Pacer::WhyStopped() {
  std::lock_guard lock(impl_->mutex);
  return impl_->stop_reason;
}

void Pacer::RequestStop(StopReason reason) { impl_->control.RequestStop(reason); }

std::string Pacer::StatusJson() { return impl_->control.Handle("status"); }

ControlState& Pacer::control() { return impl_->control; }

std::optional<LatencySummary> Pacer::Latency() {
  std::lock_guard lock(impl_->mutex);
  auto& i = *impl_;
  if (!i.options.pacing.online_latency) return std::nullopt;
  auto over = i.time_over;
  if (i.over_since) over += Clock::now() - *i.over_since;
  return LatencySummary{.on = i.latency.has_value(),
                        .off_reason = i.latency_off,
                        .objective = i.latency_objective,
                        .signal = ToString(i.signal),
                        .baseline_ms = i.last_baseline_ms,
                        .slowdowns = i.latency_slowdowns,
                        .seconds_over = std::chrono::duration<double>(over).count()};
}

std::optional<double> Pacer::OnlineLatencyRatio() {
  std::lock_guard lock(impl_->mutex);
  const auto& latency = impl_->latency;
  if (!latency || latency->state() == LatencyState::kLearning) return std::nullopt;
  return latency->ratio();
}

std::string Pacer::PacingJson() {
  const json status = json::parse(StatusJson());
  json pacing = json::object();
  for (const char* key : {"state", "reason", "chunk_size", "chunk_time_ms", "adaptive"}) {
    pacing[key] = status.at(key);
  }
  if (status.contains("online_latency")) {
    json latency = json::object();
    for (const char* key : {"state", "duty", "chunk_scale", "ratio", "objective"}) {
      if (status["online_latency"].contains(key)) latency[key] = status["online_latency"][key];
    }
    pacing["online_latency"] = latency;
  }
  return pacing.dump();
}

}  // namespace coexist::pacing
