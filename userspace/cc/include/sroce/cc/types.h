// Events and parameters shared by every congestion-control algorithm.
//
// The algorithms are sans-I/O like the engine (DESIGN.md, "The engine is
// sans-I/O"): they never read a clock, allocate or touch a packet. Every input
// is an event carrying its own time (sroce::Time, integer picoseconds); every
// output is a query (pacing rate, window, next timer). The engine's requester
// (per QP, or per lane where lanes exist) and the simulator's host driver feed
// them; docs/cc/README.md, "Integration", says exactly who calls what.
#pragma once

#include <cstdint>
#include <limits>
#include <span>

#include "sroce/engine/types.h"

namespace sroce::cc {

// Most INT hops a flow's path may have. A 3-tier fat-tree path has 5 switch
// hops; 8 leaves room and keeps per-flow state a fixed size.
inline constexpr int kMaxHops = 8;

// "No window limit": the algorithm is rate-only (DCQCN).
inline constexpr uint64_t kNoWindow = std::numeric_limits<uint64_t>::max();

// One in-band network telemetry record, as stamped by a switch egress port
// when the data packet left it (HPCC, Li et al. SIGCOMM 2019, section 3.2 and
// Figure 6: timestamp, txBytes, qLen, B), decoded by the receiver side and
// carried back to the sender on the ACK. Decoders widen the wire's truncated
// counters so that `ts` and `tx_bytes` are monotonic per (switch, port).
struct IntHop {
  uint32_t port_id = 0;       // identity of (switch, egress port): a change means a new path
  Time ts;                    // when the packet left this egress port
  uint64_t tx_bytes = 0;      // bytes this port has transmitted so far (cumulative)
  uint32_t qlen_bytes = 0;    // egress queue length at that moment
  uint64_t link_bps = 0;      // egress link rate B
  bool buffer_flag = false;   // the switch's shared buffer is above its threshold (Odin)
};

// A packet of this flow was handed to the wire (by the datapath, after pacing).
struct SendEvent {
  Time now;
  uint32_t bytes = 0;         // payload bytes
  bool retransmit = false;    // not new data (go-back-N, selective repeat, trim repair)
};

// An acknowledgement advanced the flow.
struct AckEvent {
  Time now;
  uint64_t acked_bytes = 0;   // newly acknowledged payload bytes (0 for a duplicate)
  Duration rtt;               // RTT sample for the acknowledged packet; 0 if none
  bool ecn_echo = false;      // the receiver saw CE on the acknowledged data
  std::span<const IntHop> hops;  // INT records of the forward path, first hop first
  // Switch hops of the path when there is no INT (Swift's hop scaling): from
  // the TTL / hop limit of the received ACK, 64 - ttl on symmetric paths. 0 =
  // unknown.
  uint8_t path_hops = 0;
};

enum class LossKind : uint8_t {
  kNak,       // a gap reported by the receiver (NAK sequence error, SACK hole)
  kTrim,      // the fabric trimmed a packet to its header (lossy mode, DCP)
  kTimeout,   // the retransmission timer fired
};

struct LossEvent {
  Time now;
  LossKind kind = LossKind::kNak;
  uint32_t bytes = 0;         // payload bytes declared lost
};

// What an algorithm needs to know about the flow it controls.
struct FlowParams {
  uint64_t line_rate_bps = 100'000'000'000;  // NIC port rate: the flow's maximum rate
  Duration base_rtt = Duration::micros(8);   // unloaded RTT of the path (HPCC's T)
  uint32_t mtu_bytes = 4096;                 // payload bytes of a full packet
};

// Helpers on rates, windows and time. Rates are bit/s; windows are bytes.
inline constexpr double kPsPerSecond = 1e12;

// Bytes that `rate_bps` moves in `d`.
inline constexpr double bytes_in(double rate_bps, Duration d) {
  return rate_bps * static_cast<double>(d.ps) / (8.0 * kPsPerSecond);
}
// Rate that moves `bytes` in `d` (d > 0).
inline constexpr double rate_of(double bytes, Duration d) {
  return bytes * 8.0 * kPsPerSecond / static_cast<double>(d.ps);
}
// Serialization time of `bytes` at `rate_bps` (rate > 0), rounded up.
inline constexpr Duration tx_time(double bytes, double rate_bps) {
  const double ps = bytes * 8.0 * kPsPerSecond / rate_bps;
  const auto whole = static_cast<int64_t>(ps);
  return Duration::picos(static_cast<double>(whole) < ps ? whole + 1 : whole);
}

}  // namespace sroce::cc
