// The datapath interface: what the daemon loop needs from a packet backend.
//
// Narrow on purpose (eRPC's transport, DPDK's burst functions): the UDP
// backend here and the DPDK backend later implement only moving RoCEv2 UDP
// payloads in and out in bursts. Nothing protocol-related lives in a backend:
// it never parses a BTH, never computes an ICRC, never decides a lane; the
// engine does all of that and hands over finished UDP payloads plus their
// addressing (PacketMeta). Calls are per burst, so one virtual call is spread
// over many packets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "sroce/engine/engine.h"

namespace sroce::daemon {

struct RxPacket {
  std::span<const std::byte> payload;  // BTH .. ICRC, valid until the next rx_burst
  PacketMeta meta;
};

struct DatapathStats {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t rx_batches = 0;      // receive completions (one GRO batch each)
  uint64_t rx_errors = 0;       // failed receives, truncated datagrams
  uint64_t rx_dropped = 0;      // datagrams without usable addressing
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_sends = 0;        // send calls (one GSO batch each)
  uint64_t tx_errors = 0;       // packets whose send failed
  uint64_t tx_full = 0;         // times the engine was held back for lack of tx buffers
  uint64_t tx_port_errors = 0;  // lane ports that could not be bound (sent from the rx port)
  uint64_t tx_port_evictions = 0;  // lane sockets closed, least recently used first, for new lanes
};

// The IPv6 flow label a packet gets when its address vector says 0: a 20-bit hash of the
// BTH's destination QP and the lane's source port, never 0 (both datapaths; the reasons in
// udp_datapath.cc and docs/sroced.md).
inline uint32_t derive_flow_label(uint32_t dqpn, uint16_t sport) {
  const uint64_t v = ((uint64_t{dqpn & 0xffffff} << 16) | sport) * 0x9e3779b97f4a7c15ull;
  const uint32_t label = static_cast<uint32_t>(v >> 44) & 0xfffff;
  return label != 0 ? label : 1;
}

// Counters of one lane source port as the datapath saw it.
struct PortStats {
  uint16_t port = 0;
  Gid local{};  // the lane's source address (IPv4-mapped for IPv4)
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_sends = 0;
};

class Datapath {
 public:
  virtual ~Datapath() = default;

  // Receives up to out.size() packets without blocking. The payload views
  // stay valid until the next call; the buffers they used are handed back to
  // the kernel by the next tx_flush() or poll().
  virtual size_t rx_burst(std::span<RxPacket> out) = 0;

  // Transmit in two steps so the engine writes straight into the backend's
  // buffer: tx_buffer() returns room for one packet (Engine::kMaxPacket
  // bytes), or an empty span when every buffer is in flight (back-pressure:
  // stop pulling from the engine this pass); tx_commit() queues the first
  // `len` bytes written there. tx_flush() hands everything queued to the
  // kernel / NIC. Consecutive packets with equal addressing and size may leave
  // as one segmentation-offload send.
  virtual std::span<std::byte> tx_buffer() = 0;
  virtual void tx_commit(size_t len, const PacketMeta& meta) = 0;
  virtual void tx_flush() = 0;

  // Reaps send completions and re-arms receives; true if anything progressed.
  virtual bool poll() = 0;

  // A file descriptor that becomes readable when the backend has work (a
  // receive or send completed); the loop sleeps on it with its other fds.
  virtual int wait_fd() const = 0;
  // Called before sleeping: true if the backend already has work pending, so
  // the loop must not sleep.
  virtual bool has_pending() = 0;
  // After an rx_burst that returned fewer packets than asked: true if more may
  // be waiting all the same (the UDP backend: a socket had every receive taken,
  // so the kernel may hold datagrams no receive was posted for). The loop then
  // calls rx_burst again before it runs the timers (Daemon::pass).
  virtual bool rx_more() { return false; }

  virtual const DatapathStats& stats() const = 0;
  virtual std::span<const PortStats> port_stats() const = 0;

  // The largest IP packet this backend can carry (its buffers, its device),
  // or 0 when only the interface MTU limits it. The daemon caps the MTU it
  // reports and the engine's port MTU with it.
  virtual uint32_t mtu_limit() const { return 0; }
  // A poll-mode backend (DPDK): the loop spins on it, so an idle pass is
  // cheap and frequent; the loop then looks at its sockets and doorbells
  // (a syscall) every few passes instead of on every idle one.
  virtual bool poll_mode() const { return false; }
  // Backend-specific counters as a JSON object ("" = none), shown under
  // "datapath" in STATS (e.g. the DPDK backend's per-queue counters).
  virtual std::string stats_json() const { return {}; }
};

}  // namespace sroce::daemon
