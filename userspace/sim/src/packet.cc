#include "sroce/sim/packet.h"

#include <cstring>

namespace sroce::sim {

uint32_t packet_header_bytes(const uint8_t* buf, uint32_t len) {
  uint32_t off = 0;
  sroce_int_shim s{};
  if (sroce_int_present(buf, len)) {
    if (sroce_int_shim_parse(buf, len, &s) != SROCE_INT_OK) return len;
    off = static_cast<uint32_t>(sroce_int_shim_bytes(&s));
  }
  if (off >= len) return len;
  const struct sroce_opinfo* info = sroce_opinfo(buf[off]);
  if (info->name == nullptr || (info->flags & SROCE_HAS_PAYLOAD) == 0) return len;
  // At least a BTH and an ICRC's worth after the shim: what the shim parser
  // asks to see (proto/int.h), so a switch can push records on the headers.
  const uint32_t hdr = std::max<uint32_t>(info->hdr_len, SROCE_BTH_LEN + SROCE_ICRC_LEN);
  return std::min(len, off + hdr);
}

PacketPool::PacketPool()
    : tx_scratch_(std::make_unique<std::byte[]>(kMaxPacketBytes)),
      rx_scratch_(std::make_unique<std::byte[]>(kMaxPacketBytes)) {}

PacketPool::~PacketPool() = default;

void PacketPool::add_chunk() {
  const auto base = static_cast<PacketId>(chunks_.size() * kChunk);
  chunks_.push_back(std::make_unique<Packet[]>(kChunk));
  // Lowest id on top: slots are handed out in address order.
  for (size_t i = kChunk; i-- > 0;) free_.push_back(base + static_cast<PacketId>(i));
}

std::byte* PacketPool::take_body() {
  if (free_bodies_.empty()) {
    bodies_.push_back(std::make_unique<std::byte[]>(kMaxPacketBytes));
    return bodies_.back().get();
  }
  std::byte* b = free_bodies_.back();
  free_bodies_.pop_back();
  return b;
}

PacketId PacketPool::store(std::span<const std::byte> src, bool carry) {
  const auto len = static_cast<uint32_t>(std::min(src.size(), kMaxPacketBytes));
  const auto* raw = reinterpret_cast<const uint8_t*>(src.data());
  uint32_t head = len;
  if (!carry) {
    head = packet_header_bytes(raw, len);
    // Not worth a gap: keep it whole.
    if (head + kTailBytes >= len) head = len;
  }
  const PacketId id = alloc(head > kInlineBytes ? kMaxPacketBytes : kInlineBytes);
  Packet& p = (*this)[id];
  std::memcpy(p.data(), src.data(), head);
  p.len = len;
  p.head = head;
  if (head < len) {
    p.tail = kTailBytes;
    std::memcpy(p.tail_bytes.data(), src.data() + (len - kTailBytes), kTailBytes);
  }
  return id;
}

void PacketPool::fit(PacketId id) {
  Packet& p = (*this)[id];
  if (p.body == nullptr || p.head > kInlineBytes) return;
  std::memcpy(p.inline_bytes.data(), p.body, p.head);
  free_bodies_.push_back(p.body);
  p.body = nullptr;
}

void PacketPool::grow(Packet& p) {
  if (p.body != nullptr) return;
  std::byte* b = take_body();
  std::memcpy(b, p.inline_bytes.data(), p.head);
  p.body = b;
}

PacketId PacketPool::clone(PacketId src) {
  const Packet& s0 = (*this)[src];
  const PacketId id = alloc(s0.body != nullptr ? kMaxPacketBytes : kInlineBytes);
  Packet& d = (*this)[id];
  const Packet& s = (*this)[src];  // alloc may have added a chunk (addresses are stable)
  std::memcpy(d.data(), s.data(), s.head);
  std::memcpy(d.tail_bytes.data(), s.tail_bytes.data(), s.tail);
  d.len = s.len;
  d.head = s.head;
  d.tail = s.tail;
  d.meta = s.meta;
  d.corrupted = s.corrupted;
  d.trimmed = s.trimmed;
  d.sb_flag = s.sb_flag;
  d.priority = s.priority;
  d.ingress = s.ingress;
  d.dest = s.dest;
  return id;
}

std::span<const std::byte> PacketPool::contiguous(const Packet& p) {
  if (p.carried()) return p.payload();
  std::byte* out = rx_scratch_.get();
  std::memcpy(out, p.data(), p.head);
  std::memcpy(out + (p.len - p.tail), p.tail_bytes.data(), p.tail);
  return {out, p.len};
}

void PacketPool::copy_out(const Packet& p, std::span<std::byte> out) const {
  if (out.size() < p.len) return;
  std::memcpy(out.data(), p.data(), p.head);
  if (p.carried()) return;
  const uint32_t gap_end = p.len - p.tail;
  std::memset(out.data() + p.head, 0, gap_end - p.head);
  std::memcpy(out.data() + gap_end, p.tail_bytes.data(), p.tail);
}

}  // namespace sroce::sim
