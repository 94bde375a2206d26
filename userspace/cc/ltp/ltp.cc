// LTP controller (sroce/cc/ltp.h, docs/cc/ltp.md).
#include "sroce/cc/ltp.h"

#include <algorithm>
#include <cmath>

namespace sroce::cc {

namespace {
float clampf(double v, double lo, double hi) { return static_cast<float>(std::clamp(v, lo, hi)); }
constexpr double kTiny = 1.0 / 512;
}  // namespace

LtpCore::LtpCore(const LtpConfig& cfg, const LtpNet* net)
    : variant_(cfg.variant),
      dither_(cfg.dither),
      min_rate_(cfg.min_rate),
      net_(net),
      filter_(cfg.filter), rng_(cfg.seed * 0x9e3779b97f4a7c15ull | 1) {}

double LtpCore::uniform() {
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  const uint64_t r = rng_ * 0x2545f4914f6cdd1dull;
  return static_cast<double>(r >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

std::array<float, LtpNet::kInputs> LtpCore::features(const LtpObservation& o, double rate) const {
  std::array<float, LtpNet::kInputs> f{};
  const double sent = std::max(o.sent, kTiny / 8);
  const double deliv = std::max(o.delivered, kTiny / 8);
  f[5] = clampf(o.ecn, 0, 1);
  f[6] = clampf(o.loss * 10, 0, 1);
  f[7] = clampf(std::log2(deliv / sent), -4, 1) / 4;
  if (variant_ != LtpVariant::kNoFilter) {
    // What the filter believes: the available rate, how sure it is, where
    // the flow is against it, and the queue on top of the estimated base RTT.
    const double c = filter_.rate_mean();
    const double d = filter_.rtt_mean();
    f[0] = static_cast<float>(std::log2(c) / 9);
    f[1] = clampf(filter_.rate_log_std() / 3, 0, 1);
    f[2] = clampf(std::log2(rate / c), -4, 4) / 4;
    if (o.has_rtt()) {
      f[3] = clampf(o.rtt_mean / d - 1, 0, 4) / 4;
      f[4] = prev_rtt_ > 0 ? clampf((o.rtt_mean - prev_rtt_) / d, -1, 1) : 0.0f;
    }
  } else {
    // Raw signals: delivery and send rate, queue over the smallest RTT seen.
    f[0] = static_cast<float>(std::log2(std::max(deliv, kTiny)) / 9);
    f[1] = static_cast<float>(std::log2(std::max(sent, kTiny)) / 9);
    f[2] = clampf(std::log2(rate / deliv), -4, 4) / 4;
    if (o.has_rtt() && min_rtt_seen_ > 0) {
      f[3] = clampf(o.rtt_mean / min_rtt_seen_ - 1, 0, 4) / 4;
      f[4] = prev_rtt_ > 0 ? clampf((o.rtt_mean - prev_rtt_) / min_rtt_seen_, -1, 1) : 0.0f;
    }
  }
  return f;
}

void LtpCore::rebase(double factor) {
  filter_.rebase(factor);
  prev_rtt_ *= factor;
  min_rtt_seen_ *= factor;
}

double LtpCore::step(const LtpObservation& o, double rate) {
  const bool ok = filter_.update(o);
  if (o.has_rtt()) min_rtt_seen_ = min_rtt_seen_ > 0 ? std::min(min_rtt_seen_, o.rtt_min) : o.rtt_min;
  if (!ok || net_ == nullptr) {
    if (o.has_rtt()) prev_rtt_ = o.rtt_mean;
    return -1;
  }
  const auto f = features(o, rate);
  if (o.has_rtt()) prev_rtt_ = o.rtt_mean;
  const double a = std::clamp(net_->forward(f) + dither_ * uniform(), -1.0, 1.0);
  last_action_ = a;
  return std::clamp(rate * std::exp(LtpNet::kStep * a), min_rate_, 1.0);
}

Ltp::Ltp(const LtpConfig& cfg, const FlowParams& flow)
    : flow_(flow),
      missing_mis_(cfg.missing_mis),
      fallback_mis_(cfg.fallback_mis),
      min_rate_(cfg.min_rate),
      saturation_cut_(cfg.saturation_cut),
      guard_queue_(cfg.guard_queue),
      guard_beta_(cfg.guard_beta),
      guard_max_cut_(cfg.guard_max_cut),
      span_rates_(cfg.span_rates),
      min_mi_(cfg.min_mi),
      net_(cfg.net != nullptr ? cfg.net : builtin_ltp_net(cfg.variant)),
      core_(cfg, net_),
      fallback_(cfg.fallback, flow),
      srtt_ps_(static_cast<double>(flow.base_rtt.ps)),
      base_window_(cfg.base_window),
      base_slack_(cfg.base_slack),
      base_slack_low_(std::max(1.0, cfg.base_slack_low)),
      floor_rtts_(cfg.floor_rtts),
      base_ps_(static_cast<double>(flow.base_rtt.ps)) {
  rate_ = std::clamp(cfg.start_rate, min_rate_, 1.0);
}

void Ltp::learn_base(Time now) {
  if (base_window_.ps <= 0 || mi_rtt_n_ == 0) return;
  // Windowed min of the MIs' min RTT: a smaller sample, or the window's
  // minimum expired, replaces it (BBR's min_rtt filter).
  if (win_min_ps_ <= 0 || mi_rtt_min_ <= win_min_ps_ || now - win_min_at_ > base_window_) {
    win_min_ps_ = mi_rtt_min_;
    win_min_at_ = now;
  }
  const double cfg = static_cast<double>(flow_.base_rtt.ps);
  // Far too small a configured base: the floor stays at base_slack units;
  // far too large: at 1 / base_slack_low of a unit (d's grid starts at 0.25).
  const double want = std::min(std::max(cfg, win_min_ps_ / base_slack_), win_min_ps_ * base_slack_low_);
  // Move the unit only on a real change (25%): each move restarts the
  // filter's belief over d.
  if (want > base_ps_ * 1.25 || want < base_ps_ / 1.25) {
    core_.rebase(base_ps_ / want);
    base_ps_ = want;
  }
}

void Ltp::enter_fallback(uint32_t mis) {
  if (fallback_left_ == 0) {
    // Hand the current rate to the delay rule as its window.
    const double pkts = bytes_in(rate_ * static_cast<double>(flow_.line_rate_bps),
                                 Duration::picos(static_cast<int64_t>(srtt_ps_))) /
                        flow_.mtu_bytes;
    fallback_.set_cwnd_packets(pkts);
  }
  fallback_left_ = std::max(fallback_left_, mis);
}

void Ltp::on_send(const SendEvent& ev) {
  fallback_.on_send(ev);
  mi_sent_ += ev.bytes;
}

void Ltp::on_loss(const LossEvent& ev) {
  mi_lost_ += ev.bytes;
  // A timeout: the ACK clock stopped, the MI has no inputs. The delay rule
  // takes over from the current rate, then sees the loss (and cuts).
  if (ev.kind == LossKind::kTimeout) {
    ++stats_.missing;
    enter_fallback(missing_mis_);
  }
  fallback_.on_loss(ev);
}

void Ltp::on_ack(const AckEvent& ev) {
  fallback_.on_ack(ev);
  if (!mi_open_) {
    mi_open_ = true;
    mi_start_ = ev.now;
    mi_sent_ = mi_acked_ = mi_ecn_ = mi_lost_ = 0;
    mi_rtt_min_ = mi_rtt_sum_ = 0;
    mi_rtt_n_ = 0;
    return;  // the first ACK opens the first MI
  }
  mi_acked_ += ev.acked_bytes;
  if (ev.ecn_echo) mi_ecn_ += ev.acked_bytes;
  if (ev.rtt.ps <= 0) {
    if (span_open_) unsampled_bytes_ += ev.acked_bytes;
  } else {
    // A span boundary: this ACK, and when its packet left (now - rtt).
    const Time sent_at = ev.now - ev.rtt;
    if (!span_open_) {
      span_open_ = true;
      span_ack0_ = ev.now;
      span_send0_ = sent_at;
      span_bytes_ = unsampled_bytes_ = 0;
    } else {
      span_bytes_ += unsampled_bytes_ + ev.acked_bytes;
      unsampled_bytes_ = 0;
    }
    span_ack1_ = ev.now;
    span_send1_ = sent_at;
    const double r = static_cast<double>(ev.rtt.ps);
    srtt_ps_ = 0.875 * srtt_ps_ + 0.125 * r;
    mi_rtt_min_ = mi_rtt_n_ == 0 ? r : std::min(mi_rtt_min_, r);
    mi_rtt_sum_ += r;
    ++mi_rtt_n_;
  }
  const Duration mi = std::max(min_mi_, Duration::picos(static_cast<int64_t>(srtt_ps_)));
  if (ev.now - mi_start_ >= mi) end_mi(ev.now);
}

void Ltp::end_mi(Time now) {
  ++stats_.mis;
  const double line_bytes = bytes_in(static_cast<double>(flow_.line_rate_bps), now - mi_start_);
  learn_base(now);
  const double base = base_ps_;
  LtpObservation o;
  // The ACKs of this MI are for what was sent one RTT (one MI) earlier: the
  // previous MI's sends are the ones to compare the delivery with.
  o.sent = prev_sent_ > 0 ? prev_sent_ : static_cast<double>(mi_sent_) / line_bytes;
  prev_sent_ = static_cast<double>(mi_sent_) / line_bytes;
  o.delivered = static_cast<double>(mi_acked_) / line_bytes;
  // Better, when the MI's ACKs carry RTT samples: the send and delivery
  // rates of the same packets, those acknowledged between the MI's first and
  // last sampled ACK (their send times are now - rtt). At a few packets per
  // MI, bytes per MI are quantised by a packet (+-30 % at 3 packets), and
  // the policy, trained on the fluid model's 5 % noise, read a delivery
  // below what was sent as saturation and cut (docs/cc/ltp.md, "Issue 17,
  // round 3"). Over the same packets sent / delivered is the spacing of the
  // ACKs over that of the sends: 1 unless a queue grew or drained.
  if (span_rates_ && span_open_ && span_bytes_ > 0 && span_ack1_ > span_ack0_ && span_send1_ > span_send0_) {
    const double b = static_cast<double>(span_bytes_);
    const double line = static_cast<double>(flow_.line_rate_bps);
    o.sent = std::min(1.0, b / bytes_in(line, span_send1_ - span_send0_));
    o.delivered = b / bytes_in(line, span_ack1_ - span_ack0_);
    ++stats_.span_mis;
  }
  span_ack0_ = span_ack1_;
  span_send0_ = span_send1_;
  span_bytes_ = 0;
  // The MI's standing queue, absolute (the queue guard, below).
  const double queue_ps = mi_rtt_n_ > 0 && win_min_ps_ > 0 ? mi_rtt_min_ - win_min_ps_ : 0;
  if (mi_rtt_n_ > 0) {
    o.rtt_min = mi_rtt_min_ / base;
    o.rtt_mean = mi_rtt_sum_ / mi_rtt_n_ / base;
  }
  o.ecn = mi_acked_ > 0 ? static_cast<double>(mi_ecn_) / static_cast<double>(mi_acked_) : 0;
  o.loss = mi_sent_ > 0 ? static_cast<double>(mi_lost_) / static_cast<double>(mi_sent_) : 0;
  mi_start_ = now;
  mi_sent_ = mi_acked_ = mi_ecn_ = mi_lost_ = 0;
  mi_rtt_min_ = mi_rtt_sum_ = 0;
  mi_rtt_n_ = 0;

  // One MI of an earlier fallback is used up; the checks below may re-arm it.
  if (fallback_left_ > 0) --fallback_left_;
  const bool missing = !o.has_rtt() || o.delivered <= 0;
  missing_run_ = missing ? missing_run_ + 1 : 0;
  double next = -1;
  if (missing) {
    ++stats_.missing;
    // A few MIs without inputs are held; more, and the delay rule (which
    // acts on every ACK and on losses) decides until inputs return.
    if (missing_run_ >= missing_mis_) enter_fallback(1);
  } else if (net_ == nullptr) {
    core_.filter().update(o);
  } else {
    next = core_.step(o, rate_);
    if (next < 0) {  // the filter diverged: it restarted from its prior
      ++stats_.divergences;
      enter_fallback(fallback_mis_);
    }
  }
  est_bps_ = static_cast<uint64_t>(core_.filter().rate_mean() * static_cast<double>(flow_.line_rate_bps));
  if (in_fallback()) {
    // Follow the delay rule; the policy resumes from its rate.
    ++stats_.fallback_mis;
    rate_ = fallback_rate();
    return;
  }
  if (missing) return;  // hold the rate
  ++stats_.decisions;
  stats_.info_gain += core_.filter().info_gain();
  if (o.delivered < saturation_cut_ * o.sent) next = std::min(next, o.delivered);
  const double gq = static_cast<double>(guard_queue_.ps);
  if (gq > 0 && queue_ps > gq) {
    const double cut = std::max(1 - guard_beta_ * (queue_ps - gq) / queue_ps, 1 - guard_max_cut_);
    if (rate_ * cut < next) {
      next = rate_ * cut;
      ++stats_.guard_cuts;
    }
  }
  rate_ = std::max(next, floor_rate());
}

double Ltp::floor_rate() const {
  if (floor_rtts_ <= 0) return min_rate_;
  const double r = flow_.mtu_bytes * 8.0 * kPsPerSecond / (floor_rtts_ * srtt_ps_) /
                   static_cast<double>(flow_.line_rate_bps);
  return std::clamp(r, min_rate_, 1.0);
}

double Ltp::fallback_rate() const {
  // Swift is ACK-clocked at or above one packet of window (its rate is the
  // line rate there): its rate is then window / srtt.
  const double line = static_cast<double>(flow_.line_rate_bps);
  double r = static_cast<double>(fallback_.rate_bps()) / line;
  if (fallback_.cwnd_packets() >= 1.0)
    r = fallback_.cwnd_packets() * flow_.mtu_bytes * 8.0 * kPsPerSecond / srtt_ps_ / line;
  return std::clamp(r, floor_rate(), 1.0);
}

uint64_t Ltp::rate_bps() const {
  const double line = static_cast<double>(flow_.line_rate_bps);
  if (net_ == nullptr || fallback_left_ > 0)
    return std::max(fallback_.rate_bps(), static_cast<uint64_t>(floor_rate() * line));
  return std::max<uint64_t>(1, static_cast<uint64_t>(rate_ * line));
}

uint64_t Ltp::window_bytes() const {
  if (net_ == nullptr || fallback_left_ > 0) return fallback_.window_bytes();
  // Rate-based: the window only bounds the damage of a stale rate (two
  // smoothed RTTs at the rate, at least two packets).
  const double w = 2.0 * bytes_in(rate_ * static_cast<double>(flow_.line_rate_bps),
                                  Duration::picos(static_cast<int64_t>(srtt_ps_)));
  return std::max<uint64_t>(2ull * flow_.mtu_bytes, static_cast<uint64_t>(w));
}

}  // namespace sroce::cc
