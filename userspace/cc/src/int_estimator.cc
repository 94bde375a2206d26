#include "sroce/cc/int_estimator.h"

#include <algorithm>

namespace sroce::cc {

IntEstimator::Sample IntEstimator::observe(std::span<const IntHop> hops, Duration base_rtt,
                                           uint32_t queue_floor, uint32_t flag_min_qlen) {
  Sample s;
  const int n = static_cast<int>(std::min<size_t>(hops.size(), kMaxHops));
  const double t_sec = static_cast<double>(base_rtt.ps) / kPsPerSecond;
  for (int j = 0; j < n; ++j) {
    const IntHop& cur = hops[j];
    if (cur.buffer_flag) {
      s.flag_any = true;
      if (cur.qlen_bytes >= flag_min_qlen) s.flag_queued = true;
    }
    if (j >= nhops_ || prev_[j].port_id != cur.port_id || cur.link_bps == 0) continue;
    const IntHop& old = prev_[j];
    const Duration dt = cur.ts - old.ts;
    // Same or older record (ACKs of one burst can carry one stamp; reordering
    // across lanes can deliver an older one): nothing to measure.
    if (dt.ps <= 0 || cur.tx_bytes < old.tx_bytes) continue;
    const double b = static_cast<double>(cur.link_bps);
    const double tx_rate = rate_of(static_cast<double>(cur.tx_bytes - old.tx_bytes), dt);
    const uint32_t q = std::min(cur.qlen_bytes, old.qlen_bytes);
    const double qlen = static_cast<double>(q > queue_floor ? q - queue_floor : 0);
    const double u = qlen * 8.0 / (b * t_sec) + tx_rate / b;
    if (!s.valid || u > s.u_max) {
      s.valid = true;
      s.u_max = u;
      s.bottleneck = j;
      s.tau = dt;
    }
  }
  // Keep this ACK's records only if they are newer (an older one would make
  // the next interval wrong); a changed path replaces the record.
  for (int j = 0; j < n; ++j) {
    if (j >= nhops_ || prev_[j].port_id != hops[j].port_id || hops[j].ts > prev_[j].ts)
      prev_[j] = hops[j];
  }
  nhops_ = n;
  if (s.valid) {
    const double tau = static_cast<double>(std::min(s.tau.ps, base_rtt.ps));
    const double w = tau / static_cast<double>(base_rtt.ps);
    u_ = (1.0 - w) * u_ + w * s.u_max;
  }
  return s;
}

}  // namespace sroce::cc
