// Traffic: what flows a workload is made of (source, destination, size, start
// time), independent of how they are carried (flows.h runs them as RC WRITEs
// on the real engine). No congestion control is involved here.
//
//  - incast N-to-1, permutation, all-to-all (uniform, or skewed toward a few
//    hot destinations as MoE dispatch is), all starting at once;
//  - open-loop Poisson arrivals per host with sizes from a flow-size CDF
//    (userspace/sim/data/flow-size-cdf, HPCC's traffic_gen tables: WebSearch,
//    FbHdp, AliStorage, GoogleRPC) at a load that is a fraction of the host
//    link rate.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sroce/engine/result.h"
#include "sroce/engine/types.h"
#include "sroce/sim/rng.h"

namespace sroce::sim {

struct FlowSpec {
  uint32_t src = 0;  // host index (the order of the topology's host list)
  uint32_t dst = 0;
  uint64_t bytes = 0;
  Time start;
};

// A piecewise-linear CDF of flow sizes: rows (size in bytes, CDF percent),
// from (0, 0) up to (max, 100), as HPCC's traffic_gen files are written. A
// size is drawn by picking u uniform in [0, 100) and interpolating between the
// two rows around it.
class FlowSizeCdf {
 public:
  // Reads "<size> <percent>" rows; the first must have percent 0 and the last
  // 100, both columns non-decreasing.
  static Result<FlowSizeCdf> load(const std::string& path);
  static Result<FlowSizeCdf> from_rows(std::vector<std::pair<double, double>> rows);
  // The named distributions: websearch, fbhdp, alistorage, googlerpc, looked up
  // in `dir` (default: default_dir()).
  static Result<FlowSizeCdf> named(const std::string& name, const std::string& dir = "");
  // $SROCE_FLOW_CDF_DIR, else the source tree's userspace/sim/data/flow-size-cdf when it
  // exists, else <prefix>/share/sroce/flow-size-cdf.
  static std::string default_dir();

  uint64_t sample(Rng& rng) const;  // at least 1 byte
  // Mean of the piecewise-linear distribution (what the load formula needs).
  double mean() const;
  uint64_t max() const { return static_cast<uint64_t>(rows_.back().first); }
  const std::vector<std::pair<double, double>>& rows() const { return rows_; }

 private:
  std::vector<std::pair<double, double>> rows_;
};

// Senders `srcs` each send `bytes` to `dst`, all at `start`.
std::vector<FlowSpec> incast_flows(const std::vector<uint32_t>& srcs, uint32_t dst, uint64_t bytes,
                                   Time start = Time{});
// Every host sends `bytes` to one other host and receives from one: a random
// derangement (no host sends to itself).
std::vector<FlowSpec> permutation_flows(uint32_t hosts, uint64_t bytes, Rng& rng,
                                        Time start = Time{});
// One step of a ring all-reduce (reduce-scatter or all-gather, as NCCL's
// ring runs them): host i sends `bytes` to host i+1 (mod hosts), all at once.
std::vector<FlowSpec> ring_flows(uint32_t hosts, uint64_t bytes, Time start = Time{});
// Every host sends to every other host; `bytes_per_src` is split over the
// destinations by weight. skew = 0: uniform. skew s > 0: destination j has
// weight 1/(1 + rank_j)^s with a random rank order per run (Zipf-like: with
// s = 1 and 16 hosts the hottest destination gets 5x the mean), which is the
// load imbalance of MoE dispatch toward popular experts. Senders start in a
// shifted order (host i sends to i+1, i+2, ... first) as NCCL-style all-to-all
// does; all flows start at `start`.
std::vector<FlowSpec> all_to_all_flows(uint32_t hosts, uint64_t bytes_per_src, double skew,
                                       Rng& rng, Time start = Time{});
// Open-loop Poisson arrivals on every host over [0, duration): exponential
// inter-arrival times with mean = mean_size * 8 / (link_bps * load) (HPCC's
// traffic_gen formula), a size from `cdf`, a uniform random other host as
// destination. Sorted by start time.
std::vector<FlowSpec> poisson_flows(uint32_t hosts, const FlowSizeCdf& cdf, double load,
                                    uint64_t link_bps, Duration duration, Rng& rng);

}  // namespace sroce::sim
