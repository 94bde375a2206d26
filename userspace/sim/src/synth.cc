#include "sroce/sim/synth.h"

#include <cstring>

#include "proto/icrc.h"
#include "proto/roce.h"

namespace sroce::sim {

namespace {
sroce_icrc_addr icrc_addr(const PacketMeta& m) {
  sroce_icrc_addr a{};
  std::memcpy(a.src_gid, m.src.raw, 16);
  std::memcpy(a.dst_gid, m.dst.raw, 16);
  a.src_port = m.src_port;
  a.dst_port = m.dst_port;
  return a;
}
}  // namespace

size_t make_ud_send(std::span<std::byte> out, const PacketMeta& meta, uint32_t dest_qpn,
                    uint32_t psn, uint32_t payload_len, uint8_t fill) {
  const uint32_t pad = (4 - payload_len % 4) % 4;  // IBA 9.2: payload padded to 4 bytes
  const size_t len = SROCE_BTH_LEN + SROCE_DETH_LEN + payload_len + pad + SROCE_ICRC_LEN;
  if (out.size() < len) return 0;
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  sroce_bth bth{};
  bth.opcode = static_cast<uint8_t>(unsigned{SROCE_TRANSPORT_UD} | unsigned{SROCE_OP_SEND_ONLY});
  bth.pad = static_cast<uint8_t>(pad);
  bth.pkey = 0xffff;
  bth.dqpn = dest_qpn;
  bth.psn = psn & SROCE_PSN_MASK;
  sroce_bth_write(p, &bth);
  sroce_deth deth{0x11111111u, 1};
  sroce_deth_write(p + SROCE_BTH_LEN, &deth);
  std::memset(p + SROCE_BTH_LEN + SROCE_DETH_LEN, fill, payload_len + pad);
  const size_t body = len - SROCE_ICRC_LEN;
  const sroce_icrc_addr a = icrc_addr(meta);
  const uint32_t icrc = sroce_icrc_payload(&a, p, body);
  // Little-endian on the wire (proto/icrc.h).
  for (int i = 0; i < 4; ++i) p[body + i] = static_cast<uint8_t>(icrc >> (8 * i));
  return len;
}

bool icrc_ok(std::span<const std::byte> payload, const PacketMeta& meta) {
  if (payload.size() < SROCE_BTH_LEN + SROCE_ICRC_LEN) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
  const size_t body = payload.size() - SROCE_ICRC_LEN;
  const sroce_icrc_addr a = icrc_addr(meta);
  const uint32_t want = sroce_icrc_payload(&a, p, body);
  uint32_t got = 0;
  for (int i = 0; i < 4; ++i) got |= uint32_t{p[body + i]} << (8 * i);
  return got == want;
}

}  // namespace sroce::sim
