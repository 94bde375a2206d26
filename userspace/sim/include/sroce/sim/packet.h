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

#include "sroce/engine/engine.h"

namespace sroce::sim {

using PacketId = uint32_t;

// No link (a packet that has not crossed a switch yet).
inline constexpr uint32_t kNoLinkId = UINT32_MAX;

// In-band network telemetry, one record per switch egress port the packet
// left (HPCC, Li et al. SIGCOMM 2019, section 3.2 and figure 6: timestamp,
// txBytes, qLen, B; Odin adds the shared-buffer flag): the congestion
// controllers' own record (sroce/cc/types.h). Kept in the packet slot, not
// on the wire; the host hands it to the engine out of band (PacketMeta::
// int_hops, int_echo; docs/wire.md, "INT echo"). port_id here is
// (switch node id << 16) | egress port index.
using IntHop = cc::IntHop;
// A 3-tier fat-tree path crosses 5 switches.
inline constexpr uint32_t kMaxIntHops = 5;

struct Packet {
  std::array<std::byte, Engine::kMaxPacket> data;
  uint32_t len = 0;
  PacketMeta meta;
  uint64_t serial = 0;        // unique per packet created (a duplicate gets its own)
  bool corrupted = false;     // a bit was flipped on some link
  bool duplicate = false;     // created by a duplicating link
  // Switch model (switch.h): set by the fabric, read by hosts and metrics.
  bool trimmed = false;       // cut to its headers by a trimming switch (DCP)
  bool sb_flag = false;       // some switch's shared buffer was above its flag level
  bool priority = false;      // queued in the strict-priority (header/control) queue
  uint8_t int_count = 0;      // valid entries of int_hops
  uint32_t ingress = kNoLinkId;  // link it arrived on at the current switch (PFC accounting)
  std::array<IntHop, kMaxIntHops> int_hops;
  // An ACK's INT echo (the forward path's records, copied by the responder's
  // engine; out of band like int_hops; switches do not touch it).
  uint8_t int_echo_count = 0;
  std::array<IntHop, kMaxIntHops> int_echo;

  std::span<const std::byte> payload() const { return {data.data(), len}; }
};

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
    p.int_count = 0;
    p.int_echo_count = 0;
    p.ingress = kNoLinkId;
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
    d.int_count = s.int_count;
    d.ingress = s.ingress;
    d.int_hops = s.int_hops;
    d.int_echo_count = s.int_echo_count;
    d.int_echo = s.int_echo;
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
