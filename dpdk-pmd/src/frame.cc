// Ethernet + IPv4 (or IPv6) + UDP framing (frame.h).
#include "frame.h"

#include <cstring>

#include "proto/icrc.h"

namespace sroce::dpdk {

namespace {

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

// One's-complement sum of 16-bit big-endian words (RFC 1071), not folded.
uint32_t sum16(const uint8_t* p, size_t len, uint32_t sum) {
  for (; len >= 2; p += 2, len -= 2) sum += be16(p);
  if (len) sum += uint32_t{p[0]} << 8;
  return sum;
}

uint16_t fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

}  // namespace

uint64_t MacAddr::packed() const {
  uint64_t v = 0;
  for (uint8_t x : b) v = v << 8 | x;
  return v;
}

MacAddr MacAddr::unpack(uint64_t v) {
  MacAddr m;
  for (int i = 5; i >= 0; --i, v >>= 8) m.b[i] = static_cast<uint8_t>(v);
  return m;
}

const char* rx_verdict_name(RxVerdict v) {
  switch (v) {
    case RxVerdict::kOk: return "ok";
    case RxVerdict::kNotIpv4: return "not_ipv4";
    case RxVerdict::kIpHeader: return "ip_header";
    case RxVerdict::kFragment: return "fragment";
    case RxVerdict::kNotRoce: return "not_roce";
    case RxVerdict::kLength: return "length";
    case RxVerdict::kCount: break;
  }
  return "?";
}

uint16_t ipv4_header_checksum(const uint8_t* ip) { return static_cast<uint16_t>(~fold(sum16(ip, kIpv4Header, 0))); }

RxVerdict parse_frame(std::span<const uint8_t> f, uint16_t udp_port, bool ip_csum_checked, RxFrame& out) {
  if (f.size() < kEthHeader) return RxVerdict::kLength;
  if (be16(&f[12]) != kEtherTypeIpv4) return RxVerdict::kNotIpv4;
  if (f.size() < kFrameHeaders) return RxVerdict::kLength;
  const uint8_t* ip = f.data() + kEthHeader;
  if ((ip[0] >> 4) != 4) return RxVerdict::kNotIpv4;
  if ((ip[0] & 0xf) != 5) return RxVerdict::kIpHeader;
  if (!ip_csum_checked && fold(sum16(ip, kIpv4Header, 0)) != 0xffff) return RxVerdict::kIpHeader;
  const uint16_t total = be16(ip + 2);
  if (total < kIpv4Header + kUdpHeader || total > f.size() - kEthHeader) return RxVerdict::kLength;
  if (be16(ip + 6) & 0x3fff) return RxVerdict::kFragment;
  if (ip[9] != 17) return RxVerdict::kNotRoce;
  const uint8_t* udp = ip + kIpv4Header;
  if (be16(udp + 2) != udp_port) return RxVerdict::kNotRoce;
  const uint16_t udp_len = be16(udp + 4);
  if (udp_len != total - kIpv4Header) return RxVerdict::kLength;
  // The UDP checksum is not checked: the ICRC covers the UDP header (ports
  // and length; only the checksum field is masked) and the payload, and the
  // engine verifies it (Annex A17.3.3). A check here would also refuse
  // legitimate packets: a kernel sender behind veth (or a VM's tap) leaves
  // a partial checksum for an offload that never happens when XDP takes
  // the frame.
  out.src = be32(ip + 12);
  out.dst = be32(ip + 16);
  out.sport = be16(udp);
  out.dport = be16(udp + 2);
  out.tos = ip[1];
  out.ip_id = be16(ip + 4);
  out.payload_off = kFrameHeaders;
  out.payload_len = udp_len - kUdpHeader;
  return RxVerdict::kOk;
}

void write_headers(uint8_t* p, const TxAddr& a, uint16_t payload_len, bool ip_csum_offload) {
  memcpy(p, a.dst_mac.b, 6);
  memcpy(p + 6, a.src_mac.b, 6);
  p[12] = kEtherTypeIpv4 >> 8;
  p[13] = kEtherTypeIpv4 & 0xff;
  uint8_t* ip = p + kEthHeader;
  const auto udp_len = static_cast<uint16_t>(kUdpHeader + payload_len);
  // proto's builder: identification 0 and DF, as the ICRC assumes.
  sroce_build_ipv4(ip, a.src, a.dst, a.tos, a.ttl, udp_len);
  if (ip_csum_offload) {
    ip[10] = 0;
    ip[11] = 0;
  }
  sroce_build_udp(ip + kIpv4Header, a.sport, a.dport, udp_len);
}

RxVerdict parse_frame6(std::span<const uint8_t> f, uint16_t udp_port, RxFrame6& out) {
  if (f.size() < kEthHeader) return RxVerdict::kLength;
  if (be16(&f[12]) != kEtherTypeIpv6) return RxVerdict::kNotIpv4;
  if (f.size() < kFrameHeaders6) return RxVerdict::kLength;
  const uint8_t* ip = f.data() + kEthHeader;
  if ((ip[0] >> 4) != 6) return RxVerdict::kNotIpv4;
  if (ip[6] != 17) return RxVerdict::kNotRoce;  // an extension header, or not UDP
  const uint16_t plen = be16(ip + 4);           // IPv6 payload length: UDP header + data
  if (plen < kUdpHeader || plen > f.size() - kEthHeader - kIpv6Header) return RxVerdict::kLength;
  const uint8_t* udp = ip + kIpv6Header;
  if (be16(udp + 2) != udp_port) return RxVerdict::kNotRoce;
  if (be16(udp + 4) != plen) return RxVerdict::kLength;
  const uint32_t w0 = be32(ip);
  memcpy(out.src, ip + 8, 16);
  memcpy(out.dst, ip + 24, 16);
  out.sport = be16(udp);
  out.dport = be16(udp + 2);
  out.tclass = static_cast<uint8_t>(w0 >> 20);
  out.flow_label = w0 & 0xfffff;
  out.hop_limit = ip[7];
  out.payload_off = kFrameHeaders6;
  out.payload_len = plen - kUdpHeader;
  return RxVerdict::kOk;
}

void write_headers6(uint8_t* p, const TxAddr6& a, uint16_t payload_len) {
  memcpy(p, a.dst_mac.b, 6);
  memcpy(p + 6, a.src_mac.b, 6);
  p[12] = kEtherTypeIpv6 >> 8;
  p[13] = kEtherTypeIpv6 & 0xff;
  uint8_t* ip = p + kEthHeader;
  const auto udp_len = static_cast<uint16_t>(kUdpHeader + payload_len);
  sroce_build_ipv6(ip, a.src, a.dst, a.tclass, a.flow_label, a.hop_limit, udp_len);
  sroce_build_udp(ip + kIpv6Header, a.sport, a.dport, udp_len);
  sroce_udp_fill_checksum(ip, kIpv6Header + udp_len);
}

}  // namespace sroce::dpdk
