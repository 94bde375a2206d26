// QP1 of the kernel path (userspace/daemon/src/gsi.h): the UD datagram a
// GSI_SEND becomes, read back by the proto parser and checked against an
// ICRC computed over a whole IP packet; datagrams for QP1 turned into
// GSI_RECV headers; the transmit queue's bounds.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "gsi.h"
#include "gsi_socket.h"
#include "proto/icrc.h"
#include "proto/packet.h"
#include "../skip.h"  // SROCE_SKIP

using namespace sroce;
using namespace sroce::daemon;

namespace {

sroce_kgsi make_header(const Gid& s, const Gid& d, uint32_t len) {
  sroce_kgsi h{};
  memcpy(h.sgid, s.raw, 16);
  memcpy(h.dgid, d.raw, 16);
  h.remote_qpn = 1;
  h.qkey = kGsiQkey;
  h.pkey = 0xffff;
  h.traffic_class = 0x68;
  h.hop_limit = 17;
  h.flow_label = 0x12345;
  h.len = len;
  return h;
}

std::vector<std::byte> make_mad(size_t n, uint8_t seed) {
  std::vector<std::byte> m(n);
  for (size_t i = 0; i < n; ++i) m[i] = std::byte(static_cast<uint8_t>(seed + i * 7));
  return m;
}

Gid v6(uint8_t last) {
  Gid g;
  g.raw[0] = 0xfd;
  g.raw[1] = 0x01;
  g.raw[15] = last;
  return g;
}

// The ICRC of the datagram as it would leave: a whole IPv4/UDP packet built by
// proto's header writers, so an error in the payload-only shortcut shows.
uint32_t icrc_whole_ipv4(const PacketMeta& m, std::span<const std::byte> payload) {
  std::vector<uint8_t> pkt(20 + 8 + payload.size());
  const uint16_t udp_len = static_cast<uint16_t>(8 + payload.size());
  size_t o = sroce_build_ipv4(pkt.data(), m.src.ipv4(), m.dst.ipv4(), m.traffic_class,
                              m.hop_limit, udp_len);
  o += sroce_build_udp(pkt.data() + o, m.src_port, m.dst_port, udp_len);
  memcpy(pkt.data() + o, payload.data(), payload.size());
  uint32_t icrc = 0;
  REQUIRE(sroce_icrc_ip(pkt.data(), pkt.size() - SROCE_ICRC_LEN, &icrc) == 0);
  return icrc;
}

}  // namespace

TEST_CASE("a GSI_SEND becomes a UD SEND_ONLY to the remote QP with DETH SrcQP 1", "[gsi]") {
  const Gid a = Gid::from_ipv4(0x0a010001), b = Gid::from_ipv4(0x0a010002);
  auto mad = make_mad(256, 3);
  sroce_kgsi h = make_header(a, b, 256);
  h.remote_qpn = 0x123456;
  h.qkey = 0x11223344;
  std::array<std::byte, kGsiMaxPacket> buf{};
  PacketMeta m;
  size_t len = gsi_encode(h, mad, 4791, 77, buf, m);
  REQUIRE(len == 12 + 8 + 256 + 4);
  CHECK(m.src == a);
  CHECK(m.dst == b);
  CHECK(m.src_port == 4791);
  CHECK(m.dst_port == 4791);
  CHECK(m.traffic_class == 0x68);
  CHECK(m.hop_limit == 17);

  sroce_pkt pkt;
  REQUIRE(sroce_parse(reinterpret_cast<const uint8_t*>(buf.data()), len, &pkt) == SROCE_PARSE_OK);
  CHECK(pkt.bth.opcode == 0x64);  // UD SEND_ONLY (IBA table 38)
  CHECK(pkt.bth.dqpn == 0x123456);
  CHECK(pkt.bth.pkey == 0xffff);
  CHECK(pkt.bth.psn == 77);
  CHECK(pkt.bth.pad == 0);
  CHECK(pkt.deth.qkey == 0x11223344);
  CHECK(pkt.deth.sqpn == 1);
  REQUIRE(pkt.payload_len == 256);
  CHECK(memcmp(pkt.payload, mad.data(), 256) == 0);
  CHECK(pkt.icrc == icrc_whole_ipv4(m, std::span(buf.data(), len)));
}

TEST_CASE("a MAD that is not a multiple of 4 bytes is padded (IBA 9.2)", "[gsi]") {
  const Gid a = Gid::from_ipv4(0x0a010001), b = Gid::from_ipv4(0x0a010002);
  auto mad = make_mad(26, 9);
  sroce_kgsi h = make_header(a, b, 26);
  std::array<std::byte, kGsiMaxPacket> buf{};
  PacketMeta m;
  size_t len = gsi_encode(h, mad, 4791, 0, buf, m);
  REQUIRE(len == 12 + 8 + 28 + 4);
  sroce_kgsi back;
  std::span<const std::byte> got;
  REQUIRE(gsi_decode(std::span(buf.data(), len), m, true, back, got) == GsiDrop::kNone);
  REQUIRE(got.size() == 26);
  CHECK(memcmp(got.data(), mad.data(), 26) == 0);
}

TEST_CASE("what gsi_encode refuses", "[gsi]") {
  const Gid a = Gid::from_ipv4(0x0a010001), b = Gid::from_ipv4(0x0a010002);
  std::array<std::byte, kGsiMaxPacket> buf{};
  PacketMeta m;
  auto big = make_mad(SROCE_KGSI_MAX_MAD + 4, 1);
  CHECK(gsi_encode(make_header(a, b, static_cast<uint32_t>(big.size())), big, 4791, 0, buf, m) == 0);
  auto mad = make_mad(256, 1);
  CHECK(gsi_encode(make_header(a, b, 255), mad, 4791, 0, buf, m) == 0);  // len disagrees
  CHECK(gsi_encode(make_header(a, v6(2), 256), mad, 4791, 0, buf, m) == 0);  // mixed families
  std::array<std::byte, 100> small{};
  CHECK(gsi_encode(make_header(a, b, 256), mad, 4791, 0, small, m) == 0);
  CHECK(gsi_encode(make_header(a, b, 0), std::span<const std::byte>{}, 4791, 0, buf, m) == 0);
}

TEST_CASE("a datagram for QP1 becomes a GSI_RECV naming its sender (IPv4 and IPv6)", "[gsi]") {
  const bool ipv6 = GENERATE(false, true);
  const Gid a = ipv6 ? v6(1) : Gid::from_ipv4(0x0a010001);
  const Gid b = ipv6 ? v6(2) : Gid::from_ipv4(0x0a010002);
  auto mad = make_mad(256, 5);
  // Host a sends from its QP1 to host b's QP1.
  sroce_kgsi h = make_header(a, b, 256);
  std::array<std::byte, kGsiMaxPacket> buf{};
  PacketMeta sent;
  size_t len = gsi_encode(h, mad, 4791, 5, buf, sent);
  REQUIRE(len > 0);
  auto pkt = std::span<const std::byte>(buf.data(), len);
  CHECK(gsi_is_qp1(pkt));
  // Host b receives it: the datapath's view of the addressing.
  PacketMeta rx = sent;
  rx.traffic_class = 0x69;  // ECN bits may change on the way; masked in the ICRC
  rx.hop_limit = 63;
  sroce_kgsi r;
  std::span<const std::byte> got;
  REQUIRE(gsi_decode(pkt, rx, true, r, got) == GsiDrop::kNone);
  CHECK(memcmp(r.sgid, a.raw, 16) == 0);  // the module answers to it (ib_init_ah_attr_from_wc)
  CHECK(memcmp(r.dgid, b.raw, 16) == 0);
  CHECK(r.remote_qpn == 1);               // DETH SrcQP
  CHECK(r.qkey == kGsiQkey);
  CHECK(r.pkey == 0xffff);
  CHECK(r.traffic_class == 0x69);
  CHECK(r.hop_limit == 63);
  CHECK(r.len == 256);
  REQUIRE(got.size() == 256);
  CHECK(memcmp(got.data(), mad.data(), 256) == 0);
}

TEST_CASE("datagrams for QP1 that are dropped, and why", "[gsi]") {
  const Gid a = Gid::from_ipv4(0x0a010001), b = Gid::from_ipv4(0x0a010002);
  auto mad = make_mad(256, 5);
  std::array<std::byte, kGsiMaxPacket> buf{};
  PacketMeta m;
  size_t len = gsi_encode(make_header(a, b, 256), mad, 4791, 0, buf, m);
  REQUIRE(len > 0);
  sroce_kgsi r;
  std::span<const std::byte> got;

  SECTION("a flipped payload bit fails the ICRC") {
    buf[40] ^= std::byte{1};
    CHECK(gsi_decode(std::span(buf.data(), len), m, true, r, got) == GsiDrop::kBadIcrc);
    CHECK(gsi_decode(std::span(buf.data(), len), m, false, r, got) == GsiDrop::kNone);
  }
  SECTION("another source port changes the ICRC too (UDP header is covered)") {
    PacketMeta other = m;
    other.src_port = 50000;
    CHECK(gsi_decode(std::span(buf.data(), len), other, true, r, got) == GsiDrop::kBadIcrc);
  }
  SECTION("an RC SEND to QP1 is not a MAD") {
    buf[0] = std::byte{0x04};  // RC SEND_ONLY: no DETH
    CHECK(gsi_decode(std::span(buf.data(), len), m, false, r, got) == GsiDrop::kNotUdSend);
  }
  SECTION("truncated") {
    CHECK(gsi_decode(std::span(buf.data(), 10), m, false, r, got) == GsiDrop::kMalformed);
    CHECK_FALSE(gsi_is_qp1(std::span(buf.data(), 10)));
  }
  SECTION("another QP is not QP1's") {
    buf[7] = std::byte{2};
    CHECK_FALSE(gsi_is_qp1(std::span(buf.data(), len)));
  }
}

TEST_CASE("the transmit queue keeps order, bounds itself and numbers PSNs", "[gsi]") {
  const Gid a = Gid::from_ipv4(0x0a010001), b = Gid::from_ipv4(0x0a010002);
  GsiTxQueue q;
  for (size_t i = 0; i < GsiTxQueue::kSlots; ++i) {
    auto mad = make_mad(256, static_cast<uint8_t>(i));
    REQUIRE(q.push(make_header(a, b, 256), mad, 4791));
  }
  auto extra = make_mad(256, 0xee);
  CHECK_FALSE(q.push(make_header(a, b, 256), extra, 4791));  // full: dropped
  CHECK(q.size() == GsiTxQueue::kSlots);
  std::array<std::byte, Engine::kMaxPacket> out{};
  for (size_t i = 0; i < GsiTxQueue::kSlots; ++i) {
    auto t = q.pop(out, Time{42});
    REQUIRE(t);
    CHECK(t->send_at == Time{42});
    sroce_pkt pkt;
    REQUIRE(sroce_parse(reinterpret_cast<const uint8_t*>(out.data()), t->len, &pkt) ==
            SROCE_PARSE_OK);
    CHECK(pkt.bth.psn == i);
    CHECK(pkt.payload[0] == static_cast<uint8_t>(i));  // make_mad's first byte is its seed
  }
  CHECK(q.empty());
  CHECK_FALSE(q.pop(out, Time{43}));
}

TEST_CASE("QP1 over IPv6: a MAD sent through the socket arrives whole with its ICRC", "[gsi]") {
  // Loopback ::1 stands for the two hosts: the kernel builds the IPv6 and UDP
  // headers, so the ICRC (over the headers sroce assumes, Annex A17.3.3) is
  // checked against what really went out.
  const uint16_t port = static_cast<uint16_t>(20000 + getpid() % 9000);
  auto s = Gsi6Socket::open(port, "");
  if (!s && (s.error().code == EAFNOSUPPORT || s.error().code == EADDRNOTAVAIL)) {
    SROCE_SKIP("no IPv6 here: " << s.error().message);
  }
  REQUIRE(s);
  Gid lo6;
  lo6.raw[15] = 1;
  auto mad = make_mad(256, 11);
  sroce_kgsi h = make_header(lo6, lo6, 256);
  h.remote_qpn = 1;
  std::array<std::byte, kGsiMaxPacket> buf{};
  PacketMeta m;
  size_t len = gsi_encode(h, mad, port, 9, buf, m);
  REQUIRE(len > 0);
  REQUIRE((*s)->send(std::span(buf.data(), len), m) == 0);
  std::array<std::byte, Engine::kMaxPacket> in{};
  PacketMeta rm;
  ssize_t n = -EAGAIN;
  for (int i = 0; i < 200 && n == -EAGAIN; ++i) {
    n = (*s)->recv(in, rm);
    if (n == -EAGAIN) usleep(1000);
  }
  REQUIRE(n == static_cast<ssize_t>(len));
  CHECK(rm.src == lo6);
  CHECK(rm.dst == lo6);
  CHECK(rm.src_port == port);
  CHECK(rm.traffic_class == 0x68);
  CHECK(rm.hop_limit == 17);
  sroce_kgsi r;
  std::span<const std::byte> got;
  REQUIRE(gsi_decode(std::span(in.data(), static_cast<size_t>(n)), rm, true, r, got) ==
          GsiDrop::kNone);
  REQUIRE(got.size() == 256);
  CHECK(memcmp(got.data(), mad.data(), 256) == 0);
  CHECK((*s)->recv(in, rm) == -EAGAIN);
}
