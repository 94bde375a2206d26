// Odin sender: HPCC's window law plus the three all-to-all refinements of
// docs/cc/odin.md (shared-buffer flag, NIC-level ratio, compensation).
#include "sroce/cc/odin.h"

#include <algorithm>

namespace sroce::cc {

Odin::Odin(const OdinConfig& cfg, const FlowParams& flow, NicState* nic)
    : cfg_(cfg),
      flow_(flow),
      nic_(cfg.nic_ratio ? nic : nullptr),
      est_(cfg.hpcc.eta),
      w_max_(bytes_in(static_cast<double>(flow.line_rate_bps), flow.base_rtt)),
      w_min_(bytes_in(static_cast<double>(cfg.hpcc.min_rate_bps), flow.base_rtt)),
      w_ai_(bytes_in(static_cast<double>(cfg.hpcc.ai_rate_bps ? cfg.hpcc.ai_rate_bps
                                                               : flow.line_rate_bps / 2500),
                     flow.base_rtt)),
      queue_floor_(cfg.hpcc.ignore_one_packet_queue ? flow.mtu_bytes : 0),
      w_(w_max_),
      wc_(w_max_) {
  if (cfg_.flag_min_qlen == 0) cfg_.flag_min_qlen = flow.mtu_bytes;
}

Odin::~Odin() {
  if (registered_) nic_->remove_flow(declared_bps_);
}

Odin::Odin(Odin&& o) noexcept
    : cfg_(o.cfg_),
      flow_(o.flow_),
      nic_(o.nic_),
      est_(o.est_),
      w_max_(o.w_max_),
      w_min_(o.w_min_),
      w_ai_(o.w_ai_),
      queue_floor_(o.queue_floor_),
      w_(o.w_),
      wc_(o.wc_),
      inc_stage_(o.inc_stage_),
      sent_new_(o.sent_new_),
      acked_(o.acked_),
      last_update_mark_(o.last_update_mark_),
      registered_(o.registered_),
      declared_bps_(o.declared_bps_),
      flag_episode_(o.flag_episode_),
      w_before_flag_(o.w_before_flag_),
      flagged_acks_(o.flagged_acks_),
      compensations_(o.compensations_) {
  o.registered_ = false;  // the NIC's demand moves with the flow
}

double Odin::nic_ratio() const { return nic_ ? nic_->ratio() : 1.0; }

double Odin::w_ai() const {
  // Part 2 (optional): the NIC's flows share one additive increase, so a
  // host with n active flows probes like one flow, not n.
  if (nic_ && cfg_.nic_share_ai && nic_->active_flows() > 1) return w_ai_ / nic_->active_flows();
  return w_ai_;
}

double Odin::nic_scale() const {
  const double ratio = nic_ratio();
  if (ratio >= 1.0 || !cfg_.nic_fair_floor || !registered_) return ratio;
  // The NIC's equal share C / n: a flow whose own rate is below it was held
  // there by its path (HPCC on its INT), not by the NIC; scaling it down by
  // the other flows' demand would leave its bottleneck (a hot receiver) idle.
  const double own = rate_of(w_, flow_.base_rtt);
  const double equal = static_cast<double>(nic_->line_rate_bps()) / nic_->active_flows();
  if (own <= 0) return ratio;
  return std::max(ratio, std::min(1.0, equal / own));
}

uint64_t Odin::rate_bps() const {
  return static_cast<uint64_t>(rate_of(w_ * nic_scale(), flow_.base_rtt));
}

uint64_t Odin::window_bytes() const {
  return static_cast<uint64_t>(w_ * std::min(1.0, nic_scale() * cfg_.nic_window_headroom));
}

void Odin::set_window(double w) {
  w_ = std::clamp(w, w_min_, w_max_);
  if (registered_) {
    const uint64_t d = demand();
    nic_->change_demand(declared_bps_, d);
    declared_bps_ = d;
  }
}

void Odin::on_send(const SendEvent& ev) {
  if (!ev.retransmit) sent_new_ += ev.bytes;
  if (nic_ && !registered_) {
    declared_bps_ = demand();
    nic_->add_flow(declared_bps_);
    registered_ = true;
  }
}

void Odin::on_idle(Time) {
  if (registered_) {
    nic_->remove_flow(declared_bps_);
    registered_ = false;
  }
}

void Odin::on_ack(const AckEvent& ev) {
  acked_ += ev.acked_bytes;
  const IntEstimator::Sample s = est_.observe(ev.hops, flow_.base_rtt, queue_floor_, cfg_.flag_min_qlen);
  if (!s.valid) {
    if (last_update_mark_ == 0) last_update_mark_ = sent_new_;
    return;
  }
  const bool update_wc = acked_ > last_update_mark_;
  const double eta = cfg_.hpcc.eta;
  const double u = std::max(est_.u(), 1e-9);
  const bool flagged = cfg_.buffer_flag && s.flag_queued;
  double w;
  if (flagged) {
    // Part 1. Per-port INT cannot see the shared pool: the port's own queue
    // may look modest while the pool, filled by all ports, nears the PFC or
    // drop thresholds. Aim lower (eta_flag < eta: the queue term of U must go
    // to zero, so this port gives back its part of the pool) and do not probe.
    ++flagged_acks_;
    if (!flag_episode_ && update_wc) {
      flag_episode_ = true;
      w_before_flag_ = wc_;
    }
    const double eta_flag = eta * (1.0 - cfg_.flag_decrease);
    w = u >= eta_flag ? wc_ / (u / eta_flag) : wc_;
    if (update_wc) inc_stage_ = 0;
  } else if (flag_episode_ && cfg_.compensation && update_wc) {
    // Part 3. The flag is gone. If the path is below target, the flag's cut
    // was deeper than the links needed: return to what the links allow, at
    // most the window held before the episode, in one step.
    if (u < eta) {
      w = std::min(w_before_flag_, wc_ * eta / u);
      w = std::max(w, wc_);
      ++compensations_;
    } else {
      w = wc_ / (u / eta) + w_ai();
    }
    inc_stage_ = 0;
    flag_episode_ = false;
  } else {
    if (!cfg_.compensation) flag_episode_ = false;
    // HPCC, Algorithm 1 (ComputeWind).
    if (u >= eta || inc_stage_ >= cfg_.hpcc.max_stage) {
      w = wc_ / (u / eta) + w_ai();
      if (update_wc) inc_stage_ = 0;
    } else {
      w = wc_ + w_ai();
      if (update_wc) ++inc_stage_;
    }
  }
  set_window(w);
  if (update_wc) {
    wc_ = w_;
    last_update_mark_ = sent_new_;
  }
}

void Odin::on_loss(const LossEvent& ev) {
  // As HPCC: INT carries the congestion; a timeout halves (ours).
  if (ev.kind == LossKind::kTimeout) {
    set_window(w_ / 2.0);
    wc_ = w_;
    inc_stage_ = 0;
  }
}

}  // namespace sroce::cc
