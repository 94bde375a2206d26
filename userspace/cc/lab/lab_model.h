// A tiny deterministic packet model of one switch, for the congestion-control
// unit tests and cc-lab (docs/cc/README.md, "The lab model"). It is not the
// simulator (userspace/sim hosts the real engine); it exists so that each
// algorithm can be judged on its own, before and independently of the
// engine/simulator integration.
//
//   host h --(NIC uplink, host_rate, link_delay)--> switch --(port p, port_rate,
//   link_delay)--> receiver p;  ACKs and CNPs return after 2 x link_delay
//   without queueing (a separate high-priority path, as HPCC and DCQCN assume).
//
// * Each host's NIC serialises its flows' packets round robin among the flows
//   that are allowed to send (window open, pacing time reached).
// * Each switch egress port is a FIFO; all ports share one buffer pool. The
//   model is lossless: with `pfc`, when the pool rises above xoff_bytes the
//   switch pauses every host NIC (a crude switch-wide PFC: a NIC finishes the
//   packet it is sending, then waits) until the pool falls to
//   xoff_bytes - 2 packets. Without `pfc` the pool is unbounded and only the
//   crossings of xoff_bytes are counted.
// * Packets get a small random delay on the host link (LabConfig::jitter).
// * At dequeue: RED/ECN marking on the port queue left behind (Kmin, Kmax,
//   Pmax; from a seeded generator), and one INT record (ts, txBytes, qlen, B,
//   shared-buffer flag = pool above flag_bytes).
// * The receiver ACKs every packet (ECN echo, INT record) and, for DCQCN
//   flows, runs the notification point (cc.dcqcn: interval, coalescing).
// Everything is integer picoseconds and one seed: a run is a pure function of
// its inputs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sroce/cc/cc.h"

namespace sroce::cc::lab {

struct LabConfig {
  int hosts = 2;
  int ports = 1;                       // receivers; flow.dst selects the port
  uint64_t host_rate_bps = 100'000'000'000;
  uint64_t port_rate_bps = 100'000'000'000;
  Duration link_delay = Duration::micros(2);  // each hop; base RTT = 4 x this + serialisations
  uint32_t mtu = 4096;                 // payload bytes per full packet
  uint32_t overhead = 82;              // Eth+IP+UDP+BTH+ICRC+FCS+preamble/IFG bytes per packet
  // Uniform random extra delay of each packet on its host->switch link, at
  // most one full packet's serialisation at host_rate (so a flow's packets
  // never reorder). Without it, perfectly periodic senders phase-lock at the
  // switch: one flow's packets always find the other's in the queue and see
  // a systematically longer queue, which real NIC/DMA jitter prevents.
  bool jitter = true;
  // ECN at the switch (RED on the egress queue, bytes). Defaults: the DCQCN
  // paper's 5 KB / 200 KB / 1 % at 40G scaled by 2.5 to 100G.
  bool ecn = true;
  uint64_t kmin = 12'500;
  uint64_t kmax = 500'000;
  double pmax = 0.2;
  bool int_enabled = true;
  uint64_t flag_bytes = 1'000'000;     // shared-buffer flag above this pool occupancy
  bool pfc = true;
  uint64_t xoff_bytes = 2'000'000;     // PFC XOFF level of the pool
  Time end = Time::zero() + Duration::millis(5);
  Duration bin = Duration::micros(10); // throughput timeline resolution
  uint64_t seed = 1;
  CcConfig cc;
};

struct LabFlowSpec {
  int src = 0;                         // sending host
  int dst = 0;                         // switch port (receiver)
  Time start = Time::zero();
  uint64_t bytes = 0;                  // 0 = send until the end
};

struct LabFlowResult {
  LabFlowSpec spec;
  uint64_t delivered = 0;              // payload bytes that reached the receiver
  Time finish = Time::never();         // last ACK of a finite flow
  Duration ideal;                      // finite flows: base RTT + bytes at line rate
  std::vector<uint64_t> bins;          // payload bytes delivered per bin
};

struct LabResult {
  std::vector<LabFlowResult> flows;
  std::vector<uint32_t> queue_samples;  // port queue (bytes) seen by each arriving packet
  std::vector<uint32_t> pool_samples;   // shared pool (bytes) seen by each arriving packet
  std::vector<std::vector<uint64_t>> port_bins;  // wire bytes sent per port per bin
  uint64_t max_pool = 0;
  uint64_t xoff_crossings = 0;         // pauses (pfc) or upward crossings of xoff_bytes
  Duration paused;                     // total time the hosts were paused
  uint64_t cnps = 0;
  uint64_t marks = 0;
  uint64_t events = 0;
  Duration base_rtt;
};

// Runs the model until cfg.end (or until no event is left).
LabResult run_lab(const LabConfig& cfg, std::span<const LabFlowSpec> flows);

// --- metrics ---------------------------------------------------------------

// p-th percentile (0..100) of samples; 0 for none.
uint64_t percentile(std::vector<uint32_t> samples, double p);

// Jain's index of the flows' delivered bytes in [from, to): 1 = equal shares.
double jain(const LabResult& r, const LabConfig& cfg, Time from, Time to,
            std::span<const int> flow_ids = {});

// Payload rate (bit/s) of one flow over [from, to).
double flow_rate(const LabResult& r, const LabConfig& cfg, int flow, Time from, Time to);

// Fraction of the port's capacity used in [from, to) (wire bytes).
double utilisation(const LabResult& r, const LabConfig& cfg, int port, Time from, Time to);

// Convergence: the earliest time t >= from such that every window of length
// `window` starting at t or later (in steps of cfg.bin, up to the end) has
// Jain's index >= min_jain over the listed flows and carries at least
// min_util x capacity_bps in total. Returns t - from, or a negative duration
// if the last window fails.
Duration convergence_time(const LabResult& r, const LabConfig& cfg, std::span<const int> flow_ids,
                          double capacity_bps, Time from, Duration window, double min_jain,
                          double min_util);

// All-to-all among `hosts` hosts (hosts = ports): host s sends `bytes` to
// every other host (receiver 0 gets skew x bytes), serving its peers in the
// shifted order s+1, s+2, ... (mod n) as collective libraries do. Host s
// starts at a time drawn from `seed` in [0, spread) (compute skew).
std::vector<LabFlowSpec> alltoall_flows(int hosts, uint64_t bytes, double skew, Duration spread,
                                        uint64_t seed);

// Flow completion of finite flows: slowdown = FCT / ideal (LabFlowResult::ideal).
struct FctStats {
  size_t finished = 0;
  size_t unfinished = 0;
  Time last_finish = Time::zero();
  double p50_slowdown = 0;
  double p99_slowdown = 0;
};
FctStats fct_stats(const LabResult& r);

}  // namespace sroce::cc::lab
