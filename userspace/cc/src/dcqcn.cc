// DCQCN reaction point and notification point. The state machine is the
// paper's Figure 5 (Zhu et al., SIGCOMM 2015, section 3.1); docs/cc/dcqcn.md
// explains it and each default.
#include "sroce/cc/dcqcn.h"

#include <algorithm>
#include <cmath>

namespace sroce::cc {

DcqcnConfig DcqcnConfig::connectx() { return DcqcnConfig{}; }

DcqcnConfig DcqcnConfig::paper() {
  DcqcnConfig c;
  c.cnp_interval = Duration::micros(50);       // N = 50 us
  c.coalesce_marks = true;
  c.g = 1.0 / 256;                             // g = 1/256
  c.alpha_period = Duration::micros(55);       // K = 55 us
  c.alpha_update_on_cnp = true;
  c.initial_alpha = 1.0;
  c.rate_decrease_period = Duration::picos(0); // every CNP cuts
  c.rate_increase_timer = Duration::micros(55);  // T = 55 us
  c.byte_counter = 10'000'000;                 // B = 10 MB
  c.stage_threshold = 5;                       // F = 5
  c.ai_rate_bps = 40'000'000;                  // R_AI = 40 Mb/s
  c.hai_rate_bps = 400'000'000;                // ours: 10 x R_AI, the QCN ratio CX also uses
  c.clamp_target_always = true;                // Rt := Rc on every decrease
  return c;
}

bool DcqcnNotificationPoint::on_marked_packet(Time now) {
  // NP: "if a marked packet arrives for a flow, and no CNP has been sent for
  // the flow in the last N microseconds, a CNP is sent immediately" (sec. 3.1).
  if (sent_any_ && now - last_cnp_ < interval_) {
    if (coalesce_) pending_ = true;
    return false;
  }
  sent_any_ = true;
  pending_ = false;
  last_cnp_ = now;
  ++cnps_;
  return true;
}

bool DcqcnNotificationPoint::on_timer(Time now) {
  if (!pending_ || now < last_cnp_ + interval_) return false;
  pending_ = false;
  last_cnp_ = now;
  ++cnps_;
  return true;
}

Dcqcn::Dcqcn(const DcqcnConfig& cfg, const FlowParams& flow)
    : cfg_(cfg),
      line_rate_(static_cast<double>(flow.line_rate_bps)),
      rc_(line_rate_),
      rt_(line_rate_),
      alpha_(cfg.initial_alpha) {}

// Brings alpha up to `now`, one alpha period at a time, without a timer per
// period (the CX period is 1 us: a software timer that often per flow would
// cost more than the packets). Exactly the periodic update, evaluated lazily.
void Dcqcn::advance_alpha(Time now) {
  const int64_t period = cfg_.alpha_period.ps;
  if (period <= 0 || now < alpha_epoch_) return;
  const int64_t k = (now - alpha_epoch_).ps / period;
  if (k <= 0) return;
  const double keep = 1.0 - cfg_.g;
  // The first elapsed period may have seen a CNP (CX sampling); the rest did not.
  alpha_ = keep * alpha_ + (cnp_in_alpha_period_ ? cfg_.g : 0.0);
  cnp_in_alpha_period_ = false;
  if (k > 1) alpha_ *= std::pow(keep, static_cast<double>(k - 1));
  alpha_epoch_ = alpha_epoch_ + Duration::picos(k * period);
}

double Dcqcn::alpha(Time now) const {
  Dcqcn copy = *this;
  copy.advance_alpha(now);
  return copy.alpha_;
}

void Dcqcn::on_cnp(Time now) {
  ++cnps_;
  if (!active_) {
    // First CNP of a congestion episode: the flow gets a rate limiter with a
    // fresh alpha (CX initial_alpha_value; paper: alpha starts at 1).
    active_ = true;
    alpha_ = cfg_.initial_alpha;
    alpha_epoch_ = now;
    cnp_in_alpha_period_ = false;
    t_stage_ = bc_stage_ = 0;
    bytes_since_stage_ = 0;
  }
  advance_alpha(now);

  // Rate decrease, at most once per rate_decrease_period (CX); the paper cuts
  // on every CNP, which the NP already spaces N apart.
  const bool can_cut = cfg_.rate_decrease_period.ps <= 0 || !decreased_any_ ||
                       now - last_decrease_ >= cfg_.rate_decrease_period;
  if (can_cut) {
    decrease(now);
  } else {
    cnp_pending_ = true;
    decrease_deadline_ = last_decrease_ + cfg_.rate_decrease_period;
  }

  if (cfg_.alpha_update_on_cnp) {
    // Paper: alpha = (1 - g) alpha + g after the cut, and the alpha timer
    // (K) restarts: it only decays after K without a CNP.
    alpha_ = (1.0 - cfg_.g) * alpha_ + cfg_.g;
    alpha_epoch_ = now;
  } else {
    cnp_in_alpha_period_ = true;
  }
}

void Dcqcn::decrease(Time now) {
  // Rt := Rc, then Rc := Rc (1 - alpha / 2) (paper, Figure 5). CX keeps the
  // old target unless the last increase came from the timer.
  if (cfg_.clamp_target_always || t_stage_ > 0 || !decreased_any_) rt_ = rc_;
  const double factor = std::max(1.0 - alpha_ / 2.0, cfg_.min_decrease_factor);
  rc_ = std::max(static_cast<double>(cfg_.min_rate_bps), rc_ * factor);
  ++decreases_;
  decreased_any_ = true;
  last_decrease_ = now;
  cnp_pending_ = false;
  decrease_deadline_ = Time::never();
  // A decrease resets both increase counters and restarts the timer T.
  t_stage_ = bc_stage_ = 0;
  bytes_since_stage_ = 0;
  increase_deadline_ = now + cfg_.rate_increase_timer;
}

// One expiry of the timer T or of the byte counter B (the caller counted it).
// Counters are counted before the check, so the first F events are fast
// recovery: Rc moves half way to Rt each time (paper: "5 stages" with F = 5).
// phase() says which increase applies.
void Dcqcn::increase_event() {
  switch (phase()) {
    case Phase::kLineRate:
    case Phase::kFastRecovery:
      break;  // target unchanged
    case Phase::kAdditive:
      rt_ += static_cast<double>(cfg_.ai_rate_bps);
      break;
    case Phase::kHyper: {
      // Paper/QCN: Rt += i R_HAI, i = min(T, BC) - F. Timer only: R_HAI.
      const uint32_t i = cfg_.byte_counter > 0 ? std::min(t_stage_, bc_stage_) - cfg_.stage_threshold : 1;
      rt_ += static_cast<double>(i) * static_cast<double>(cfg_.hai_rate_bps);
      break;
    }
  }
  rt_ = std::min(rt_, line_rate_);
  rc_ = (rt_ + rc_) / 2.0;
  // Back at line rate: release the rate limiter (no timers while uncongested).
  if (rt_ >= line_rate_ && rc_ >= line_rate_ * 0.999) deactivate();
}

void Dcqcn::deactivate() {
  rc_ = rt_ = line_rate_;
  active_ = false;
  t_stage_ = bc_stage_ = 0;
  bytes_since_stage_ = 0;
  increase_deadline_ = Time::never();
  if (!cnp_pending_) decrease_deadline_ = Time::never();
}

void Dcqcn::on_send(const SendEvent& ev) {
  if (!active_ || cfg_.byte_counter == 0) return;
  bytes_since_stage_ += ev.bytes;
  while (active_ && bytes_since_stage_ >= cfg_.byte_counter) {
    bytes_since_stage_ -= cfg_.byte_counter;
    ++bc_stage_;
    increase_event();
  }
}

void Dcqcn::on_timer(Time now) {
  // Due events in time order; a decrease and an increase at the same instant
  // run decrease first (the decrease restarts T, so the increase is moot).
  for (;;) {
    const Time dec = cnp_pending_ ? decrease_deadline_ : Time::never();
    const Time inc = increase_deadline_;
    if (dec <= now && dec <= inc) {
      advance_alpha(dec);
      decrease(dec);
    } else if (inc <= now) {
      ++t_stage_;
      increase_deadline_ = inc + cfg_.rate_increase_timer;
      increase_event();
    } else {
      break;
    }
  }
  if (active_) advance_alpha(now);
}

Time Dcqcn::next_timer() const {
  const Time dec = cnp_pending_ ? decrease_deadline_ : Time::never();
  return std::min(dec, increase_deadline_);
}

Dcqcn::Phase Dcqcn::phase() const {
  if (!active_) return Phase::kLineRate;
  const uint32_t f = cfg_.stage_threshold;
  if (cfg_.byte_counter == 0) {
    // Timer only (Mellanox model): F fast-recovery stages, one additive, then hyper.
    if (t_stage_ <= f) return Phase::kFastRecovery;
    return t_stage_ == f + 1 ? Phase::kAdditive : Phase::kHyper;
  }
  // Paper Figure 5 / QCN: both counters below F: fast recovery; both above:
  // hyper; otherwise additive.
  if (std::max(t_stage_, bc_stage_) <= f) return Phase::kFastRecovery;
  if (std::min(t_stage_, bc_stage_) > f) return Phase::kHyper;
  return Phase::kAdditive;
}

}  // namespace sroce::cc
