// Flow metrics: ideal flow completion time on an idle fabric, slowdown, and
// percentile summaries overall and by flow size.
//
// Ideal FCT of S bytes from a to b (what the transfer would take alone): with
// the path's links i = 1..h (rate r_i, delay d_i, r_min the slowest), the flow's
// W wire bytes (every packet's payload plus Ethernet/IP/UDP/BTH/ICRC/FCS,
// preamble and IFG, plus a RETH on the first packet of each WRITE) and its
// last packet of w_last wire bytes, and an ACK of w_ack wire bytes:
//
//   ideal = W / r_min                      the bytes through the bottleneck
//         + sum_i w_last / r_i - w_last / r_min   store-and-forward of the last packet
//         + sum_i d_i                      propagation of the last packet
//         + sum_i (d_i + w_ack / r_i)      the ACK back (reverse path, same links)
//
// FCT is measured to the sender's completion, which needs that ACK, so the
// ideal includes it. slowdown = FCT / ideal (1 on an idle fabric, up to the
// engine's per-packet processing, which takes no simulated time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sroce/sim/flows.h"
#include "sroce/sim/network.h"

namespace sroce::sim {

Duration ideal_fct(const std::vector<const Link*>& path, uint64_t bytes, uint32_t mtu_payload,
                   uint32_t chunk_bytes);

// p in [0, 1]: nearest-rank percentile of `v` (sorted in place); 0 if empty.
double percentile(std::vector<double>& v, double p);

struct Dist {
  uint64_t count = 0;
  double p50 = 0, p95 = 0, p99 = 0, mean = 0, max = 0;
};
Dist summarize(std::vector<double> v);

struct SizeBucket {
  std::string name;    // "<=10KB"
  uint64_t max_bytes;  // upper bound (inclusive)
  Dist slowdown;
  Dist fct_us;
};

struct FctReport {
  uint64_t flows = 0;
  uint64_t completed = 0;
  Dist slowdown;
  Dist fct_us;
  std::vector<SizeBucket> buckets;  // by flow size: 10 KB, 100 KB, 1 MB, 10 MB, more
};

// Over the completed flows; `ideal[i]` is flow i's ideal FCT.
FctReport fct_report(const std::vector<FlowRecord>& flows, const std::vector<Duration>& ideal);

}  // namespace sroce::sim
