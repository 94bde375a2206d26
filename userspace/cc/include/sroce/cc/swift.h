// Delay-based control after Swift (Kumar et al., "Swift: Delay is Simple and
// Effective for Congestion Control in the Datacenter", SIGCOMM 2020), for
// fabrics without INT or ECN: the RTT is the only signal, which is what the
// namespace fabric (veth + Linux routers) can give. docs/cc/delay.md.
//
//   target = base_target + hops * per_hop + flow_scaling(cwnd)
//   per_hop = per_hop_bytes * 8 / line_rate      (rate scaling)
//   delay <  target: cwnd += ai * acked / cwnd   (cwnd >= 1 packet; else ai * acked)
//   delay >= target: cwnd *= max(1 - beta (delay - target) / delay, 1 - max_mdf),
//                    at most once per RTT
//   loss / trim / timeout: cwnd *= 1 - max_mdf, at most once per RTT
// The window is kept in packets (fractional). Below one packet the flow sends
// one packet every RTT / cwnd (pacing); at or above it Swift is ACK-clocked
// and rate_bps() is the line rate.
#pragma once

#include <cstdint>

#include "sroce/cc/types.h"

namespace sroce::cc {

struct SwiftConfig {
  // Fabric delay target without hops or flow scaling, on top of the base RTT
  // (0 = FlowParams::base_rtt + base_queue_allowance).
  Duration base_target = Duration::picos(0);
  Duration base_queue_allowance = Duration::micros(2);  // ours: ~25 KB at 100G
  // Per-hop allowance as queue bytes at line rate (rate scaling): at 100G,
  // 10 KB per hop is 0.8 us (ours; Swift scales by hop count, section 3.4).
  uint32_t per_hop_bytes = 10'000;
  // Flow-count scaling (Swift section 3.5): up to fs_range more target for
  // small windows (many flows share the bottleneck, each with a small cwnd),
  // interpolated on 1/sqrt(cwnd) between fs_max_cwnd and fs_min_cwnd.
  Duration fs_range = Duration::micros(10);
  double fs_min_cwnd = 0.1;         // packets
  double fs_max_cwnd = 100.0;       // packets
  double ai = 1.0;                  // packets per RTT (additive increase)
  double beta = 0.8;                // multiplicative decrease gain (Swift)
  double max_mdf = 0.5;             // largest cut per RTT (Swift)
  double min_cwnd = 0.001;          // packets (Swift allows cwnd down to 0.001)
  double max_cwnd = 0.0;            // packets; 0 = 2 x BDP of the line rate and base RTT
  double srtt_gain = 0.125;         // EWMA gain of the smoothed RTT (pacing)
  // Below one packet, pace at cwnd per min(srtt, target) (true, ours) or per
  // srtt (false, the first version; delay.md, "The window floor").
  bool pace_at_target = true;
};

class Swift {
 public:
  Swift(const SwiftConfig& cfg, const FlowParams& flow);

  void on_send(const SendEvent&) {}
  void on_ack(const AckEvent& ev);
  void on_cnp(Time) {}
  void on_loss(const LossEvent& ev);
  void on_timer(Time) {}
  void on_idle(Time) {}
  Time next_timer() const { return Time::never(); }

  uint64_t rate_bps() const;
  uint64_t window_bytes() const;

  // Introspection.
  double cwnd_packets() const { return cwnd_; }
  // Set the window (LTP hands its rate over when it falls back to this rule).
  void set_cwnd_packets(double c);
  Duration target_delay(int hops) const;
  Duration srtt() const { return Duration::picos(static_cast<int64_t>(srtt_ps_)); }
  uint64_t decreases() const { return decreases_; }

 private:
  bool can_decrease(Time now) const;
  void cut(Time now, double factor);

  SwiftConfig cfg_;
  FlowParams flow_;
  double cwnd_;                 // packets
  double max_cwnd_;
  double srtt_ps_;
  int hops_ = 0;                // last known hop count
  Time last_decrease_ = Time::zero();
  bool decreased_any_ = false;
  uint64_t decreases_ = 0;
};

}  // namespace sroce::cc
