// HPCC's inflight/utilisation estimate from INT records (Li et al., SIGCOMM
// 2019, Algorithm 1, MeasureInflight), shared by HPCC and Odin.
//
// For every hop j of the path, from this ACK's record and the previous one:
//   txRate_j = (txBytes_j - txBytes'_j) / (ts_j - ts'_j)
//   u_j      = min(qLen_j, qLen'_j) / (B_j * T) + txRate_j / B_j
// The most utilised hop (largest u_j) is the bottleneck; U is an EWMA of it
// over one base RTT T, weighted by the time tau its sample covers:
//   U = (1 - tau/T) U + (tau/T) u_max,   tau = min(ts_j - ts'_j, T).
// A hop whose port_id changed (the path moved: rerouting, another lane) only
// refreshes its record; it gives a sample from the next ACK on.
#pragma once

#include <cstdint>
#include <span>

#include "sroce/cc/types.h"

namespace sroce::cc {

class IntEstimator {
 public:
  struct Sample {
    bool valid = false;        // at least one hop gave a utilisation sample
    double u_max = 0.0;        // largest per-hop u_j of this ACK
    int bottleneck = -1;       // its hop index
    Duration tau;              // time covered by that sample
    // Odin: a hop raised the shared-buffer flag while this flow's port held
    // at least the given queue (see observe()).
    bool flag_any = false;     // any hop carried the flag
    bool flag_queued = false;  // ... at a port holding >= flag_min_qlen bytes
  };

  explicit IntEstimator(double initial_u) : u_(initial_u) {}

  // Feeds the records of one ACK. `base_rtt` is T. Hops beyond kMaxHops are
  // ignored (their records cannot be kept).
  // `queue_floor` bytes of every queue sample are ignored (see hpcc.md,
  // "Deviations": a queue of one packet is service, not congestion).
  Sample observe(std::span<const IntHop> hops, Duration base_rtt, uint32_t queue_floor,
                 uint32_t flag_min_qlen = 0);

  double u() const { return u_; }           // the EWMA U
  int hops() const { return nhops_; }
  void reset_path() { nhops_ = 0; }         // forget all records (next ACK starts over)

 private:
  IntHop prev_[kMaxHops] = {};
  int nhops_ = 0;                           // records held in prev_
  double u_;
};

}  // namespace sroce::cc
