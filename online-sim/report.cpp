// The final table and the --json document of an online-sim run.

#include <cstdio>
#include <nlohmann/json.hpp>

#include "online-sim/simulator.h"

namespace coexist::online_sim {
namespace {

std::string Format(const char* format, auto... values) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, format, values...);
  return buffer;
}

std::string NotOk(const KindReport& kind) {
  std::string out;
  for (const auto& [name, count] : kind.outcomes) {
    if (name == "ok") continue;
    if (!out.empty()) out += ' ';
    out += name + "=" + std::to_string(count);
  }
  for (const auto& [state, count] : kind.other_sqlstates) {
    out += " [" + state + "]=" + std::to_string(count);
  }
  return out.empty() ? "-" : out;
}

nlohmann::json Json(const LatencyFigures& f) {
  return {{"count", f.count},   {"mean_ms", f.mean_ms}, {"p50_ms", f.p50_ms},
          {"p95_ms", f.p95_ms}, {"p99_ms", f.p99_ms},   {"max_ms", f.max_ms}};
}

std::string Latency(const char* name, const LatencyFigures& f) {
  return Format("%s: count=%lld p50=%.2fms p95=%.2fms p99=%.2fms max=%.2fms\n", name, f.count,
                f.p50_ms, f.p95_ms, f.p99_ms, f.max_ms);
}

}  // namespace

void PrintReport(std::ostream& out, const Report& r) {
  out << Format(
      "online-sim: %s model, %s, pool %d, seed %lld, %.1f s, %lld transactions, %.1f/s%s\n",
      config::ToString(r.model),
      r.model == config::LoadModel::kOpen
          ? Format("%.1f arrivals/s, %d workers", r.rate, r.users).c_str()
          : Format("%d users", r.users).c_str(),
      r.pool_size, r.seed, r.elapsed_seconds, r.transactions, r.throughput,
      r.interrupted ? " (interrupted: partial result)" : "");
  out << Format("%-17s %9s %9s %9s %8s %9s %9s %9s %9s  %s\n", "kind", "tx", "ok", "conflicts",
                "retried", "p50_ms", "p95_ms", "p99_ms", "max_ms", "not ok");
  for (const KindReport& k : r.kinds) {
    if (k.transactions == 0 && k.weight == 0) continue;
    long long ok = k.outcomes.count("ok") ? k.outcomes.at("ok") : 0;
    out << Format("%-17s %9lld %9lld %9lld %8lld %9.2f %9.2f %9.2f %9.2f  %s\n", k.kind.c_str(),
                  k.transactions, ok, k.conflicts, k.retried, k.latency.p50_ms, k.latency.p95_ms,
                  k.latency.p99_ms, k.latency.max_ms, NotOk(k).c_str());
  }
  out << Latency("all kinds", r.latency);
  out << Latency("pool wait", r.pool_wait);
  if (r.model == config::LoadModel::kOpen) {
    out << Latency("schedule lag", r.schedule_lag);
  }
  if (r.latency_limit.count() > 0) {
    out << Format("late (latency above %lldms): %lld\n",
                  static_cast<long long>(r.latency_limit.count()), r.late);
  }
  if (r.reconnects > 0) out << "reconnects: " << r.reconnects << '\n';
  const LostUpdateCheck& c = r.lost_check;
  if (c.performed) {
    out << Format(
        "lost-update check: keys=%lld in_doubt=%lld mismatched=%lld expected_change=%lld "
        "actual_change=%lld lost=%lld\n",
        c.keys_checked, c.keys_in_doubt, c.keys_mismatched, c.expected_change, c.actual_change,
        c.lost);
  } else if (!c.skipped.empty()) {
    out << "lost-update check: not performed (" << c.skipped << ")\n";
  }
}

std::string ReportJson(const Report& r) {
  nlohmann::json kinds = nlohmann::json::array();
  for (const KindReport& k : r.kinds) {
    kinds.push_back({{"kind", k.kind},
                     {"weight", k.weight},
                     {"transactions", k.transactions},
                     {"outcomes", k.outcomes},
                     {"other_sqlstates", k.other_sqlstates},
                     {"conflicts", k.conflicts},
                     {"retried", k.retried},
                     {"renewals", k.renewals},
                     {"latency", Json(k.latency)}});
  }
  const LostUpdateCheck& c = r.lost_check;
  nlohmann::json doc = {{"model", config::ToString(r.model)},
                        {"users", r.users},
                        {"rate", r.rate},
                        {"pool_size", r.pool_size},
                        {"seed", r.seed},
                        {"interrupted", r.interrupted},
                        {"elapsed_seconds", r.elapsed_seconds},
                        {"transactions", r.transactions},
                        {"throughput", r.throughput},
                        {"outcomes", r.outcomes},
                        {"latency", Json(r.latency)},
                        {"kinds", kinds},
                        {"pool_wait", Json(r.pool_wait)},
                        {"schedule_lag", Json(r.schedule_lag)},
                        {"latency_limit_ms", r.latency_limit.count()},
                        {"late", r.late},
                        {"reconnects", r.reconnects},
                        {"lost_check",
                         {{"performed", c.performed},
                          {"skipped", c.skipped},
                          {"keys_checked", c.keys_checked},
                          {"keys_in_doubt", c.keys_in_doubt},
                          {"keys_mismatched", c.keys_mismatched},
                          {"expected_change", c.expected_change},
                          {"actual_change", c.actual_change},
                          {"lost", c.lost}}}};
  return doc.dump(2);
}

}  // namespace coexist::online_sim
