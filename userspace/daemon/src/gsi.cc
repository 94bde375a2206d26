// QP1 datagrams: GSI_SEND -> RoCEv2 UD, RoCEv2 UD for QP1 -> GSI_RECV.
#include "gsi.h"

#include <cstring>

#include "proto/icrc.h"
#include "proto/packet.h"

namespace sroce::daemon {

namespace {

constexpr uint8_t kUdSendOnly =
    static_cast<uint8_t>(unsigned{SROCE_TRANSPORT_UD} | unsigned{SROCE_OP_SEND_ONLY});

const uint8_t* u8(const std::byte* p) { return reinterpret_cast<const uint8_t*>(p); }
uint8_t* u8(std::byte* p) { return reinterpret_cast<uint8_t*>(p); }

uint32_t icrc_of(const PacketMeta& m, const uint8_t* p, size_t len) {
  sroce_icrc_addr a;
  memcpy(a.src_gid, m.src.raw, 16);
  memcpy(a.dst_gid, m.dst.raw, 16);
  a.src_port = m.src_port;
  a.dst_port = m.dst_port;
  return sroce_icrc_payload(&a, p, len);
}

}  // namespace

bool gsi_is_qp1(std::span<const std::byte> payload) {
  if (payload.size() < SROCE_BTH_LEN) return false;
  return sroce_get_be24(u8(payload.data()) + 5) == kGsiQpn;
}

size_t gsi_encode(const sroce_kgsi& h, std::span<const std::byte> mad, uint16_t udp_port,
                  uint32_t psn, std::span<std::byte> out, PacketMeta& meta) {
  if (mad.empty() || mad.size() != h.len || h.len > SROCE_KGSI_MAX_MAD) return 0;
  Gid src, dst;
  memcpy(src.raw, h.sgid, 16);
  memcpy(dst.raw, h.dgid, 16);
  // Annex A17.4.5: one IP header per packet, so both ends are of one family.
  if (src.is_ipv4() != dst.is_ipv4()) return 0;
  const uint8_t pad = static_cast<uint8_t>((4 - h.len % 4) % 4);  // IBA 9.2: 4-byte payloads
  const size_t len = SROCE_BTH_LEN + SROCE_DETH_LEN + h.len + pad + SROCE_ICRC_LEN;
  if (out.size() < len) return 0;
  uint8_t* p = u8(out.data());
  sroce_bth bth{};
  bth.opcode = kUdSendOnly;
  bth.pad = pad;
  bth.pkey = h.pkey ? h.pkey : 0xffff;  // the default P_Key (IBA 10.9.1.2)
  bth.dqpn = h.remote_qpn & SROCE_PSN_MASK;
  bth.psn = psn & SROCE_PSN_MASK;
  sroce_bth_write(p, &bth);
  sroce_deth deth{h.qkey, kGsiQpn};  // IBA 9.3.2: SrcQP tells the receiver who answers
  sroce_deth_write(p + SROCE_BTH_LEN, &deth);
  size_t off = SROCE_BTH_LEN + SROCE_DETH_LEN;
  memcpy(p + off, mad.data(), h.len);
  off += h.len;
  memset(p + off, 0, pad);
  off += pad;
  meta = PacketMeta{};
  meta.src = src;
  meta.dst = dst;
  meta.src_port = udp_port;
  meta.dst_port = udp_port;
  meta.traffic_class = h.traffic_class;
  meta.hop_limit = h.hop_limit ? h.hop_limit : 64;
  meta.flow_label = h.flow_label & 0xfffff;
  sroce_icrc_put(p + off, icrc_of(meta, p, off));
  return len;
}

const char* to_string(GsiDrop d) {
  switch (d) {
    case GsiDrop::kNone:
      return "none";
    case GsiDrop::kMalformed:
      return "malformed";
    case GsiDrop::kNotUdSend:
      return "not a UD SEND_ONLY";
    case GsiDrop::kBadIcrc:
      return "bad ICRC";
    case GsiDrop::kTooLong:
      return "longer than a MAD";
  }
  return "?";
}

GsiDrop gsi_decode(std::span<const std::byte> payload, const PacketMeta& meta, bool check_icrc,
                   sroce_kgsi& h, std::span<const std::byte>& mad) {
  sroce_pkt pkt;
  if (sroce_parse(u8(payload.data()), payload.size(), &pkt) != SROCE_PARSE_OK)
    return GsiDrop::kMalformed;
  // IBA 13.5.1: QP1 is a UD QP; MADs are single-packet SENDs without immediate.
  if (pkt.bth.opcode != kUdSendOnly) return GsiDrop::kNotUdSend;
  if (check_icrc) {
    // docs/wire.md: rxe's and RNICs' MADs carry their own IPv4 id; a solver
    // built for this one length (MADs are rare, no cache worth keeping).
    sroce_icrc_addr a;
    memcpy(a.src_gid, meta.src.raw, 16);
    memcpy(a.dst_gid, meta.dst.raw, 16);
    a.src_port = meta.src_port;
    a.dst_port = meta.dst_port;
    sroce_icrc_id_cache ids{};
    if (sroce_icrc_check(&a, meta.ipv4_id, u8(payload.data()), payload.size() - SROCE_ICRC_LEN, pkt.icrc, &ids,
                         nullptr) == SROCE_ICRC_BAD)
      return GsiDrop::kBadIcrc;
  }
  if (pkt.payload_len > SROCE_KGSI_MAX_MAD) return GsiDrop::kTooLong;
  h = sroce_kgsi{};
  memcpy(h.sgid, meta.src.raw, 16);
  memcpy(h.dgid, meta.dst.raw, 16);
  h.remote_qpn = pkt.deth.sqpn;
  h.qkey = pkt.deth.qkey;
  h.flow_label = meta.flow_label;
  h.pkey = pkt.bth.pkey;
  h.traffic_class = meta.traffic_class;
  h.hop_limit = meta.hop_limit;
  h.len = pkt.payload_len;
  mad = payload.subspan(static_cast<size_t>(pkt.payload - u8(payload.data())), pkt.payload_len);
  return GsiDrop::kNone;
}

bool GsiTxQueue::push(const sroce_kgsi& h, std::span<const std::byte> mad, uint16_t udp_port) {
  if (count_ == kSlots) return false;
  Slot& s = slots_[(head_ + count_) % kSlots];
  s.len = gsi_encode(h, mad, udp_port, psn_, s.buf, s.meta);
  if (s.len == 0) return false;
  psn_ = (psn_ + 1) & SROCE_PSN_MASK;
  ++count_;
  return true;
}

std::optional<TxPacket> GsiTxQueue::pop(std::span<std::byte> out, Time now) {
  if (count_ == 0) return std::nullopt;
  Slot& s = slots_[head_];
  if (out.size() < s.len) return std::nullopt;
  memcpy(out.data(), s.buf.data(), s.len);
  TxPacket t;
  t.len = s.len;
  t.meta = s.meta;
  t.send_at = now;
  head_ = (head_ + 1) % kSlots;
  --count_;
  return t;
}

}  // namespace sroce::daemon
