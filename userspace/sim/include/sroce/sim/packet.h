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

struct Packet {
  std::array<std::byte, Engine::kMaxPacket> data;
  uint32_t len = 0;
  PacketMeta meta;
  uint64_t serial = 0;        // unique per packet created (a duplicate gets its own)
  bool corrupted = false;     // a bit was flipped on some link
  bool duplicate = false;     // created by a duplicating link

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
