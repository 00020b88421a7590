#include "online-sim/stats.h"

#include <boost/histogram.hpp>
#include <cmath>

#include "db/sqlstate.h"

namespace coexist::online_sim {
namespace {

namespace bh = boost::histogram;
using LogAxis = bh::axis::regular<double, bh::axis::transform::log>;
// 2400 bins over 9 decades: each bin is about 0.9 % wide.
constexpr unsigned kBins = 2400;
constexpr double kLowUs = 1;
constexpr double kHighUs = 1e9;

}  // namespace

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kView:
      return "view";
    case Kind::kOptimisticEdit:
      return "optimistic_edit";
    case Kind::kPessimisticEdit:
      return "pessimistic_edit";
    case Kind::kOfflineEdit:
      return "offline_edit";
    case Kind::kAtomicDecrement:
      return "atomic_decrement";
    case Kind::kNolock:
      return "nolock";
    case Kind::kMultiEdit:
      return "multi_edit";
  }
  return "unknown";
}

const char* OutcomeName(Outcome outcome) {
  static constexpr const char* kNames[kOutcomeCount] = {"ok",
                                                        "gave_up",
                                                        "conflict",
                                                        "floor",
                                                        "lock_timeout",
                                                        "nowait",
                                                        "edit_lock_busy",
                                                        "lock_revoked",
                                                        "refused_window",
                                                        "refused_owner",
                                                        "refused_edit_locked",
                                                        "abandoned",
                                                        "deadlock",
                                                        "serialization",
                                                        "canceled",
                                                        "terminated",
                                                        "connection_lost",
                                                        "other"};
  return kNames[static_cast<size_t>(outcome)];
}

Outcome OutcomeOf(std::string_view sqlstate, bool nowait) {
  namespace s = db::sqlstate;
  if (sqlstate == s::kLockNotAvailable) return nowait ? Outcome::kNowait : Outcome::kLockTimeout;
  if (sqlstate == s::kEditLockBusy) return Outcome::kEditLockBusy;
  if (sqlstate == s::kEditLockLost) return Outcome::kLockRevoked;
  if (sqlstate == s::kWindowRefused) return Outcome::kRefusedWindow;
  if (sqlstate == s::kOwnerRefused) return Outcome::kRefusedOwner;
  if (sqlstate == s::kEditLockedRefused) return Outcome::kRefusedEditLocked;
  if (sqlstate == s::kDeadlockDetected) return Outcome::kDeadlock;
  if (sqlstate == s::kSerializationFailure) return Outcome::kSerialization;
  if (sqlstate == s::kQueryCanceled) return Outcome::kCanceled;
  if (sqlstate == s::kAdminShutdown) return Outcome::kTerminated;
  return Outcome::kOther;
}

struct LatencyHistogram::Impl {
  decltype(bh::make_histogram(LogAxis(kBins, kLowUs, kHighUs))) histogram =
      bh::make_histogram(LogAxis(kBins, kLowUs, kHighUs));
};

LatencyHistogram::LatencyHistogram() : impl_(std::make_unique<Impl>()) {}
LatencyHistogram::~LatencyHistogram() = default;
LatencyHistogram::LatencyHistogram(LatencyHistogram&&) noexcept = default;
LatencyHistogram& LatencyHistogram::operator=(LatencyHistogram&&) noexcept = default;

void LatencyHistogram::Add(std::chrono::nanoseconds value) {
  double us = std::max(0.0, static_cast<double>(value.count()) / 1000.0);
  impl_->histogram(us);
  ++count_;
  sum_us_ += us;
  max_us_ = std::max(max_us_, us);
}

LatencySummary LatencyHistogram::Summarize() const {
  LatencySummary out;
  out.count = count_;
  if (count_ == 0) return out;
  out.mean_ms = sum_us_ / static_cast<double>(count_) / 1000;
  out.max_ms = max_us_ / 1000;
  // Walk the bins (underflow and overflow included) once for all three
  // quantiles; a quantile is reported as its bin's geometric centre, never
  // above the exact max.
  const double targets[3] = {0.50, 0.95, 0.99};
  double* slots[3] = {&out.p50_ms, &out.p95_ms, &out.p99_ms};
  int next = 0;
  double seen = 0;
  for (auto&& bin : bh::indexed(impl_->histogram, bh::coverage::all)) {
    seen += *bin;
    while (next < 3 && seen >= targets[next] * static_cast<double>(count_)) {
      double lower = std::max(bin.bin().lower(), kLowUs / 2);
      double upper = std::min(bin.bin().upper(), max_us_);
      double centre = std::isfinite(upper) ? std::sqrt(lower * std::max(upper, lower)) : max_us_;
      *slots[next] = std::min(centre, max_us_) / 1000;
      ++next;
    }
    if (next == 3) break;
  }
  return out;
}

long long KindStats::total() const {
  long long sum = 0;
  for (long long n : outcomes) sum += n;
  return sum;
}

long long Stats::total() const {
  long long sum = 0;
  for (const auto& k : kinds_) sum += k.total();
  return sum;
}

}  // namespace coexist::online_sim
