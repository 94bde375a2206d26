// ltp-train's packet-level environments (docs/cc/ltp.md, "Fine-tuning in the
// packet simulator"): one N-to-1 incast in the simulator (the real engines,
// leaf-spine, PFC, ECN) run in-process with the weights being trained, and
// the episode reward computed from what cc_eval measured. The distribution
// is continuous (rate, link delay, fan-in, size, stagger drawn per seed), so
// the fixed environments of `sroce-sim run ltp-eval` are not among the draws.
#pragma once

#include <cstdint>
#include <string>

#include "sroce/cc/ltp.h"

namespace ltp_train {

struct PacketEnv {
  uint64_t gbps = 100;
  uint64_t delay_ns = 1000;   // per link: base RTT about 8 x
  uint64_t fanin = 4;
  uint64_t kb = 1024;         // per flow
  uint64_t stagger_us = 0;    // flow i starts at i x stagger
  uint64_t seed = 1;
  std::string describe() const;
};

// C 10-400 Gb/s log-uniform, link delay 250 ns-8 us (base RTT 2-64 us; one
// in eight 8-40 us: 64-320 us), 2-32 flows, a transfer of 150-400 base RTTs
// at the bottleneck (2-48 MiB in all), a third staggered by 1-8 base RTTs.
PacketEnv draw_packet_env(uint64_t seed);

struct PacketResult {
  double reward = 0;          // extrinsic + lambda x intrinsic
  double util = 0, qdelay_rtt = 0, jain = 0, info_gain = 0;
  bool ok = false;
};

// One episode with `net` (variant v's inputs); lambda weights the filter's
// mean information gain per MI.
PacketResult run_packet_env(const PacketEnv& e, const sroce::cc::LtpNet& net, sroce::cc::LtpVariant v,
                            double lambda);

}  // namespace ltp_train
