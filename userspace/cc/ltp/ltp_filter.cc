// LTP's grid filter (sroce/cc/ltp_filter.h, docs/cc/ltp.md "The filter").
#include "sroce/cc/ltp_filter.h"

#include <algorithm>
#include <cmath>

namespace sroce::cc {

namespace {

constexpr double kLn2 = 0.69314718055994530942;

template <size_t N>
double normalise(std::array<double, N>& p) {
  double s = 0;
  for (double v : p) s += v;
  if (!(s > 0) || !std::isfinite(s)) return 0;
  for (double& v : p) v /= s;
  return s;
}

// Mean and std of the grid's log value (lo + i step) under p.
template <size_t N>
void log_moments(const std::array<float, N>& p, double lo, double step, double& mean, double& sd) {
  double m = 0, m2 = 0;
  for (size_t i = 0; i < N; ++i) {
    const double x = lo + static_cast<double>(i) * step;
    m += p[i] * x;
    m2 += p[i] * x * x;
  }
  mean = m;
  sd = std::sqrt(std::max(0.0, m2 - m * m));
}

template <size_t N>
double entropy_of(const std::array<float, N>& p) {
  double h = 0;
  for (float v : p)
    if (v > 0) h -= v * std::log(static_cast<double>(v));
  return h;
}

}  // namespace

LtpFilter::LtpFilter(const LtpFilterConfig& cfg)
    : cfg_(cfg),
      // Log-spaced grids: c from rate_lo to 1 (a flow never exceeds its line
      // rate), d from rtt_lo to rtt_hi.
      log_rate_lo_(std::log(cfg_.rate_lo)),
      log_rate_step_(-std::log(cfg_.rate_lo) / (kRateBins - 1)),
      log_rtt_lo_(std::log(cfg_.rtt_lo)),
      log_rtt_step_(std::log(cfg_.rtt_hi / cfg_.rtt_lo) / (kRttBins - 1)) {
  reset();
}

void LtpFilter::reset() {
  pc_.fill(1.0f / kRateBins);
  pd_.fill(1.0f / kRttBins);
  saturated_ = false;
  rtt_floor_ = 0;
}

void LtpFilter::rebase(double factor) {
  rtt_floor_ *= factor;
  pd_.fill(1.0f / kRttBins);
}

template <size_t N>
void LtpFilter::predict(std::array<float, N>& p, double diffusion, double mix) {
  // A random walk on the grid (reflecting at the ends), then the uniform mix.
  std::array<double, N> q{};
  for (size_t i = 0; i < N; ++i) {
    const double out = p[i] * diffusion;
    q[i] += p[i] - 2 * out;
    q[i > 0 ? i - 1 : i] += out;
    q[i + 1 < N ? i + 1 : i] += out;
  }
  for (size_t i = 0; i < N; ++i)
    p[i] = static_cast<float>((1 - mix) * q[i] + mix / static_cast<double>(N));
}

bool LtpFilter::update(const LtpObservation& o) {
  predict(pc_, cfg_.rate_diffusion, cfg_.uniform_mix);
  predict(pd_, cfg_.rtt_diffusion, cfg_.uniform_mix);
  const double h_prior = cfg_.track_info_gain ? entropy() : 0.0;
  info_gain_ = 0;
  const bool finite = std::isfinite(o.sent) && std::isfinite(o.delivered) &&
                      std::isfinite(o.rtt_min) && std::isfinite(o.rtt_mean) &&
                      std::isfinite(o.ecn) && std::isfinite(o.loss);
  if (!finite || o.sent < 0 || o.delivered < 0 || o.rtt_min < 0 || o.rtt_mean < 0) {
    ++divergences_;
    reset();
    return false;
  }
  bool ok = true;
  // Base RTT: observed through the smallest RTT of the flow so far (a queue
  // only adds). The first version used each MI's min RTT with a loose tail
  // above d: under a standing queue every MI pulled d up until the queue
  // looked like path (docs/cc/ltp.md, "The base RTT drifted").
  if (o.has_rtt()) {
    rtt_floor_ = rtt_floor_ > 0 ? std::min(rtt_floor_, o.rtt_min) : o.rtt_min;
    const double lo = std::log(rtt_floor_);
    std::array<double, kRttBins> post{};
    for (int i = 0; i < kRttBins; ++i) {
      const double z = lo - log_rtt_at(i);
      const double s = cfg_.rtt_sigma;
      post[i] = pd_[i] * (std::exp(-z * z / (2 * s * s)) + 1e-12);
    }
    if (normalise(post) < 1e-8) ok = false;  // ~6 sigma off every state
    for (int i = 0; ok && i < kRttBins; ++i) pd_[i] = static_cast<float>(post[i]);
  }
  // Available rate: delivery ~ min(sent, c), log-normal. Sending below c
  // leaves every c >= sent equally likely: nothing learnt about c above it.
  if (ok && o.sent > 0 && o.delivered > 0) {
    const double ly = std::log(o.delivered);
    const double ls = std::log(o.sent);
    const double s = cfg_.delivery_sigma;
    std::array<double, kRateBins> post{};
    for (int i = 0; i < kRateBins; ++i) {
      const double z = ly - std::min(ls, log_rate_at(i));
      post[i] = pc_[i] * (std::exp(-z * z / (2 * s * s)) + 1e-12);
    }
    if (normalise(post) < 1e-8) ok = false;
    for (int i = 0; ok && i < kRateBins; ++i) pc_[i] = static_cast<float>(post[i]);
  }
  if (!ok) {
    ++divergences_;
    reset();
    return false;
  }
  if (cfg_.track_info_gain) info_gain_ = std::max(0.0, h_prior - entropy());
  saturated_ = o.ecn > 0.01 || (o.has_rtt() && o.rtt_mean > rtt_mean() * (1 + cfg_.saturated_queue));
  return true;
}

double LtpFilter::rate_mean() const {
  double m, sd;
  log_moments(pc_, log_rate_lo_, log_rate_step_, m, sd);
  return std::exp(m);
}
double LtpFilter::rate_log_std() const {
  double m, sd;
  log_moments(pc_, log_rate_lo_, log_rate_step_, m, sd);
  return sd / kLn2;
}
double LtpFilter::rtt_mean() const {
  double m, sd;
  log_moments(pd_, log_rtt_lo_, log_rtt_step_, m, sd);
  return std::exp(m);
}
double LtpFilter::rtt_log_std() const {
  double m, sd;
  log_moments(pd_, log_rtt_lo_, log_rtt_step_, m, sd);
  return sd / kLn2;
}
double LtpFilter::entropy() const { return entropy_of(pc_) + entropy_of(pd_); }

}  // namespace sroce::cc
