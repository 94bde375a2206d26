// The neighbour resolver against a real kernel (root: network namespaces):
// it reads existing entries, makes the kernel ARP for missing ones, follows
// routes to the gateway's MAC, and refuses destinations that are not behind
// its interface.
#include <arpa/inet.h>
#include <net/if.h>

#include <catch2/catch.hpp>
#include <array>
#include <chrono>
#include <optional>
#include <thread>

#include "neighbour.h"
#include "netns.h"
#include "../skip.h"  // SROCE_SKIP

using namespace sroce::dpdk;
using namespace sroce::dpdk::test;

namespace {

uint32_t ipv4(const std::string& s) {
  unsigned a, b, c, d;
  if (sscanf(s.c_str(), "%u.%u.%u.%u", &a, &b, &c, &d) != 4) return 0;
  return a << 24 | b << 16 | c << 8 | d;
}

std::string mac_str(const MacAddr& m) {
  char b[18];
  snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m.b[0], m.b[1], m.b[2], m.b[3], m.b[4], m.b[5]);
  return b;
}

// Polls the table (as the loop would) until `dst` resolves or `ms` pass.
bool wait_resolved(NeighbourTable& t, uint32_t dst, MacAddr& mac, int ms) {
  for (int i = 0; i < ms / 5; ++i) {
    if (t.lookup(dst, mac)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return t.lookup(dst, mac);
}

}  // namespace

TEST_CASE("the resolver takes next-hop MACs from the kernel and makes it ARP when it has none", "[resolver]") {
  if (!have_root()) {
    SROCE_SKIP("needs root (network namespaces)");
  }
  NetnsPair p(79);
  REQUIRE(p.ok);
  // A route through the peer, a permanent entry, and an interface that is
  // not the resolver's.
  REQUIRE(sh(p.in_a("ip route add 10.80.0.0/24 via " + p.addr_b)) == 0);
  REQUIRE(sh(p.in_a("ip neigh add 10.79.0.77 lladdr 02:00:00:00:00:77 dev " + p.dev_a + " nud permanent")) == 0);
  REQUIRE(sh(p.in_a("ip link add sdtother type veth peer name sdtother1")) == 0);
  REQUIRE(sh(p.in_a("ip link set sdtother up")) == 0);
  REQUIRE(sh(p.in_a("ip addr add 10.81.0.1/24 dev sdtother")) == 0);
  // The peer is not in A's table yet: only an ARP exchange can tell its MAC.
  REQUIRE(sh_out(p.in_a("ip neigh show " + p.addr_b)).empty());

  InNetns in(p.ns_a);
  REQUIRE(in.ok());
  const int ifindex = static_cast<int>(if_nametoindex(p.dev_a.c_str()));
  REQUIRE(ifindex > 0);
  NeighbourTable table(64);
  NeighbourResolver r(table, ifindex);

  // A direct query: the permanent entry is there at once; the peer is not.
  bool probe = false, stale = false;
  auto m = r.query(ipv4("10.79.0.77"), &probe, &stale);
  REQUIRE(m);
  CHECK(mac_str(*m) == "02:00:00:00:00:77");
  CHECK_FALSE(probe);
  CHECK_FALSE(r.query(ipv4(p.addr_b), &probe, &stale));
  CHECK(probe);

  MacAddr mac;
  CHECK_FALSE(table.lookup(ipv4(p.addr_b), mac));        // the loop misses: wanted
  CHECK_FALSE(table.lookup(ipv4("10.80.0.5"), mac));     // behind the gateway
  CHECK_FALSE(table.lookup(ipv4("192.0.2.1"), mac));     // no route at all
  CHECK_FALSE(table.lookup(ipv4("10.81.0.9"), mac));     // another interface
  REQUIRE(table.add_static(ipv4("10.79.0.99"), MacAddr{{2, 0, 0, 0, 0, 0x99}}));
  std::string err;
  REQUIRE(r.start(err));

  REQUIRE(wait_resolved(table, ipv4(p.addr_b), mac, 3000));
  CHECK(mac_str(mac) == p.mac_b());
  REQUIRE(wait_resolved(table, ipv4("10.80.0.5"), mac, 3000));
  CHECK(mac_str(mac) == p.mac_b());  // the next hop's MAC, not the destination's
  CHECK(r.stats().probes.load() >= 1);
  CHECK(r.stats().resolved.load() >= 2);
  // The kernel now has the entry too: the probe made it ARP.
  CHECK(sh_out(p.in_a("ip neigh show " + p.addr_b)).find(p.mac_b()) != std::string::npos);

  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(table.lookup(ipv4("192.0.2.1"), mac));
  CHECK_FALSE(table.lookup(ipv4("10.81.0.9"), mac));
  CHECK(r.stats().unroutable.load() >= 2);
  REQUIRE(table.lookup(ipv4("10.79.0.99"), mac));
  CHECK(mac.b[5] == 0x99);
  r.stop();
}

TEST_CASE("the resolver follows a MAC change within its refresh period", "[resolver]") {
  if (!have_root()) {
    SROCE_SKIP("needs root (network namespaces)");
  }
  NetnsPair p(82);
  REQUIRE(p.ok);
  InNetns in(p.ns_a);
  REQUIRE(in.ok());
  REQUIRE(sh("ip neigh add 10.82.0.50 lladdr 02:00:00:00:00:50 dev " + p.dev_a + " nud permanent") == 0);
  NeighbourTable table(64);
  NeighbourResolver r(table, static_cast<int>(if_nametoindex(p.dev_a.c_str())));
  MacAddr mac;
  table.lookup(ipv4("10.82.0.50"), mac);
  std::string err;
  REQUIRE(r.start(err));
  REQUIRE(wait_resolved(table, ipv4("10.82.0.50"), mac, 2000));
  CHECK(mac.b[5] == 0x50);
  REQUIRE(sh("ip neigh replace 10.82.0.50 lladdr 02:00:00:00:00:51 dev " + p.dev_a + " nud permanent") == 0);
  bool changed = false;
  for (int i = 0; i < 60 && !changed; ++i) {  // refresh every second
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    changed = table.lookup(ipv4("10.82.0.50"), mac) && mac.b[5] == 0x51;
  }
  CHECK(changed);
}

// IPv6 (docs/dpdk.md: not used by the datapath yet): the same netlink queries with AF_INET6,
// and the probe makes the kernel run neighbour discovery (RFC 4861) for a missing entry.
TEST_CASE("the resolver's IPv6 query reads neighbour entries and makes the kernel solicit", "[resolver]") {
  if (!have_root()) {
    SROCE_SKIP("needs root (network namespaces)");
  }
  NetnsPair p(83);
  REQUIRE(p.ok);
  // nodad: usable at once (a tentative address neither answers nor sources a solicitation).
  REQUIRE(sh(p.in_a("ip addr add fd83::1/64 dev " + p.dev_a + " nodad")) == 0);
  REQUIRE(sh(p.in_b("ip addr add fd83::2/64 dev " + p.dev_b + " nodad")) == 0);
  REQUIRE(sh(p.in_a("ip -6 route add fd84::/64 via fd83::2")) == 0);
  REQUIRE(sh(p.in_a("ip -6 neigh add fd83::77 lladdr 02:00:00:00:00:77 dev " + p.dev_a + " nud permanent")) == 0);
  REQUIRE(sh_out(p.in_a("ip -6 neigh show fd83::2")).empty());
  InNetns in(p.ns_a);
  REQUIRE(in.ok());
  NeighbourTable table(64);
  NeighbourResolver r(table, static_cast<int>(if_nametoindex(p.dev_a.c_str())));
  auto a6 = [](const char* s) {
    std::array<uint8_t, 16> a{};
    inet_pton(AF_INET6, s, a.data());
    return a;
  };
  bool probe = false, stale = false;
  auto m = r.query6(a6("fd83::77").data(), &probe, &stale);
  REQUIRE(m);
  CHECK(mac_str(*m) == "02:00:00:00:00:77");
  CHECK_FALSE(probe);
  // The peer: no entry until the kernel solicits it; the probe makes it.
  CHECK_FALSE(r.query6(a6("fd83::2").data(), &probe, &stale));
  CHECK(probe);
  r.probe6(a6("fd83::2").data());
  std::optional<MacAddr> peer;
  for (int i = 0; i < 100 && !peer; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    peer = r.query6(a6("fd83::2").data(), &probe, &stale);
  }
  REQUIRE(peer);
  CHECK(mac_str(*peer) == p.mac_b());
  // Behind the gateway: the gateway's MAC. No route: nothing, and nothing to probe.
  auto via = r.query6(a6("fd84::5").data(), &probe, &stale);
  REQUIRE(via);
  CHECK(mac_str(*via) == p.mac_b());
  CHECK_FALSE(r.query6(a6("2001:db8::1").data(), &probe, &stale));
  CHECK_FALSE(probe);
}
