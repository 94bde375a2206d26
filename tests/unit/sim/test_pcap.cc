// pcap output: a well-formed file (global header, records, Ethernet/IPv4/UDP
// around RoCEv2 with a matching ICRC), and byte-identical across runs with the
// same seed.
#include <catch2/catch.hpp>
#include <cstring>
#include <set>

#include "fabric_fixture.h"
#include "proto/icrc.h"
#include "sroce/sim/pcap.h"

using namespace sroce;
using namespace sroce::sim;
using sroce::sim::test::ip;

namespace {
uint32_t le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | uint32_t{p[3]} << 24; }
uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

struct Record {
  uint64_t ns;
  std::vector<uint8_t> frame;
};

// Parses the whole file; fails the test on any structural error.
std::vector<Record> parse_pcap(const std::vector<uint8_t>& b) {
  std::vector<Record> out;
  REQUIRE(b.size() >= 24);
  CHECK(le32(&b[0]) == 0xa1b23c4d);  // nanosecond pcap
  CHECK(le16(&b[4]) == 2);
  CHECK(le16(&b[6]) == 4);
  CHECK(le32(&b[16]) == 65535);
  CHECK(le32(&b[20]) == 1);  // LINKTYPE_ETHERNET
  size_t off = 24;
  while (off < b.size()) {
    REQUIRE(off + 16 <= b.size());
    const uint32_t sec = le32(&b[off]), nsec = le32(&b[off + 4]);
    const uint32_t incl = le32(&b[off + 8]), orig = le32(&b[off + 12]);
    REQUIRE(nsec < 1'000'000'000u);
    REQUIRE(incl == orig);
    REQUIRE(off + 16 + incl <= b.size());
    out.push_back({uint64_t{sec} * 1'000'000'000 + nsec,
                   std::vector<uint8_t>(b.begin() + static_cast<long>(off + 16),
                                        b.begin() + static_cast<long>(off + 16 + incl))});
    off += 16 + incl;
  }
  return out;
}

uint16_t ip_checksum(const uint8_t* h, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i < len; i += 2) sum += be16(h + i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// A small leaf-spine run of synthetic RoCE traffic with every impairment on.
std::vector<uint8_t> run_capture(uint64_t seed, uint64_t* delivered, uint64_t* corrupted) {
  Simulator sim(seed);
  Network net(sim);
  PcapWriter pcap;
  net.set_tap(&pcap);
  LinkConfig lc;
  lc.impair.loss = 0.02;
  lc.impair.reorder = 0.05;
  lc.impair.duplicate = 0.02;
  lc.impair.corrupt = 0.02;
  Switch& l0 = net.add_switch("leaf0");
  Switch& l1 = net.add_switch("leaf1");
  Endpoint& a = net.add_endpoint("a", ip(1));
  Endpoint& b = net.add_endpoint("b", ip(2));
  net.connect(a, l0, LinkConfig{});
  net.connect(b, l1, LinkConfig{});
  for (int s = 0; s < 3; ++s) {
    Switch& sp = net.add_switch("spine" + std::to_string(s));
    net.connect(l0, sp, lc);
    net.connect(l1, sp, lc);
  }
  net.compute_routes();
  Rng r = sim.rng().fork();
  for (uint32_t i = 0; i < 400; ++i) {
    sim.call_at(Time{} + Duration::nanos(50) * i, [&, i](Time now) {
      PacketMeta m;
      m.src = a.addr();
      m.dst = b.addr();
      m.src_port = static_cast<uint16_t>(49152 + r.below(1000));
      std::array<std::byte, 1200> buf;
      const size_t n = make_ud_send(buf, m, 7, i, static_cast<uint32_t>(r.below(1000)), 0xab);
      a.send(std::span<const std::byte>(buf.data(), n), m, now);
    });
  }
  sim.run();
  *delivered = net.total_link_stats().delivered;
  *corrupted = net.total_link_stats().corrupted;
  return pcap.bytes();
}
}  // namespace

TEST_CASE("pcap timestamps are sim time in nanoseconds", "[sim][pcap]") {
  PcapWriter w;
  const uint8_t frame[60] = {};
  w.write_record(Time{} + Duration::millis(1500) + Duration::nanos(123) + Duration::picos(999), frame);
  const auto recs = parse_pcap(w.bytes());
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].ns == 1'500'000'123ull);
  CHECK(recs[0].frame.size() == 60);
}

TEST_CASE("every delivered frame is a well-formed Ethernet/IPv4/UDP/RoCEv2 record", "[sim][pcap]") {
  uint64_t delivered = 0, corrupted = 0;
  const auto bytes = run_capture(11, &delivered, &corrupted);
  const auto recs = parse_pcap(bytes);
  CHECK(recs.size() == delivered);
  REQUIRE(corrupted > 0);
  uint64_t prev = 0, bad_icrc = 0;
  std::set<int> ttls;
  for (const auto& r : recs) {
    CHECK(r.ns >= prev);
    prev = r.ns;
    const uint8_t* f = r.frame.data();
    REQUIRE(r.frame.size() >= 14 + 20 + 8 + 16);
    CHECK(be16(f + 12) == 0x0800);
    CHECK(f[6] == 0x02);  // locally administered MACs
    const uint8_t* iph = f + 14;
    CHECK(iph[0] == 0x45);
    CHECK(be16(iph + 2) == r.frame.size() - 14);
    CHECK(iph[9] == 17);
    CHECK(be16(iph + 6) == 0x4000);  // DF, id 0: what the ICRC assumes
    CHECK(ip_checksum(iph, 20) == 0);
    CHECK((iph[12] == 10 && iph[15] == 1));
    CHECK((iph[16] == 10 && iph[19] == 2));
    ttls.insert(iph[8]);
    const uint8_t* udp = iph + 20;
    CHECK(be16(udp + 2) == 4791);
    CHECK(be16(udp) >= 49152);
    CHECK(be16(udp + 4) == r.frame.size() - 14 - 20);
    uint32_t icrc = 0;
    REQUIRE(sroce_icrc_ip(iph, r.frame.size() - 14 - 4, &icrc) == 0);
    if (icrc != le32(f + r.frame.size() - 4)) ++bad_icrc;
  }
  // Only the frames a link corrupted fail (a corrupted frame is captured once
  // per later hop as well, so at least as many failures as corruptions).
  CHECK(bad_icrc >= corrupted);
  CHECK(bad_icrc <= corrupted * 3);
  CHECK(ttls == std::set<int>{64, 63, 62, 61});  // per hop (3 switches), masked by the ICRC
}

TEST_CASE("the same seed gives byte-identical captures, another seed does not", "[sim][pcap][determinism]") {
  uint64_t d1, d2, d3, c1, c2, c3;
  const auto a = run_capture(5, &d1, &c1);
  const auto b = run_capture(5, &d2, &c2);
  const auto c = run_capture(6, &d3, &c3);
  CHECK(a.size() > 10000);
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("build_frame produces what the ICRC of the engine's payload was computed over",
          "[sim][pcap]") {
  PacketPool pool;
  Packet& p = pool[pool.alloc(kMaxPacketBytes)];
  p.meta.src = ip(1);
  p.meta.dst = ip(2);
  p.meta.src_port = 51234;
  p.meta.traffic_class = 0x02;
  p.meta.hop_limit = 17;
  p.set_len(static_cast<uint32_t>(make_ud_send(p.buffer(), p.meta, 9, 100, 64, 1)));
  REQUIRE(p.len > 0);
  std::array<uint8_t, kMaxFrame> f;
  const size_t n = build_frame(p, {2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, f);
  REQUIRE(n == 14 + 20 + 8 + p.len);
  uint32_t icrc = 0;
  REQUIRE(sroce_icrc_ip(f.data() + 14, n - 14 - 4, &icrc) == 0);
  CHECK(icrc == le32(f.data() + n - 4));
  CHECK(f[14 + 1] == 0x02);  // TOS
  CHECK(f[14 + 8] == 17);    // TTL
  // IPv6 GIDs give an IPv6 frame.
  p.meta.src.raw[0] = 0xfe;
  p.meta.src.raw[1] = 0x80;
  p.meta.dst.raw[0] = 0xfe;
  p.meta.dst.raw[1] = 0x80;
  p.meta.src.raw[10] = p.meta.dst.raw[10] = 0;
  p.set_len(static_cast<uint32_t>(make_ud_send(p.buffer(), p.meta, 9, 100, 64, 1)));
  const size_t n6 = build_frame(p, {2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, f);
  REQUIRE(n6 == 14 + 40 + 8 + p.len);
  CHECK(be16(f.data() + 12) == 0x86dd);
  REQUIRE(sroce_icrc_ip(f.data() + 14, n6 - 14 - 4, &icrc) == 0);
  CHECK(icrc == le32(f.data() + n6 - 4));
}
