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

#include "proto/icrc.h"
#include "proto/int.h"
#include "proto/roce.h"
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

// Packet slots come in two sizes (PacketPool): every slot holds its bytes
// inline up to kInlineBytes (ACKs, READ requests, a data packet's headers);
// a longer packet whose bytes are all carried gets a full-size body as well.
//
// A packet need not carry its payload: a host whose engine moves no payload
// bytes (HostConfig::discard_payload) and checks no ICRC sends its data
// packets as their headers (INT shim, BTH and the opcode's extension headers:
// `head` bytes) and their last `tail` bytes (the sroce trailer and the ICRC,
// docs/wire.md), with `len` the length the wire carries. Links, switches and
// receivers see the same lengths and headers as with the payload; the bytes
// in between were never read by anyone (the sending engine copied nothing
// into them, the receiving one discards them).
//
// The fields every hop reads come first, the bytes after them. A slot
// starts on a cache line: a hop reads the first two lines of a slot (fields,
// then the headers at inline_bytes), where a slot at a 16-byte offset in a
// chunk could straddle three.
inline constexpr uint32_t kInlineBytes = 192;
inline constexpr uint32_t kTailBytes = SROCE_LEH_LEN + SROCE_ICRC_LEN;

struct alignas(64) Packet {
  Packet() = default;
  Packet(const Packet&) = delete;
  Packet& operator=(const Packet&) = delete;

  uint32_t len = 0;   // the packet's length: what links, switches and the receiver see
  uint32_t head = 0;  // bytes held from the front (bytes()): len when the payload is carried
  uint32_t tail = 0;  // payload not carried: the last `tail` bytes of the packet, in tail_bytes
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
  std::byte* body = nullptr;     // a full-size buffer (PacketPool), or null: bytes are inline
  std::array<std::byte, kInlineBytes> inline_bytes;
  std::array<std::byte, kTailBytes> tail_bytes;

  bool carried() const { return head == len; }
  uint32_t capacity() const { return body != nullptr ? static_cast<uint32_t>(kMaxPacketBytes) : kInlineBytes; }
  std::byte* data() { return body != nullptr ? body : inline_bytes.data(); }
  const std::byte* data() const { return body != nullptr ? body : inline_bytes.data(); }
  // Room to write a packet of up to capacity() bytes (then set_len).
  std::span<std::byte> buffer() { return {data(), capacity()}; }
  // All bytes carried: len = head, no tail.
  void set_len(uint32_t n) {
    len = head = n;
    tail = 0;
  }
  // The bytes held from the front: the whole packet when carried().
  std::span<const std::byte> payload() const { return {data(), head}; }
  const uint8_t* bytes() const { return reinterpret_cast<const uint8_t*>(data()); }
  uint8_t* bytes() { return reinterpret_cast<uint8_t*>(data()); }
  // Byte i of the packet (i < len), or null when it is not carried.
  std::byte* byte_at(uint32_t i) {
    if (i < head) return data() + i;
    if (i < len && i >= len - tail) return tail_bytes.data() + (i - (len - tail));
    return nullptr;
  }
};

// Header bytes of a RoCEv2 packet: INT shim, BTH and the opcode's extension
// headers when the opcode carries a payload, else all `len` (an ACK's
// trailers and echo are all header). `buf` holds at least the headers.
uint32_t packet_header_bytes(const uint8_t* buf, uint32_t len);

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

// Packet slots reused through a free list, in chunks of kChunk (stable
// addresses, one allocation per chunk), with full-size bodies reused through
// their own free list: after the fabric warms up, nothing is allocated per
// packet. Slots are addressed by index, so growing the pool never
// invalidates a PacketId.
class PacketPool {
 public:
  PacketPool();
  ~PacketPool();
  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;

  // A cleared slot with room for `capacity` bytes (a body beyond kInlineBytes).
  PacketId alloc(size_t capacity = kInlineBytes) {
    if (free_.empty()) add_chunk();
    const PacketId id = free_.back();
    free_.pop_back();
    Packet& p = (*this)[id];
    p.len = p.head = p.tail = 0;
    p.meta = PacketMeta{};
    p.serial = next_serial_++;
    p.corrupted = false;
    p.duplicate = false;
    p.trimmed = false;
    p.sb_flag = false;
    p.priority = false;
    p.ingress = kNoLinkId;
    p.dest = kNoDest;
    if (capacity > kInlineBytes) p.body = take_body();
    ++live_;
    return id;
  }
  // A packet built elsewhere (`src`, its whole length), stored whole
  // (`carry`), or as its headers and tail when its payload is not carried.
  PacketId store(std::span<const std::byte> src, bool carry);
  // After a packet was written into a body: back into the inline bytes if it
  // fits there (the body goes back to its free list).
  void fit(PacketId id);
  // Moves an inline packet's bytes into a body (room to grow: INT records).
  void grow(Packet& p);
  PacketId clone(PacketId src);
  void free(PacketId id) {
    Packet& p = (*this)[id];
    if (p.body != nullptr) {
      free_bodies_.push_back(p.body);
      p.body = nullptr;
    }
    free_.push_back(id);
    --live_;
  }
  Packet& operator[](PacketId id) { return chunks_[id / kChunk][id % kChunk]; }
  const Packet& operator[](PacketId id) const { return chunks_[id / kChunk][id % kChunk]; }

  // The packet's bytes in one piece, for a receiver: the packet itself when
  // carried, else its headers and tail at their offsets in a scratch buffer
  // (valid until the next call; the bytes between are not the payload).
  std::span<const std::byte> contiguous(const Packet& p);
  // Copies the packet's len bytes into `out` (at least len), zeros where the
  // payload is not carried (pcap, test endpoints).
  void copy_out(const Packet& p, std::span<std::byte> out) const;
  // A buffer of kMaxPacketBytes for an engine to write a packet into before
  // store() (valid until the next call of store with it).
  std::span<std::byte> tx_scratch() { return {tx_scratch_.get(), kMaxPacketBytes}; }

  size_t live() const { return live_; }
  size_t capacity() const { return chunks_.size() * kChunk; }
  size_t bodies() const { return bodies_.size(); }
  // What the slots and bodies hold (the pool's share of the run's memory).
  size_t memory_bytes() const { return capacity() * sizeof(Packet) + bodies() * kMaxPacketBytes; }

 private:
  static constexpr size_t kChunk = 256;
  void add_chunk();
  std::byte* take_body();

  std::vector<std::unique_ptr<Packet[]>> chunks_;
  std::vector<PacketId> free_;
  std::vector<std::unique_ptr<std::byte[]>> bodies_;
  std::vector<std::byte*> free_bodies_;
  std::unique_ptr<std::byte[]> tx_scratch_;
  std::unique_ptr<std::byte[]> rx_scratch_;
  uint64_t next_serial_ = 0;
  size_t live_ = 0;
};

}  // namespace sroce::sim
