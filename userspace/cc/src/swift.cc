// Delay-based sender after Swift (Kumar et al., SIGCOMM 2020, Algorithm 1).
// docs/cc/delay.md.
#include "sroce/cc/swift.h"

#include <algorithm>
#include <cmath>

namespace sroce::cc {

Swift::Swift(const SwiftConfig& cfg, const FlowParams& flow)
    : cfg_(cfg), flow_(flow), srtt_ps_(static_cast<double>(flow.base_rtt.ps)) {
  const double bdp_pkts =
      bytes_in(static_cast<double>(flow.line_rate_bps), flow.base_rtt) / flow.mtu_bytes;
  max_cwnd_ = cfg.max_cwnd > 0 ? cfg.max_cwnd : std::max(2.0 * bdp_pkts, 2.0);
  // Start at one BDP, like HPCC's line-rate start (Swift leaves the initial
  // window to the deployment).
  cwnd_ = std::clamp(bdp_pkts, cfg_.min_cwnd, max_cwnd_);
}

Duration Swift::target_delay(int hops) const {
  const Duration base = cfg_.base_target.ps > 0 ? cfg_.base_target
                                                : flow_.base_rtt + cfg_.base_queue_allowance;
  // Rate scaling of the per-hop term: the same queue drains faster on a
  // faster link, so the delay it may add is smaller.
  const Duration per_hop = tx_time(cfg_.per_hop_bytes, static_cast<double>(flow_.line_rate_bps));
  // Flow scaling: alpha / sqrt(cwnd) + beta, clamped to [0, fs_range], with
  // alpha and beta such that it is fs_range at fs_min_cwnd and 0 at fs_max_cwnd.
  const double inv_min = 1.0 / std::sqrt(cfg_.fs_min_cwnd);
  const double inv_max = 1.0 / std::sqrt(cfg_.fs_max_cwnd);
  const double range = static_cast<double>(cfg_.fs_range.ps);
  const double a = range / (inv_min - inv_max);
  const double b = -a * inv_max;
  const double fs = std::clamp(a / std::sqrt(std::max(cwnd_, 1e-6)) + b, 0.0, range);
  return base + per_hop * hops + Duration::picos(static_cast<int64_t>(fs));
}

void Swift::set_cwnd_packets(double c) { cwnd_ = std::clamp(c, cfg_.min_cwnd, max_cwnd_); }

bool Swift::can_decrease(Time now) const {
  // At most one decrease per RTT (Swift: now - t_last_decrease >= rtt).
  return !decreased_any_ || (now - last_decrease_).ps >= static_cast<int64_t>(srtt_ps_);
}

void Swift::cut(Time now, double factor) {
  cwnd_ = std::max(cfg_.min_cwnd, cwnd_ * factor);
  last_decrease_ = now;
  decreased_any_ = true;
  ++decreases_;
}

void Swift::on_ack(const AckEvent& ev) {
  if (!ev.hops.empty()) {
    hops_ = static_cast<int>(ev.hops.size());
  } else if (ev.path_hops > 0) {
    hops_ = ev.path_hops;
  }
  if (ev.rtt.ps <= 0) return;
  const double rtt = static_cast<double>(ev.rtt.ps);
  srtt_ps_ = (1.0 - cfg_.srtt_gain) * srtt_ps_ + cfg_.srtt_gain * rtt;
  const double acked_pkts = static_cast<double>(ev.acked_bytes) / flow_.mtu_bytes;
  const double target = static_cast<double>(target_delay(hops_).ps);
  if (rtt < target) {
    if (cwnd_ >= 1.0) {
      cwnd_ += cfg_.ai * acked_pkts / cwnd_;
    } else {
      cwnd_ += cfg_.ai * acked_pkts;
    }
    cwnd_ = std::min(cwnd_, max_cwnd_);
  } else if (can_decrease(ev.now)) {
    const double factor = std::max(1.0 - cfg_.beta * (rtt - target) / rtt, 1.0 - cfg_.max_mdf);
    cut(ev.now, factor);
  }
}

void Swift::on_loss(const LossEvent& ev) {
  // Swift: retransmission (fast recovery or timeout) cuts by max_mdf. A trim
  // is the same signal without the wait: the queue overflowed.
  if (can_decrease(ev.now)) cut(ev.now, 1.0 - cfg_.max_mdf);
}

uint64_t Swift::window_bytes() const {
  return static_cast<uint64_t>(std::max(cwnd_, 1.0) * flow_.mtu_bytes);
}

uint64_t Swift::rate_bps() const {
  if (cwnd_ >= 1.0) return flow_.line_rate_bps;
  // Below one packet: one packet per rtt / cwnd (Swift, section 3.3,
  // pacing), with rtt the smaller of the smoothed RTT and the target delay
  // (ours; delay.md, "The window floor"). The window already shrank for the
  // queueing delay above the target; spacing by the inflated RTT as well
  // would charge it twice, and at the floor (0.001 packet) a flow behind a
  // millisecond of queue would wait a second for its next packet, the only
  // one that can tell it the queue has drained. Pacing at the target cannot
  // overload the path: below one packet the window still allows one packet
  // in flight, so a flow never sends faster than one packet per RTT.
  const double rtt =
      cfg_.pace_at_target ? std::min(srtt_ps_, static_cast<double>(target_delay(hops_).ps)) : srtt_ps_;
  const double r = cwnd_ * flow_.mtu_bytes * 8.0 * kPsPerSecond / rtt;
  return std::max<uint64_t>(1, static_cast<uint64_t>(r));
}

}  // namespace sroce::cc
