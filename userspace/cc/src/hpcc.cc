// HPCC sender (Li et al., SIGCOMM 2019, Algorithm 1). docs/cc/hpcc.md.
#include "sroce/cc/hpcc.h"

#include <algorithm>

namespace sroce::cc {

namespace {

// The ns-3 artifact's HPCC additive increase: 10 Mb/s per 25 Gb/s of line rate.
uint64_t default_ai_rate(uint64_t line_rate_bps) { return line_rate_bps / 2500; }

}  // namespace

Hpcc::Hpcc(const HpccConfig& cfg, const FlowParams& flow)
    : cfg_(cfg),
      flow_(flow),
      est_(cfg.eta),  // start neutral: U = eta gives W = Wc until INT says otherwise
      w_max_(bytes_in(static_cast<double>(flow.line_rate_bps), flow.base_rtt)),
      w_min_(bytes_in(static_cast<double>(cfg.min_rate_bps), flow.base_rtt)),
      w_ai_(bytes_in(static_cast<double>(cfg.ai_rate_bps ? cfg.ai_rate_bps
                                                          : default_ai_rate(flow.line_rate_bps)),
                     flow.base_rtt)),
      queue_floor_(cfg.ignore_one_packet_queue ? flow.mtu_bytes : 0),
      w_(w_max_),   // HPCC starts at line rate: W_init = B_NIC x T (section 3.3)
      wc_(w_max_) {}

void Hpcc::on_send(const SendEvent& ev) {
  if (!ev.retransmit) sent_new_ += ev.bytes;
}

void Hpcc::on_ack(const AckEvent& ev) {
  acked_ += ev.acked_bytes;
  const IntEstimator::Sample s = est_.observe(ev.hops, flow_.base_rtt, queue_floor_);
  if (!s.valid) {
    // First ACK of the path: records stored, nothing to measure yet. The
    // first RTT starts here (ns-3 artifact: lastUpdateSeq = snd_nxt).
    if (last_update_mark_ == 0) last_update_mark_ = sent_new_;
    return;
  }
  // A new RTT's worth of feedback: this ACK covers data sent after the last
  // reference update.
  const bool update_wc = acked_ > last_update_mark_;
  const double u = std::max(est_.u(), 1e-9);
  double w;
  if (u >= cfg_.eta || inc_stage_ >= cfg_.max_stage) {
    w = wc_ / (u / cfg_.eta) + w_ai_;
    if (update_wc) inc_stage_ = 0;
  } else {
    w = wc_ + w_ai_;
    if (update_wc) ++inc_stage_;
  }
  w_ = std::clamp(w, w_min_, w_max_);
  if (update_wc) {
    wc_ = w_;
    last_update_mark_ = sent_new_;
    ++updates_;
  }
}

void Hpcc::on_loss(const LossEvent& ev) {
  // HPCC has no loss reaction: the queue that caused a loss (or a trim) is in
  // the INT records already. A retransmission timeout means feedback stopped
  // altogether; halve (ours) so a flow whose ACKs vanished does not keep a
  // full window.
  if (ev.kind == LossKind::kTimeout) {
    w_ = std::max(w_min_, w_ / 2.0);
    wc_ = w_;
    inc_stage_ = 0;
  }
}

}  // namespace sroce::cc
