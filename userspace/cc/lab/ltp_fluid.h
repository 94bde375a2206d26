// A fluid single-bottleneck model for training and gating LTP (docs/cc/ltp.md,
// "Training"). Not the simulator: one FIFO bottleneck of rate C with a buffer,
// N flows running LtpCore (the controller's per-MI code), unresponsive cross
// traffic, RED-style ECN, random and burst loss; one step = one RTT (base RTT
// plus the queue). The packet-level evaluation is `sroce-sim run ltp-eval`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sroce/cc/ltp.h"

namespace sroce::cc::lab {

struct FluidEnv {
  double line_gbps = 100;    // each flow's NIC rate
  double cap_gbps = 100;     // bottleneck rate C
  double rtt_us = 10;        // true base RTT
  double nominal = 1.0;      // configured base RTT / true one (what FlowParams says)
  int flows = 1;
  int stagger = 0;           // flow i starts at step i * stagger
  // Departures (finite transfers, as an incast's flows that finish one by
  // one): flow i stops at step leave[i] (empty, or -1: it never does).
  std::vector<int> leave;
  double cross = 0;          // unresponsive load while on (fraction of C)
  int cross_on = -1;         // step it turns on (-1: never)
  int cross_off = -1;        // step it turns off
  double buffer_bytes = 1e6;
  double ecn_k_bytes = 0;    // 0: no ECN
  double loss_p = 0;         // random loss per byte
  double burst_p = 0;        // per step: a loss burst (30 % for 2 steps) starts
  int steps = 160;
  uint64_t seed = 1;
  std::string describe() const;
};

// The training distribution (issue 17): C 10-400 Gb/s, RTT 2-200 us (a
// fifth from the long-RTT family, 1-50 ms), 1-64 flows, random and burst
// loss, on/off cross traffic, and in half the episodes flows that leave
// (the capacity they free must be found). `seed` draws one environment.
FluidEnv draw_fluid_env(uint64_t seed);

struct FluidWeights {
  double intrinsic = 0;      // lambda of the intrinsic (information gain) reward
  double queue = 1.0;        // weight of the queueing-delay term (per base RTT of queue)
};

struct FluidResult {
  double reward = 0;         // extrinsic + lambda x intrinsic, per flow-step
  double extrinsic = 0;
  double intrinsic = 0;      // mean info gain per flow-step, nats
  double util = 0;           // delivered / (C - cross) over the second half
  double qdelay_p99_us = 0;  // p99 over steps of the second half
  double jain = 0;           // among the flows over the last quarter
  double loss = 0;           // dropped at the buffer / sent
  double est_err = 0;        // mean |log2(c_hat / fair share)| after each flow's 10th MI
  double converge_steps = -1; // after the last start: first step from which Jain >= 0.9 and util >= 0.8 hold
};

// Runs the flows with LTP of `variant` and `net`; null net: the delay rule
// is not modelled here, the flows then hold the line rate (a reference).
FluidResult run_fluid(const FluidEnv& env, const LtpNet* net, LtpVariant variant,
                      const FluidWeights& w);

}  // namespace sroce::cc::lab
