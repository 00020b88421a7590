#include "online-sim/distributions.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace coexist::online_sim {
namespace {

// log1p(x)/x and expm1(x)/x, accurate near 0 (Apache Commons RNG's
// RejectionInversionZipfSampler, after Hörmann and Derflinger 1996).
double Helper1(double x) {
  return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}
double Helper2(double x) {
  return std::abs(x) > 1e-8 ? std::expm1(x) / x
                            : 1 + x * 0.5 * (1 + x * (1.0 / 3) * (1 + 0.25 * x));
}

double Uniform01(Random& random) { return std::uniform_real_distribution<double>(0, 1)(random); }

}  // namespace

KeyChooser::KeyChooser(const config::OnlineConfig& config, uint64_t count)
    : shape_(config.key_distribution), count_(count) {
  if (count == 0) throw std::invalid_argument("no records to choose from");
  if (shape_ == config::KeyDistribution::kZipf) {
    s_ = config.zipf_s;
    h_integral_x1_ = HIntegral(1.5) - 1;
    h_integral_n_ = HIntegral(static_cast<double>(count) + 0.5);
    squeeze_ = 2 - HIntegralInverse(HIntegral(2.5) - H(2));
  } else if (shape_ == config::KeyDistribution::kHotSet) {
    hot_traffic_ = config.hot_traffic;
    hot_count_ = std::clamp<uint64_t>(
        static_cast<uint64_t>(std::ceil(config.hot_keys * static_cast<double>(count))), 1, count);
  }
}

double KeyChooser::H(double x) const { return std::exp(-s_ * std::log(x)); }

double KeyChooser::HIntegral(double x) const {
  double log_x = std::log(x);
  return Helper2((1 - s_) * log_x) * log_x;
}

double KeyChooser::HIntegralInverse(double x) const {
  double t = std::max(x * (1 - s_), -1.0);
  return std::exp(Helper1(t) * x);
}

uint64_t KeyChooser::NextZipf(Random& random) const {
  for (;;) {
    double u = h_integral_n_ + Uniform01(random) * (h_integral_x1_ - h_integral_n_);
    double x = HIntegralInverse(u);
    double k = std::clamp(std::floor(x + 0.5), 1.0, static_cast<double>(count_));
    if (k - x <= squeeze_ || u >= HIntegral(k + 0.5) - H(k)) return static_cast<uint64_t>(k) - 1;
  }
}

uint64_t KeyChooser::Next(Random& random) const {
  switch (shape_) {
    case config::KeyDistribution::kZipf:
      return NextZipf(random);
    case config::KeyDistribution::kHotSet: {
      bool hot = Uniform01(random) < hot_traffic_ || hot_count_ == count_;
      if (hot) return std::uniform_int_distribution<uint64_t>(0, hot_count_ - 1)(random);
      return std::uniform_int_distribution<uint64_t>(hot_count_, count_ - 1)(random);
    }
    case config::KeyDistribution::kUniform:
      break;
  }
  return std::uniform_int_distribution<uint64_t>(0, count_ - 1)(random);
}

ThinkTime::ThinkTime(config::ThinkDistribution shape, std::chrono::milliseconds mean, double sigma)
    : shape_(shape),
      mean_us_(std::chrono::duration<double, std::micro>(mean).count()),
      sigma_(sigma) {}

std::chrono::microseconds ThinkTime::Next(Random& random) const {
  if (mean_us_ <= 0) return std::chrono::microseconds(0);
  double value = mean_us_;
  if (shape_ == config::ThinkDistribution::kExponential) {
    value = std::exponential_distribution<double>(1 / mean_us_)(random);
  } else if (shape_ == config::ThinkDistribution::kLognormal) {
    // mu chosen so that the mean, exp(mu + sigma^2/2), is the configured one.
    double mu = std::log(mean_us_) - sigma_ * sigma_ / 2;
    value = std::lognormal_distribution<double>(mu, sigma_)(random);
  }
  return std::chrono::microseconds(static_cast<long long>(value));
}

std::chrono::microseconds Backoff(std::chrono::milliseconds base, std::chrono::milliseconds cap,
                                  int retry, Random& random) {
  if (base.count() <= 0) return std::chrono::microseconds(0);
  double ceiling = std::min<double>(std::chrono::duration<double, std::micro>(cap).count(),
                                    std::chrono::duration<double, std::micro>(base).count() *
                                        std::ldexp(1.0, std::min(retry, 40)));
  return std::chrono::microseconds(static_cast<long long>(Uniform01(random) * ceiling));
}

}  // namespace coexist::online_sim
