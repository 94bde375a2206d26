// Routing (BFS shortest paths) and ECMP over equal-cost next hops: the UDP
// source port alone must spread flows over the paths.
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "fabric_fixture.h"

using namespace sroce;
using namespace sroce::sim;
using sroce::sim::test::ip;

namespace {
struct Clos {
  Simulator sim{1};
  Network net{sim};
  Endpoint* e1;
  Endpoint* e2;
  Switch* leaf0;
  Switch* leaf1;
  std::vector<Switch*> spines;
  std::vector<Link*> up;  // leaf0 -> spine s
  explicit Clos(uint32_t k) {
    leaf0 = &net.add_switch("leaf0");
    leaf1 = &net.add_switch("leaf1");
    e1 = &net.add_endpoint("e1", ip(1));
    e2 = &net.add_endpoint("e2", ip(2));
    net.connect(*e1, *leaf0, LinkConfig{});
    net.connect(*e2, *leaf1, LinkConfig{});
    for (uint32_t s = 0; s < k; ++s) {
      spines.push_back(&net.add_switch("spine" + std::to_string(s)));
      up.push_back(net.connect(*leaf0, *spines.back(), LinkConfig{}).first);
      net.connect(*leaf1, *spines.back(), LinkConfig{});
    }
    net.compute_routes();
  }
  void send(uint16_t sport, uint32_t psn) {
    PacketMeta m;
    m.src = e1->addr();
    m.dst = e2->addr();
    m.src_port = sport;
    std::array<std::byte, 200> buf;
    const size_t n = make_ud_send(buf, m, 1, psn, 32, 0);
    e1->send(std::span<const std::byte>(buf.data(), n), m, sim.now());
  }
  size_t spine_of_last() const {
    for (size_t s = 0; s < up.size(); ++s)
      if (up[s]->stats().tx_frames != 0) return s;
    return up.size();
  }
};
}  // namespace

TEST_CASE("BFS routes: a leaf has one next hop per spine toward a remote host", "[sim][ecmp]") {
  Clos c(4);
  CHECK(c.leaf0->next_hops(c.e2->addr()).size() == 4);
  CHECK(c.leaf0->next_hops(c.e1->addr()).size() == 1);
  for (Switch* s : c.spines) {
    REQUIRE(s->next_hops(c.e2->addr()).size() == 1);
    CHECK(&s->next_hops(c.e2->addr())[0]->to() == c.leaf1);
  }
  CHECK(c.leaf0->next_hops(ip(99)).empty());
}

TEST_CASE("ECMP spreads UDP source ports evenly over the spines", "[sim][ecmp]") {
  Clos c(4);
  const int n = 8000;
  for (int i = 0; i < n; ++i) c.send(static_cast<uint16_t>(49152 + i), static_cast<uint32_t>(i));
  c.sim.run();
  CHECK(c.e2->arrivals().size() == static_cast<size_t>(n));
  for (Link* l : c.up) {
    // Binomial(8000, 1/4): sd ~ 39; allow 5 sd.
    CHECK(std::abs(static_cast<double>(l->stats().tx_frames) - n / 4.0) < 200);
  }
}

TEST_CASE("one 5-tuple always takes one path, so a lane keeps its order", "[sim][ecmp]") {
  std::set<size_t> spines_used;
  for (uint16_t port : {50000, 50001, 50002, 50003, 50004, 50005, 50006, 50007}) {
    Clos c(4);
    for (uint32_t i = 0; i < 50; ++i) c.send(port, i);
    c.sim.run();
    const size_t s = c.spine_of_last();
    REQUIRE(s < 4);
    CHECK(c.up[s]->stats().tx_frames == 50);  // all on one spine
    spines_used.insert(s);
    uint64_t prev = 0;
    for (const auto& a : c.e2->arrivals()) {
      CHECK(a.serial >= prev);
      prev = a.serial;
    }
  }
  CHECK(spines_used.size() > 1);  // and different ports do differ
}

TEST_CASE("the ECMP hash covers the whole 5-tuple and the switch seed", "[sim][ecmp]") {
  PacketMeta m;
  m.src = ip(1);
  m.dst = ip(2);
  m.src_port = 50000;
  const uint64_t h = ecmp_hash(m, 1);
  CHECK(ecmp_hash(m, 1) == h);
  CHECK(ecmp_hash(m, 2) != h);
  PacketMeta o = m;
  o.src_port = 50001;
  CHECK(ecmp_hash(o, 1) != h);
  o = m;
  o.dst_port = 4792;
  CHECK(ecmp_hash(o, 1) != h);
  o = m;
  o.src = ip(3);
  CHECK(ecmp_hash(o, 1) != h);
  o = m;
  o.dst = ip(4);
  CHECK(ecmp_hash(o, 1) != h);
}

TEST_CASE("only shortest paths are used, longer detours are not next hops", "[sim][ecmp]") {
  // e1 - s1 - s2 - e2 (3 hops) and s1 - s3 - s4 - s2 (a longer detour).
  Simulator sim(1);
  Network net(sim);
  Switch& s1 = net.add_switch("s1");
  Switch& s2 = net.add_switch("s2");
  Switch& s3 = net.add_switch("s3");
  Switch& s4 = net.add_switch("s4");
  Endpoint& e1 = net.add_endpoint("e1", ip(1));
  Endpoint& e2 = net.add_endpoint("e2", ip(2));
  net.connect(e1, s1, LinkConfig{});
  net.connect(e2, s2, LinkConfig{});
  net.connect(s1, s2, LinkConfig{});
  net.connect(s1, s3, LinkConfig{});
  net.connect(s3, s4, LinkConfig{});
  net.connect(s4, s2, LinkConfig{});
  net.compute_routes();
  REQUIRE(s1.next_hops(e2.addr()).size() == 1);
  CHECK(&s1.next_hops(e2.addr())[0]->to() == &s2);
  // From s3, e2 is 3 hops via s1 and 3 hops via s4: two equal-cost next hops.
  REQUIRE(s3.next_hops(e2.addr()).size() == 2);
  // From s3, e1 is 2 hops via s1 but 4 via s4: only s1.
  REQUIRE(s3.next_hops(e1.addr()).size() == 1);
  CHECK(&s3.next_hops(e1.addr())[0]->to() == &s1);
  // From s4, e2 is 2 hops via s2 (direct), 4 via s3.
  REQUIRE(s4.next_hops(e2.addr()).size() == 1);
  CHECK(&s4.next_hops(e2.addr())[0]->to() == &s2);
}

TEST_CASE("routes recomputed without dead links avoid them", "[sim][ecmp]") {
  Clos c(4);
  c.up[1]->impairments().outages.push_back({Time{100}, Time{200}});
  c.net.compute_routes(Time{150});
  CHECK(c.leaf0->next_hops(c.e2->addr()).size() == 3);
  for (Link* l : c.leaf0->next_hops(c.e2->addr())) CHECK(l != c.up[1]);
  c.net.compute_routes(Time{250});
  CHECK(c.leaf0->next_hops(c.e2->addr()).size() == 4);
}

TEST_CASE("switches decrement the hop limit and drop at zero", "[sim][ecmp]") {
  Clos c(2);
  PacketMeta m;
  m.src = c.e1->addr();
  m.dst = c.e2->addr();
  m.hop_limit = 2;  // leaf0 -> 1, spine -> drop (would reach 0)
  std::array<std::byte, 200> buf;
  const size_t n = make_ud_send(buf, m, 1, 0, 32, 0);
  c.e1->send(std::span<const std::byte>(buf.data(), n), m, c.sim.now());
  m.hop_limit = 64;
  c.e1->send(std::span<const std::byte>(buf.data(), n), m, c.sim.now());
  c.sim.run();
  REQUIRE(c.e2->arrivals().size() == 1);
  CHECK(c.e2->arrivals()[0].meta.hop_limit == 61);  // three switches
}
