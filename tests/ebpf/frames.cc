#include "frames.h"

#include <arpa/inet.h>

#include <cstring>
#include <stdexcept>

#include "proto/icrc.h"
#include "proto/roce.h"

namespace sroce::tmtest {

Addr v4(const char* dotted) {
  Addr a{};
  a[10] = a[11] = 0xff;
  if (inet_pton(AF_INET, dotted, a.data() + 12) != 1) throw std::invalid_argument(dotted);
  return a;
}

Addr v6(const char* text) {
  Addr a{};
  if (inet_pton(AF_INET6, text, a.data()) != 1) throw std::invalid_argument(text);
  return a;
}

uint32_t v4_host(const Addr& a) { return sroce_get_be32(a.data() + 12); }

bool has_aeth(uint8_t op) {
  return op == SROCE_OP_READ_RESP_FIRST || op == SROCE_OP_READ_RESP_LAST ||
         op == SROCE_OP_READ_RESP_ONLY || op == SROCE_OP_ACK || op == SROCE_OP_ATOMIC_ACK;
}

size_t roce_len(const Roce& r) {
  return SROCE_BTH_LEN + (has_aeth(r.opcode) ? SROCE_AETH_LEN : 0) + r.payload + SROCE_ICRC_LEN;
}

void write_roce(uint8_t* p, const Roce& r) {
  sroce_bth bth{};
  bth.opcode = r.opcode;
  bth.pkey = 0xffff;
  bth.dqpn = r.dqpn;
  bth.ack_req = r.ack_req;
  bth.psn = r.psn;
  sroce_bth_write(p, &bth);
  p[1] = static_cast<uint8_t>((p[1] & 0xf0) | (r.tver & 0x0f));  // TVer (IBA 9.2.1)
  size_t off = SROCE_BTH_LEN;
  if (has_aeth(r.opcode)) {
    sroce_aeth aeth{r.syndrome, 1};
    sroce_aeth_write(p + off, &aeth);
    off += SROCE_AETH_LEN;
  }
  for (size_t i = 0; i < r.payload; ++i) p[off + i] = static_cast<uint8_t>(i * 7 + 1);
  std::memset(p + off + r.payload, 0, SROCE_ICRC_LEN);  // ICRC: not checked by the programs
}

size_t payload_offset(const Frame& f) {
  size_t off = 14 + 4 * f.vlan_tpids.size() + (f.ipv6 ? 40 : 20) + 8;
  for (const Ipv6Ext& e : f.ipv6_ext) off += e.body.size();
  return off;
}

std::vector<uint8_t> build(const Frame& f, const std::vector<Roce>& segments) {
  size_t udp_payload = 0;
  for (const Roce& r : segments) udp_payload += roce_len(r);
  std::vector<uint8_t> b(payload_offset(f) + udp_payload, 0);
  uint8_t* p = b.data();

  // Ethernet (IEEE 802.3): locally administered MACs, then the VLAN tags.
  const uint8_t dst_mac[6] = {0x02, 0, 0, 0, 0, 2}, src_mac[6] = {0x02, 0, 0, 0, 0, 1};
  std::memcpy(p, dst_mac, 6);
  std::memcpy(p + 6, src_mac, 6);
  size_t off = 12;
  for (size_t i = 0; i < f.vlan_tpids.size(); ++i) {
    sroce_put_be16(p + off, f.vlan_tpids[i]);
    sroce_put_be16(p + off + 2, static_cast<uint16_t>(100 + i));  // VID
    off += 4;
  }
  sroce_put_be16(p + off, f.ipv6 ? 0x86dd : 0x0800);
  off += 2;

  size_t ext_len = 0;
  for (const Ipv6Ext& e : f.ipv6_ext) ext_len += e.body.size();
  const auto udp_len = static_cast<uint16_t>(8 + udp_payload);
  if (f.ipv6) {
    sroce_build_ipv6(p + off, f.src.data(), f.dst.data(), f.ecn, 0, 64,
                     static_cast<uint16_t>(ext_len + udp_len));
    uint8_t* next = p + off + 6;  // Next Header (RFC 8200 3)
    off += 40;
    for (const Ipv6Ext& e : f.ipv6_ext) {
      *next = e.type;
      std::memcpy(p + off, e.body.data(), e.body.size());
      next = p + off;
      off += e.body.size();
    }
    *next = f.ip_proto;
  } else {
    sroce_build_ipv4(p + off, v4_host(f.src), v4_host(f.dst), f.ecn, 64, udp_len);
    sroce_put_be16(p + off + 6, f.ipv4_frag);
    p[off + 9] = f.ip_proto;
    off += 20;
  }
  sroce_build_udp(p + off, f.sport, f.dport, udp_len);
  off += 8;
  for (const Roce& r : segments) {
    write_roce(p + off, r);
    off += roce_len(r);
  }
  return b;
}

}  // namespace sroce::tmtest
