// The DPDK datapath's framing (dpdk-pmd/src/frame.h): headers it writes are
// what the engine's ICRC assumes and what independent code reads back; every
// kind of frame it must refuse is refused with its reason.
#include <arpa/inet.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "frame.h"
#include "proto/icrc.h"

using namespace sroce::dpdk;

namespace {

constexpr uint32_t kSrc = 0x0a4e0001;  // 10.78.0.1
constexpr uint32_t kDst = 0x0a4e0002;

TxAddr addr() {
  TxAddr a;
  a.dst_mac = MacAddr{{0x02, 0, 0, 0, 0, 0x02}};
  a.src_mac = MacAddr{{0x02, 0, 0, 0, 0, 0x01}};
  a.src = kSrc;
  a.dst = kDst;
  a.sport = 49152 + 7;
  a.dport = 4791;
  a.tos = 0x02;  // ECT(0)
  a.ttl = 64;
  return a;
}

// A frame with a payload of `n` bytes whose last 4 are the ICRC the engine
// would have computed from the addressing alone.
std::vector<uint8_t> frame(size_t n, const TxAddr& a, bool offload = false) {
  std::vector<uint8_t> f(kFrameHeaders + n);
  for (size_t i = 0; i < n; ++i) f[kFrameHeaders + i] = static_cast<uint8_t>(i * 7 + 1);
  sroce_icrc_addr ia{};
  ia.src_gid[10] = ia.src_gid[11] = 0xff;
  ia.dst_gid[10] = ia.dst_gid[11] = 0xff;
  uint32_t s = htonl(a.src), d = htonl(a.dst);
  memcpy(ia.src_gid + 12, &s, 4);
  memcpy(ia.dst_gid + 12, &d, 4);
  ia.src_port = a.sport;
  ia.dst_port = a.dport;
  uint32_t icrc = sroce_icrc_payload(&ia, f.data() + kFrameHeaders, n - 4);
  sroce_icrc_put(f.data() + kFrameHeaders + n - 4, icrc);
  write_headers(f.data(), a, static_cast<uint16_t>(n), offload);
  return f;
}

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

}  // namespace

TEST_CASE("written headers: Ethernet, IPv4 with id 0 and DF, UDP with checksum 0", "[frame]") {
  TxAddr a = addr();
  auto f = frame(64, a);
  CHECK(memcmp(f.data(), a.dst_mac.b, 6) == 0);
  CHECK(memcmp(f.data() + 6, a.src_mac.b, 6) == 0);
  CHECK(be16(&f[12]) == 0x0800);
  const uint8_t* ip = &f[14];
  CHECK(ip[0] == 0x45);
  CHECK(ip[1] == 0x02);
  CHECK(be16(ip + 2) == 20 + 8 + 64);
  CHECK(be16(ip + 4) == 0);       // identification
  CHECK(be16(ip + 6) == 0x4000);  // DF, offset 0
  CHECK(ip[8] == 64);
  CHECK(ip[9] == 17);
  CHECK(ipv4_header_checksum(ip) == 0);  // a valid checksum sums to 0xffff
  const uint8_t* udp = ip + 20;
  CHECK(be16(udp) == a.sport);
  CHECK(be16(udp + 2) == 4791);
  CHECK(be16(udp + 4) == 8 + 64);
  CHECK(be16(udp + 6) == 0);
}

TEST_CASE("the ICRC computed from the addressing matches the ICRC over the real IP packet", "[frame]") {
  // The engine computes the ICRC once, from GIDs and ports (it never sees
  // the IP header); a receiver that recomputes it from the wire (an RNIC,
  // rxe, proto's sroce_icrc_ip) must agree, for any TOS and TTL.
  for (uint8_t tos : {0x00, 0x02, 0x03, 0xb8}) {
    for (uint8_t ttl : {1, 64, 255}) {
      TxAddr a = addr();
      a.tos = tos;
      a.ttl = ttl;
      auto f = frame(1024 + 12, a);
      uint32_t on_wire = sroce_icrc_get(f.data() + f.size() - 4);
      uint32_t recomputed = 0;
      REQUIRE(sroce_icrc_ip(f.data() + kEthHeader, f.size() - kEthHeader - 4, &recomputed) == 0);
      CHECK(recomputed == on_wire);
    }
  }
}

TEST_CASE("checksum offload leaves the IPv4 checksum to the NIC", "[frame]") {
  auto f = frame(64, addr(), true);
  CHECK(be16(&f[14 + 10]) == 0);
  RxFrame r;
  // As received after the NIC filled it in: parse checks it unless the PMD did.
  CHECK(parse_frame(f, 4791, false, r) == RxVerdict::kIpHeader);
  CHECK(parse_frame(f, 4791, true, r) == RxVerdict::kOk);
}

TEST_CASE("parse_frame returns the UDP payload and its addressing", "[frame]") {
  TxAddr a = addr();
  a.tos = 0x03;  // CE
  auto f = frame(300, a);
  f.insert(f.end(), 17, uint8_t{0xee});  // Ethernet padding / trailer is ignored
  RxFrame r;
  REQUIRE(parse_frame(f, 4791, false, r) == RxVerdict::kOk);
  CHECK(r.src == kSrc);
  CHECK(r.dst == kDst);
  CHECK(r.sport == a.sport);
  CHECK(r.dport == 4791);
  CHECK(r.tos == 0x03);
  CHECK(r.payload_off == kFrameHeaders);
  CHECK(r.payload_len == 300);
  CHECK(f[r.payload_off] == 1);
}

TEST_CASE("parse_frame refuses what is not an intact RoCEv2 datagram, with the reason", "[frame]") {
  const auto good = frame(100, addr());
  RxFrame r;
  auto verdict = [&](std::vector<uint8_t> f, uint16_t port = 4791) { return parse_frame(f, port, false, r); };

  auto arp = good;
  arp[12] = 0x08;
  arp[13] = 0x06;
  CHECK(verdict(arp) == RxVerdict::kNotIpv4);
  auto ipv6 = good;
  ipv6[12] = 0x86;
  ipv6[13] = 0xdd;
  CHECK(verdict(ipv6) == RxVerdict::kNotIpv4);
  auto vlan = good;
  vlan[12] = 0x81;
  vlan[13] = 0x00;
  CHECK(verdict(vlan) == RxVerdict::kNotIpv4);
  auto v6hdr = good;
  v6hdr[14] = 0x65;
  CHECK(verdict(v6hdr) == RxVerdict::kNotIpv4);

  auto options = good;
  options[14] = 0x46;
  CHECK(verdict(options) == RxVerdict::kIpHeader);
  auto bad_sum = good;
  bad_sum[14 + 8] ^= 1;  // TTL changed without the checksum
  CHECK(verdict(bad_sum) == RxVerdict::kIpHeader);

  auto frag = good;
  frag[14 + 6] = 0x20;  // MF
  frag[14 + 10] = frag[14 + 11] = 0;
  uint16_t c = ipv4_header_checksum(&frag[14]);
  frag[14 + 10] = static_cast<uint8_t>(c >> 8);
  frag[14 + 11] = static_cast<uint8_t>(c);
  CHECK(verdict(frag) == RxVerdict::kFragment);

  auto tcp = good;
  tcp[14 + 9] = 6;
  tcp[14 + 10] = tcp[14 + 11] = 0;
  c = ipv4_header_checksum(&tcp[14]);
  tcp[14 + 10] = static_cast<uint8_t>(c >> 8);
  tcp[14 + 11] = static_cast<uint8_t>(c);
  CHECK(verdict(tcp) == RxVerdict::kNotRoce);
  CHECK(verdict(good, 4792) == RxVerdict::kNotRoce);

  CHECK(verdict(std::vector<uint8_t>(good.begin(), good.end() - 1)) == RxVerdict::kLength);
  CHECK(verdict(std::vector<uint8_t>(good.begin(), good.begin() + 40)) == RxVerdict::kLength);
  CHECK(verdict(std::vector<uint8_t>(good.begin(), good.begin() + 10)) == RxVerdict::kLength);
  auto udp_len = good;
  udp_len[14 + 20 + 5] ^= 4;  // UDP length disagrees with IP total length
  CHECK(verdict(udp_len) == RxVerdict::kLength);

  // A non-zero UDP checksum is not looked at: the ICRC covers what matters
  // (a kernel sender behind veth leaves a partial one).
  auto csum = good;
  csum[14 + 20 + 6] = 0x12;
  csum[14 + 20 + 7] = 0x34;
  CHECK(verdict(csum) == RxVerdict::kOk);
  CHECK(verdict(good) == RxVerdict::kOk);
}

TEST_CASE("MAC addresses pack into one word and back", "[frame]") {
  MacAddr m{{0xde, 0xad, 0xbe, 0xef, 0x00, 0x01}};
  CHECK(m.packed() == 0xdeadbeef0001ull);
  CHECK(MacAddr::unpack(m.packed()) == m);
  CHECK(MacAddr::unpack(0).packed() == 0);
}

// IPv6 framing (not used by the datapath yet; docs/dpdk.md).
namespace {
TxAddr6 addr6() {
  TxAddr6 a;
  a.dst_mac = MacAddr{{0x02, 0, 0, 0, 0, 0x02}};
  a.src_mac = MacAddr{{0x02, 0, 0, 0, 0, 0x01}};
  inet_pton(AF_INET6, "fd78::1", a.src);
  inet_pton(AF_INET6, "fd78::2", a.dst);
  a.sport = 49152 + 9;
  a.dport = 4791;
  a.tclass = 0x62;
  a.flow_label = 0x12345;
  a.hop_limit = 7;
  return a;
}

std::vector<uint8_t> frame6(size_t n, const TxAddr6& a) {
  std::vector<uint8_t> f(kFrameHeaders6 + n);
  // Through an iterator: g++ 12 -O2 flags the indexed store (-Wstringop-overflow, a false positive).
  uint8_t v = 3;
  for (auto it = f.begin() + kFrameHeaders6; it != f.end(); ++it, v = static_cast<uint8_t>(v + 5)) *it = v;
  sroce_icrc_addr ia{};
  memcpy(ia.src_gid, a.src, 16);
  memcpy(ia.dst_gid, a.dst, 16);
  ia.src_port = a.sport;
  ia.dst_port = a.dport;
  sroce_icrc_put(f.data() + kFrameHeaders6 + n - 4, sroce_icrc_payload(&ia, f.data() + kFrameHeaders6, n - 4));
  write_headers6(f.data(), a, static_cast<uint16_t>(n));
  return f;
}

// RFC 8200 8.1 / RFC 768, written here from the definition: the one's-complement sum of the
// pseudo-header (addresses, UDP length, next header 17) and the UDP datagram is 0xffff.
uint16_t udp6_sum(const std::vector<uint8_t>& f) {
  const uint8_t* ip = f.data() + kEthHeader;
  const size_t ulen = be16(ip + 4);
  uint32_t sum = 0;
  for (size_t i = 8; i < 40; i += 2) sum += be16(ip + i);
  sum += static_cast<uint32_t>(ulen) + 17;
  const uint8_t* u = ip + 40;
  for (size_t i = 0; i + 1 < ulen; i += 2) sum += be16(u + i);
  if (ulen & 1) sum += uint32_t{u[ulen - 1]} << 8;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}
}  // namespace

TEST_CASE("IPv6 headers: traffic class, flow label, hop limit, a valid UDP checksum, the engine's ICRC",
          "[frame]") {
  for (size_t n : {size_t{64}, size_t{1024 + 12}, size_t{333}}) {
    TxAddr6 a = addr6();
    auto f = frame6(n, a);
    CHECK(be16(&f[12]) == 0x86dd);
    const uint8_t* ip = &f[kEthHeader];
    CHECK(ip[0] >> 4 == 6);
    CHECK(((ip[0] & 0xf) << 4 | ip[1] >> 4) == 0x62);
    CHECK(((ip[1] & 0xf) << 16 | ip[2] << 8 | ip[3]) == 0x12345);
    CHECK(be16(ip + 4) == 8 + n);
    CHECK(ip[6] == 17);
    CHECK(ip[7] == 7);
    CHECK(be16(ip + 40 + 6) != 0);  // never 0 over IPv6
    CHECK(udp6_sum(f) == 0xffff);
    uint32_t recomputed = 0;
    REQUIRE(sroce_icrc_ip(ip, f.size() - kEthHeader - 4, &recomputed) == 0);
    CHECK(recomputed == sroce_icrc_get(f.data() + f.size() - 4));
  }
}

TEST_CASE("parse_frame6 returns the payload and the GRH fields, refuses the rest with its reason", "[frame]") {
  TxAddr6 a = addr6();
  auto good = frame6(200, a);
  good.insert(good.end(), 5, uint8_t{0xee});  // trailer ignored
  RxFrame6 r;
  REQUIRE(parse_frame6(good, 4791, r) == RxVerdict::kOk);
  CHECK(memcmp(r.src, a.src, 16) == 0);
  CHECK(memcmp(r.dst, a.dst, 16) == 0);
  CHECK(r.sport == a.sport);
  CHECK(r.dport == 4791);
  CHECK(r.tclass == 0x62);
  CHECK(r.flow_label == 0x12345);
  CHECK(r.hop_limit == 7);
  CHECK(r.payload_off == kFrameHeaders6);
  CHECK(r.payload_len == 200);
  RxFrame r4;
  CHECK(parse_frame(good, 4791, false, r4) == RxVerdict::kNotIpv4);  // the IPv4 parser leaves it
  auto v4 = frame(64, addr());
  CHECK(parse_frame6(v4, 4791, r) == RxVerdict::kNotIpv4);
  auto bad = good;
  bad[kEthHeader] = 0x45;  // version 4 behind an IPv6 EtherType
  CHECK(parse_frame6(bad, 4791, r) == RxVerdict::kNotIpv4);
  bad = good;
  bad[kEthHeader + 6] = 0;  // hop-by-hop options header
  CHECK(parse_frame6(bad, 4791, r) == RxVerdict::kNotRoce);
  CHECK(parse_frame6(good, 4792, r) == RxVerdict::kNotRoce);
  bad = good;
  bad.resize(kFrameHeaders6 + 100);  // truncated
  CHECK(parse_frame6(bad, 4791, r) == RxVerdict::kLength);
  bad = good;
  bad[kEthHeader + 40 + 5] ^= 1;  // UDP length disagrees
  CHECK(parse_frame6(bad, 4791, r) == RxVerdict::kLength);
  CHECK(parse_frame6(std::span<const uint8_t>(good.data(), 20), 4791, r) == RxVerdict::kLength);
}
