// CRC-32 and the RoCEv2 ICRC (IBA Annex A17.3.3) against references that share no
// code with proto/: a bit-by-bit CRC-32 written here over a masked copy made here,
// and vectors computed by Python's zlib.crc32. Also the IP/UDP header builders.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "proto/icrc.h"
#include "proto/packet.h"

namespace {

using Bytes = std::vector<uint8_t>;

// --- independent references ------------------------------------------------

// CRC-32 one bit at a time: reflected 0xEDB88320, no pre/post inversion.
uint32_t ref_crc32_raw(uint32_t crc, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ ((crc & 1) ? 0xEDB88320u : 0u);
  }
  return crc;
}

// Annex A17.3.3 written out: ~CRC32(~0; 8 x 0xff, masked IP, masked UDP, masked
// BTH, rest). `pkt` is the IP packet without the ICRC.
uint32_t ref_icrc(const Bytes& pkt) {
  Bytes m(8, 0xff);
  m.insert(m.end(), pkt.begin(), pkt.end());
  uint8_t* ip = m.data() + 8;
  size_t ip_len;
  if ((ip[0] >> 4) == 4) {
    ip_len = (ip[0] & 0xf) * 4u;
    ip[1] = 0xff;   // TOS
    ip[8] = 0xff;   // TTL
    ip[10] = 0xff;  // header checksum
    ip[11] = 0xff;
  } else {
    ip_len = 40;
    ip[0] |= 0x0f;  // traffic class
    ip[1] = 0xff;   // traffic class, flow label
    ip[2] = 0xff;
    ip[3] = 0xff;
    ip[7] = 0xff;  // hop limit
  }
  ip[ip_len + 6] = 0xff;  // UDP checksum
  ip[ip_len + 7] = 0xff;
  ip[ip_len + 8 + 4] = 0xff;  // BTH Resv8a
  return ~ref_crc32_raw(0xffffffffu, m.data(), m.size());
}

uint16_t ref_ones_sum(const uint8_t* p, size_t n, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += (uint32_t)(p[i] << 8 | p[i + 1]);
  if (n & 1) sum += (uint32_t)p[n - 1] << 8;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return (uint16_t)sum;
}

// --- vectors from Python's zlib ---------------------------------------------
// Regenerate with:  /usr/bin/python3 tests/unit/proto/gen_icrc_vectors.py
// (the script builds the same packets by hand with struct.pack and prints these).
// kZlibIpv4: 64 bytes, ICRC 0xd8b35482
const uint8_t kZlibIpv4Packet[] = {
    0x45, 0x02, 0x00, 0x44, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb7, 0x53, 0xc0, 0xa8, 0x01, 0x01,
    0xc0, 0xa8, 0x01, 0x02, 0xc0, 0x00, 0x12, 0xb7, 0x00, 0x30, 0x00, 0x00, 0x04, 0x60, 0xff, 0xff,
    0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x01, 0x23, 0x73, 0x72, 0x6f, 0x63, 0x65, 0x20, 0x49, 0x43,
    0x52, 0x43, 0x20, 0x74, 0x65, 0x73, 0x74, 0x20, 0x76, 0x65, 0x63, 0x74, 0x6f, 0x72, 0x00, 0x00,
};
const uint32_t kZlibIpv4Icrc = 0xd8b35482;
// kZlibIpv6: 84 bytes, ICRC 0xa481eed5
const uint8_t kZlibIpv6Packet[] = {
    0x66, 0x01, 0x23, 0x45, 0x00, 0x30, 0x11, 0x40, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xd1, 0x23,
    0x12, 0xb7, 0x00, 0x30, 0x00, 0x00, 0x0a, 0xb0, 0x80, 0x01, 0x00, 0xab, 0xcd, 0xef,
    0x80, 0xff, 0xff, 0xff, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00,
    0x12, 0x34, 0x00, 0x00, 0x00, 0x05, 0x01, 0x02, 0x03, 0x04, 0x05, 0x00, 0x00, 0x00,
};
const uint32_t kZlibIpv6Icrc = 0xa481eed5;

Bytes v4_gid(uint32_t a) {
  Bytes g(16, 0);
  g[10] = g[11] = 0xff;
  sroce_put_be32(g.data() + 12, a);
  return g;
}

// A RoCEv2 UDP payload built with the proto writers.
Bytes roce_payload(uint8_t opcode, size_t n, uint32_t dqpn, uint32_t psn, bool mig = false) {
  const struct sroce_opinfo* op = sroce_opinfo(opcode);
  const uint8_t pad = (uint8_t)(-n & 3);
  Bytes p(op->hdr_len + n + pad, 0);
  sroce_bth b{};
  b.opcode = opcode;
  b.mig = mig;
  b.pad = pad;
  b.pkey = 0xffff;
  b.dqpn = dqpn;
  b.ack_req = true;
  b.psn = psn;
  sroce_bth_write(p.data(), &b);
  for (size_t i = 0; i < n; i++) p[op->hdr_len + i] = (uint8_t)(i * 7 + 1);
  return p;
}

// IPv4 packet (no ICRC) from the builders.
Bytes ipv4_packet(uint32_t src, uint32_t dst, uint8_t tos, uint8_t ttl, uint16_t sport,
                  const Bytes& roce) {
  const uint16_t udp_len = (uint16_t)(8 + roce.size() + 4);
  Bytes p(28);
  REQUIRE(sroce_build_ipv4(p.data(), src, dst, tos, ttl, udp_len) == 20);
  REQUIRE(sroce_build_udp(p.data() + 20, sport, SROCE_UDP_PORT, udp_len) == 8);
  p.insert(p.end(), roce.begin(), roce.end());
  return p;
}

Bytes ipv6_packet(const Bytes& src, const Bytes& dst, uint8_t tc, uint32_t flow, uint8_t hop,
                  uint16_t sport, const Bytes& roce) {
  const uint16_t udp_len = (uint16_t)(8 + roce.size() + 4);
  Bytes p(48);
  REQUIRE(sroce_build_ipv6(p.data(), src.data(), dst.data(), tc, flow, hop, udp_len) == 40);
  REQUIRE(sroce_build_udp(p.data() + 40, sport, SROCE_UDP_PORT, udp_len) == 8);
  p.insert(p.end(), roce.begin(), roce.end());
  return p;
}

// --- CRC-32 -------------------------------------------------------------------

TEST_CASE("slicing-by-8 tables equal a bit-by-bit recomputation", "[proto][crc]") {
  for (unsigned i = 0; i < 256; i++) {
    const uint8_t b = (uint8_t)i;
    REQUIRE(sroce_crc32_table[0][i] == ref_crc32_raw(0, &b, 1));
  }
  // Table k: byte i followed by k zero bytes.
  for (unsigned k = 1; k < 8; k++) {
    for (unsigned i = 0; i < 256; i++) {
      uint8_t buf[8] = {(uint8_t)i};
      REQUIRE(sroce_crc32_table[k][i] == ref_crc32_raw(0, buf, k + 1));
    }
  }
}

TEST_CASE("CRC-32 check value and agreement at every length and offset", "[proto][crc]") {
  // The catalogued check value of CRC-32/ISO-HDLC: CRC of "123456789".
  const uint8_t check[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  CHECK(~sroce_crc32_update(0xffffffffu, check, 9) == 0xcbf43926u);

  std::mt19937 rng(42);
  Bytes data(300);
  for (auto& b : data) b = (uint8_t)rng();
  for (size_t off = 0; off < 9; off++) {
    for (size_t n = 0; n + off <= data.size(); n++) {
      const uint32_t seed = (uint32_t)rng();
      REQUIRE(sroce_crc32_update(seed, data.data() + off, n) ==
              ref_crc32_raw(seed, data.data() + off, n));
    }
  }
  // Chaining: update(update(c, a), b) == update(c, a ++ b).
  const uint32_t whole = sroce_crc32_update(0xffffffffu, data.data(), 300);
  for (size_t cut = 0; cut <= 300; cut += 13)
    REQUIRE(sroce_crc32_update(sroce_crc32_update(0xffffffffu, data.data(), cut), data.data() + cut,
                               300 - cut) == whole);
}

TEST_CASE("the pseudo-LRH seed is CRC(~0, 8 x 0xff)", "[proto][icrc]") {
  // Linux rxe states the same constant, 0xdebb20e3, in rxe_icrc.c.
  const uint8_t lrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  CHECK(ref_crc32_raw(0xffffffffu, lrh, 8) == 0xdebb20e3u);
}

// --- ICRC -------------------------------------------------------------------------

TEST_CASE("ICRC matches Python zlib vectors", "[proto][icrc]") {
  SECTION("IPv4, RC SEND ONLY, pad 2") {
    const Bytes pkt(kZlibIpv4Packet, kZlibIpv4Packet + sizeof kZlibIpv4Packet);
    uint32_t icrc = 0;
    REQUIRE(sroce_icrc_ip(pkt.data(), pkt.size(), &icrc) == 0);
    CHECK(icrc == kZlibIpv4Icrc);
    CHECK(ref_icrc(pkt) == kZlibIpv4Icrc);

    // The builders produce the same bytes as the hand-assembled packet.
    const uint8_t text[] = "sroce ICRC test vector";
    Bytes roce(12 + 22 + 2, 0);
    sroce_bth b{};
    b.opcode = SROCE_OP_SEND_ONLY;
    b.mig = true;
    b.pad = 2;
    b.pkey = 0xffff;
    b.dqpn = 0x11;
    b.ack_req = true;
    b.psn = 0x123;
    sroce_bth_write(roce.data(), &b);
    for (size_t i = 0; i < 22; i++) roce[12 + i] = text[i];
    const Bytes built = ipv4_packet(0xc0a80101, 0xc0a80102, 0x02, 64, 0xc000, roce);
    CHECK(built == pkt);

    // And the payload-only form gives the same ICRC from the addressing.
    sroce_icrc_addr a{};
    const Bytes s = v4_gid(0xc0a80101), d = v4_gid(0xc0a80102);
    std::copy(s.begin(), s.end(), a.src_gid);
    std::copy(d.begin(), d.end(), a.dst_gid);
    a.src_port = 0xc000;
    a.dst_port = SROCE_UDP_PORT;
    CHECK(sroce_icrc_payload(&a, roce.data(), roce.size()) == kZlibIpv4Icrc);
  }
  SECTION("IPv6, RC RDMA WRITE ONLY, pad 3") {
    const Bytes pkt(kZlibIpv6Packet, kZlibIpv6Packet + sizeof kZlibIpv6Packet);
    uint32_t icrc = 0;
    REQUIRE(sroce_icrc_ip(pkt.data(), pkt.size(), &icrc) == 0);
    CHECK(icrc == kZlibIpv6Icrc);
    CHECK(ref_icrc(pkt) == kZlibIpv6Icrc);

    sroce_icrc_addr a{};
    std::copy(pkt.begin() + 8, pkt.begin() + 24, a.src_gid);
    std::copy(pkt.begin() + 24, pkt.begin() + 40, a.dst_gid);
    a.src_port = 0xd123;
    a.dst_port = SROCE_UDP_PORT;
    CHECK(sroce_icrc_payload(&a, pkt.data() + 48, pkt.size() - 48) == kZlibIpv6Icrc);
  }
}

TEST_CASE("ICRC of built packets equals the bit-by-bit reference", "[proto][icrc]") {
  std::mt19937 rng(7);
  for (uint8_t opc : std::initializer_list<uint8_t>{
           SROCE_OP_SEND_ONLY, SROCE_OP_WRITE_FIRST, SROCE_OP_ACK, SROCE_OP_CMP_SWAP,
           SROCE_OP_READ_RESP_MIDDLE, (uint8_t)(SROCE_TRANSPORT_UD | (unsigned)SROCE_OP_SEND_ONLY),
           SROCE_OP_CNP}) {
    const bool data = sroce_opinfo(opc)->flags & SROCE_HAS_PAYLOAD;
    for (size_t n : {0, 1, 2, 3, 4, 7, 64, 1023, 4096}) {
      if (!data && n) continue;
      const Bytes roce = roce_payload(opc, n, rng() & 0xffffff, rng() & 0xffffff);
      INFO(sroce_opinfo(opc)->name << " n=" << n);

      const uint32_t s4 = rng(), d4 = rng();
      const uint16_t sport = (uint16_t)(0xc000 | (rng() & 0x3fff));
      const Bytes p4 = ipv4_packet(s4, d4, (uint8_t)rng(), (uint8_t)rng(), sport, roce);
      uint32_t ip_icrc = 0;
      REQUIRE(sroce_icrc_ip(p4.data(), p4.size(), &ip_icrc) == 0);
      CHECK(ip_icrc == ref_icrc(p4));
      // The payload form over the same addressing (what a UDP-socket
      // receiver can compute) agrees with the full-packet form.
      sroce_icrc_addr a{};
      const Bytes sg = v4_gid(s4), dg = v4_gid(d4);
      std::copy(sg.begin(), sg.end(), a.src_gid);
      std::copy(dg.begin(), dg.end(), a.dst_gid);
      a.src_port = sport;
      a.dst_port = SROCE_UDP_PORT;
      CHECK(sroce_icrc_payload(&a, roce.data(), roce.size()) == ip_icrc);

      Bytes s6(16), d6(16);
      for (auto& b : s6) b = (uint8_t)rng();
      for (auto& b : d6) b = (uint8_t)rng();
      s6[0] = 0x20;  // not IPv4-mapped
      const Bytes p6 = ipv6_packet(s6, d6, (uint8_t)rng(), rng(), (uint8_t)rng(), sport, roce);
      REQUIRE(sroce_icrc_ip(p6.data(), p6.size(), &ip_icrc) == 0);
      CHECK(ip_icrc == ref_icrc(p6));
      std::copy(s6.begin(), s6.end(), a.src_gid);
      std::copy(d6.begin(), d6.end(), a.dst_gid);
      CHECK(sroce_icrc_payload(&a, roce.data(), roce.size()) == ip_icrc);
    }
  }
}

TEST_CASE("payload ICRC takes only ::ffff:a.b.c.d GIDs for IPv4", "[proto][icrc]") {
  const Bytes roce = roce_payload(SROCE_OP_SEND_ONLY, 8, 5, 6);
  // ::ff00:0a00:0001 is an ordinary IPv6 address, not IPv4-mapped (RFC 4291 2.5.5.2).
  for (int variant = 0; variant < 3; variant++) {
    Bytes s = v4_gid(0x0a000001), d = v4_gid(0x0a000002);
    if (variant == 0)
      s[11] = 0x00;
    else if (variant == 1)
      d[10] = 0xfe;
    else
      s[0] = 0x20;
    const Bytes p6 = ipv6_packet(s, d, 0, 0, 64, 7000, roce);
    uint32_t want = 0;
    REQUIRE(sroce_icrc_ip(p6.data(), p6.size(), &want) == 0);
    sroce_icrc_addr a{};
    std::copy(s.begin(), s.end(), a.src_gid);
    std::copy(d.begin(), d.end(), a.dst_gid);
    a.src_port = 7000;
    a.dst_port = SROCE_UDP_PORT;
    INFO("variant " << variant);
    CHECK(sroce_icrc_payload(&a, roce.data(), roce.size()) == want);
  }
}

TEST_CASE("ICRC ignores exactly the variant fields", "[proto][icrc]") {
  const Bytes roce = roce_payload(SROCE_OP_SEND_ONLY, 40, 0x42, 0x99);
  const Bytes p4 = ipv4_packet(0x0a000001, 0x0a000002, 0, 64, 50000, roce);
  uint32_t base = 0;
  REQUIRE(sroce_icrc_ip(p4.data(), p4.size(), &base) == 0);

  // Variant: TOS (1), TTL (8), IP checksum (10, 11), UDP checksum (26, 27), Resv8a (32).
  const size_t variant4[] = {1, 8, 10, 11, 26, 27, 32};
  for (size_t i = 0; i < p4.size(); i++) {
    Bytes q = p4;
    q[i] ^= 0x5a;
    uint32_t c = 0;
    const bool still_ip = sroce_icrc_ip(q.data(), q.size(), &c) == 0;
    const bool is_variant =
        std::find(std::begin(variant4), std::end(variant4), i) != std::end(variant4);
    INFO("IPv4 byte " << i);
    if (is_variant)
      CHECK(c == base);
    else if (still_ip)
      CHECK(c != base);
  }

  Bytes s(16, 0x11), d(16, 0x22);
  const Bytes p6 = ipv6_packet(s, d, 0, 0, 255, 50000, roce);
  REQUIRE(sroce_icrc_ip(p6.data(), p6.size(), &base) == 0);
  // Version nibble stays covered; TC + flow label (low nibble of 0, 1..3), hop
  // limit (7), UDP checksum (46, 47), Resv8a (52) do not.
  for (size_t i = 0; i < p6.size(); i++) {
    for (uint8_t flip : {0x01, 0x10, 0x80}) {
      Bytes q = p6;
      q[i] ^= flip;
      uint32_t c = 0;
      const bool still_ip = sroce_icrc_ip(q.data(), q.size(), &c) == 0;
      const bool is_variant =
          (i == 0 && flip == 0x01) || (i >= 1 && i <= 3) || i == 7 || i == 46 || i == 47 || i == 52;
      INFO("IPv6 byte " << i << " flip " << int(flip));
      if (is_variant)
        CHECK(c == base);
      else if (still_ip)
        CHECK(c != base);
    }
  }
}

TEST_CASE("sroce_icrc_ip rejects what is not IP/UDP or too short", "[proto][icrc]") {
  const Bytes roce = roce_payload(SROCE_OP_ACK, 0, 1, 1);
  const Bytes p4 = ipv4_packet(1, 2, 0, 64, 1000, roce);
  uint32_t c = 0;
  CHECK(sroce_icrc_ip(p4.data(), 0, &c) == -1);
  CHECK(sroce_icrc_ip(p4.data(), 20 + 8 + 11, &c) == -1);
  CHECK(sroce_icrc_ip(p4.data(), 20 + 8 + 12, &c) == 0);
  Bytes q = p4;
  q[9] = 6;  // TCP
  CHECK(sroce_icrc_ip(q.data(), q.size(), &c) == -1);
  q = p4;
  q[0] = 0x44;  // IHL 4 < 5
  CHECK(sroce_icrc_ip(q.data(), q.size(), &c) == -1);
  q = p4;
  q[0] = 0x55;  // version 5
  CHECK(sroce_icrc_ip(q.data(), q.size(), &c) == -1);
  Bytes s(16, 1), d(16, 2);
  Bytes p6 = ipv6_packet(s, d, 0, 0, 1, 1000, roce);
  CHECK(sroce_icrc_ip(p6.data(), 40 + 8 + 11, &c) == -1);
  p6[6] = 0;  // hop-by-hop extension header
  CHECK(sroce_icrc_ip(p6.data(), p6.size(), &c) == -1);
}

// --- builders ----------------------------------------------------------------------

TEST_CASE("IPv4 builder: id 0, DF, valid header checksum", "[proto][build]") {
  uint8_t h[20];
  REQUIRE(sroce_build_ipv4(h, 0x0a000001, 0xc0a80a14, 0x03, 17, 1000) == 20);
  CHECK(h[0] == 0x45);
  CHECK(h[1] == 0x03);
  CHECK(sroce_get_be16(h + 2) == 1020);
  CHECK(sroce_get_be16(h + 4) == 0);       // identification
  CHECK(sroce_get_be16(h + 6) == 0x4000);  // DF, offset 0
  CHECK(h[8] == 17);
  CHECK(h[9] == 17);
  CHECK(sroce_get_be32(h + 12) == 0x0a000001);
  CHECK(sroce_get_be32(h + 16) == 0xc0a80a14);
  // RFC 1071: the one's-complement sum over a valid header is 0xffff.
  CHECK(ref_ones_sum(h, 20) == 0xffff);
  std::mt19937 rng(3);
  for (int i = 0; i < 1000; i++) {
    sroce_build_ipv4(h, rng(), rng(), (uint8_t)rng(), (uint8_t)rng(), (uint16_t)rng());
    REQUIRE(ref_ones_sum(h, 20) == 0xffff);
  }
}

TEST_CASE("IPv6 and UDP builders", "[proto][build]") {
  Bytes s(16), d(16);
  for (int i = 0; i < 16; i++) {
    s[i] = (uint8_t)i;
    d[i] = (uint8_t)(0xf0 + i);
  }
  uint8_t h[40];
  REQUIRE(sroce_build_ipv6(h, s.data(), d.data(), 0xb8, 0xfedcba98, 3, 77) == 40);
  CHECK(h[0] == 0x6b);  // version 6, TC 0xb8
  CHECK(h[1] == 0x8c);  // TC low nibble, flow label 0xcba98 (masked to 20 bits)
  CHECK(h[2] == 0xba);
  CHECK(h[3] == 0x98);
  CHECK(sroce_get_be16(h + 4) == 77);
  CHECK(h[6] == 17);
  CHECK(h[7] == 3);
  CHECK(Bytes(h + 8, h + 24) == s);
  CHECK(Bytes(h + 24, h + 40) == d);

  uint8_t u[8];
  REQUIRE(sroce_build_udp(u, 0xc001, SROCE_UDP_PORT, 60) == 8);
  const Bytes want{0xc0, 0x01, 0x12, 0xb7, 0x00, 60, 0x00, 0x00};
  CHECK(Bytes(u, u + 8) == want);
}

TEST_CASE("UDP checksum fill verifies under RFC 768 / RFC 8200", "[proto][build]") {
  std::mt19937 rng(11);
  for (size_t n : {0, 1, 5, 100, 1001}) {
    const Bytes roce = roce_payload(SROCE_OP_SEND_ONLY, n, 3, 4);
    Bytes s(16), d(16);
    for (auto& b : s) b = (uint8_t)rng();
    for (auto& b : d) b = (uint8_t)rng();
    Bytes p6 = ipv6_packet(s, d, 0, 0, 64, 1234, roce);
    p6.insert(p6.end(), {0xaa, 0xbb, 0xcc, 0xdd});  // ICRC bytes are UDP data
    uint32_t before = 0, after = 0;
    REQUIRE(sroce_icrc_ip(p6.data(), p6.size() - 4, &before) == 0);
    REQUIRE(sroce_udp_fill_checksum(p6.data(), p6.size()) == 0);
    CHECK(sroce_get_be16(p6.data() + 46) != 0);
    // Receiver's check: pseudo header + UDP segment sums to 0xffff.
    const size_t ulen = p6.size() - 40;
    Bytes pseudo(p6.begin() + 8, p6.begin() + 40);
    pseudo.insert(pseudo.end(), {0, 0, (uint8_t)(ulen >> 8), (uint8_t)ulen, 0, 0, 0, 17});
    uint32_t sum = ref_ones_sum(pseudo.data(), pseudo.size());
    CHECK(ref_ones_sum(p6.data() + 40, ulen, sum) == 0xffff);
    // The checksum is masked in the ICRC.
    REQUIRE(sroce_icrc_ip(p6.data(), p6.size() - 4, &after) == 0);
    CHECK(before == after);

    Bytes p4 = ipv4_packet(rng(), rng(), 0, 64, 4321, roce);
    p4.insert(p4.end(), {1, 2, 3, 4});
    REQUIRE(sroce_udp_fill_checksum(p4.data(), p4.size()) == 0);
    Bytes ps4(p4.begin() + 12, p4.begin() + 20);
    const size_t ulen4 = p4.size() - 20;
    ps4.insert(ps4.end(), {0, 17, (uint8_t)(ulen4 >> 8), (uint8_t)ulen4});
    CHECK(ref_ones_sum(p4.data() + 20, ulen4, ref_ones_sum(ps4.data(), ps4.size())) == 0xffff);
  }
  // Lengths that do not fit are refused.
  Bytes p = ipv4_packet(1, 2, 0, 64, 1, roce_payload(SROCE_OP_ACK, 0, 1, 1));
  CHECK(sroce_udp_fill_checksum(p.data(), p.size()) == -1);  // UDP length counts the ICRC
  p.insert(p.end(), {0, 0, 0, 0});
  CHECK(sroce_udp_fill_checksum(p.data(), p.size()) == 0);
  CHECK(sroce_udp_fill_checksum(p.data(), 27) == -1);
}

}  // namespace
