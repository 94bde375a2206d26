// A packet in flight through the simulated fabric: the RoCEv2 UDP payload
// (BTH .. ICRC) exactly as the engine produced it, plus its addressing. The
// Ethernet/IP/UDP headers are implied by the addressing and are materialised
// only for pcap output (frame.h), built by the proto/ builders so that the
// ICRC the engine computed matches them.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "proto/int.h"
#include "sroce/engine/engine.h"

namespace sroce::sim {

using PacketId = uint32_t;

// No link (a packet that has not crossed a switch yet).
inline constexpr uint32_t kNoLinkId = UINT32_MAX;

// In-band network telemetry (docs/wire.md, "INT"): an engine whose peer
// agreed puts an INT shim in front of each request (proto/int.h); switches
// that stamp push one record per egress port into the packet's bytes, and
// the receiving engine echoes them on its ACKs. Nothing rides beside the
// bytes. IntHop is the controllers' decoded record; port_id here is
// (switch node id << 16) | egress port index.
using IntHop = cc::IntHop;
// A 3-tier fat-tree path crosses 5 switches: room for 5 records.
inline constexpr uint32_t kMaxIntHops = 5;
inline constexpr size_t kMaxPacketBytes = Engine::kMaxPacket + kMaxIntHops * SROCE_INT_HOP_LEN;

// No destination index yet (Network::dest_of, cached by the first switch).
inline constexpr uint32_t kNoDest = UINT32_MAX;

// The fields every hop reads come first and the bytes last, so a hop that
// only looks at the addressing and length touches one cache line, not one
// 4 KB away from the packet's first byte.
struct Packet {
  uint32_t len = 0;
  PacketMeta meta;
  uint64_t serial = 0;        // unique per packet created (a duplicate gets its own)
  bool corrupted = false;     // a bit was flipped on some link
  bool duplicate = false;     // created by a duplicating link
  // Switch model (switch.h): set by the fabric, read by hosts and metrics.
  bool trimmed = false;       // cut to its headers by a trimming switch (DCP)
  bool sb_flag = false;       // some switch's shared buffer was above its flag level
  bool priority = false;      // queued in the strict-priority (header/control) queue
  uint32_t ingress = kNoLinkId;  // link it arrived on at the current switch (PFC accounting)
  uint32_t dest = kNoDest;       // Network::dest_of(meta.dst), looked up once per packet
  std::array<std::byte, kMaxPacketBytes> data;

  std::span<const std::byte> payload() const { return {data.data(), len}; }
  const uint8_t* bytes() const { return reinterpret_cast<const uint8_t*>(data.data()); }
  uint8_t* bytes() { return reinterpret_cast<uint8_t*>(data.data()); }
};

// The INT records in a packet's shim, decoded first hop first (as the
// controllers take them; the wire has the newest first). 0 without a shim.
inline uint8_t int_hops_of(const Packet& p, std::array<IntHop, kMaxIntHops>& out) {
  sroce_int_shim s{};
  if (!sroce_int_present(p.bytes(), p.len) || sroce_int_shim_parse(p.bytes(), p.len, &s) != SROCE_INT_OK)
    return 0;
  const uint8_t n = std::min<uint8_t>(s.count, kMaxIntHops);
  for (uint8_t i = 0; i < n; ++i) {
    sroce_int_hop w;
    sroce_int_hop_read(sroce_int_shim_hop(p.bytes(), s.count - 1u - i), &w);
    IntHop& h = out[i];
    h.port_id = w.node_port;
    h.ts = Time{static_cast<int64_t>(w.ts_ps)};
    h.tx_bytes = w.tx_bytes;
    h.qlen_bytes = w.qlen;
    h.link_bps = uint64_t{w.link_mbps} * 1'000'000ull;
    h.buffer_flag = (w.flags & SROCE_INT_HOP_F_SB) != 0;
  }
  return n;
}

// Fixed-size packet slots reused through a free list: after the fabric warms
// up, no allocation happens per packet. Slots are addressed by index, so
// growing the pool never invalidates a PacketId.
class PacketPool {
 public:
  PacketId alloc() {
    if (free_.empty()) {
      slots_.emplace_back(std::make_unique<Packet>());
      free_.push_back(static_cast<PacketId>(slots_.size() - 1));
    }
    const PacketId id = free_.back();
    free_.pop_back();
    Packet& p = *slots_[id];
    p.len = 0;
    p.meta = PacketMeta{};
    p.serial = next_serial_++;
    p.corrupted = false;
    p.duplicate = false;
    p.trimmed = false;
    p.sb_flag = false;
    p.priority = false;
    p.ingress = kNoLinkId;
    p.dest = kNoDest;
    ++live_;
    return id;
  }
  PacketId clone(PacketId src) {
    const PacketId id = alloc();
    Packet& d = *slots_[id];
    const Packet& s = *slots_[src];
    std::copy_n(s.data.begin(), s.len, d.data.begin());
    d.len = s.len;
    d.meta = s.meta;
    d.corrupted = s.corrupted;
    d.trimmed = s.trimmed;
    d.sb_flag = s.sb_flag;
    d.priority = s.priority;
    d.ingress = s.ingress;
    d.dest = s.dest;
    return id;
  }
  void free(PacketId id) {
    free_.push_back(id);
    --live_;
  }
  Packet& operator[](PacketId id) { return *slots_[id]; }
  const Packet& operator[](PacketId id) const { return *slots_[id]; }
  size_t live() const { return live_; }
  size_t capacity() const { return slots_.size(); }

 private:
  std::vector<std::unique_ptr<Packet>> slots_;
  std::vector<PacketId> free_;
  uint64_t next_serial_ = 0;
  size_t live_ = 0;
};

}  // namespace sroce::sim
