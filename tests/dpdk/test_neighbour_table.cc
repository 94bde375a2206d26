// The neighbour table between the loop thread and the resolver
// (dpdk-pmd/src/neighbour.h): misses register destinations once, the
// resolver's answers become visible, static entries win, a full table
// degrades to misses, and a concurrent writer never produces a torn MAC.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "neighbour.h"

using namespace sroce::dpdk;

TEST_CASE("a miss registers the destination for the resolver, once", "[neighbour]") {
  NeighbourTable t(64);
  MacAddr m;
  CHECK_FALSE(t.lookup(0x0a000002, m));
  CHECK_FALSE(t.lookup(0x0a000002, m));
  CHECK(t.size() == 1);
  int wanted = 0;
  t.for_each([&](uint32_t ip, bool resolved, bool is_static) {
    CHECK(ip == 0x0a000002);
    CHECK_FALSE(resolved);
    CHECK_FALSE(is_static);
    ++wanted;
  });
  CHECK(wanted == 1);
  MacAddr mac{{2, 0, 0, 0, 0, 9}};
  CHECK(t.set(0x0a000002, mac));
  CHECK_FALSE(t.set(0x0a000002, mac));  // unchanged
  REQUIRE(t.lookup(0x0a000002, m));
  CHECK(m == mac);
  // The resolver only answers destinations the loop asked for.
  CHECK_FALSE(t.set(0x0a000003, mac));
  CHECK(t.size() == 1);
  // 0.0.0.0 is never a destination.
  CHECK_FALSE(t.lookup(0, m));
  CHECK(t.size() == 1);
}

TEST_CASE("static entries are resolved from the start and the resolver cannot change them", "[neighbour]") {
  NeighbourTable t(16);
  MacAddr fixed{{2, 0, 0, 0, 0, 1}};
  REQUIRE(t.add_static(0x0a000001, fixed));
  MacAddr m;
  REQUIRE(t.lookup(0x0a000001, m));
  CHECK(m == fixed);
  CHECK_FALSE(t.set(0x0a000001, MacAddr{{2, 0, 0, 0, 0, 2}}));
  REQUIRE(t.lookup(0x0a000001, m));
  CHECK(m == fixed);
  bool seen_static = false;
  t.for_each([&](uint32_t, bool resolved, bool is_static) { seen_static = resolved && is_static; });
  CHECK(seen_static);
}

TEST_CASE("a full table turns further destinations into plain misses", "[neighbour]") {
  NeighbourTable t(16);
  REQUIRE(t.capacity() == 16);
  MacAddr m;
  for (uint32_t i = 1; i <= 16; ++i) CHECK_FALSE(t.lookup(0x0b000000 + i, m));
  CHECK(t.size() == 16);
  CHECK_FALSE(t.lookup(0x0c000001, m));
  CHECK(t.size() == 16);
  // Existing entries still work.
  CHECK(t.set(0x0b000010, MacAddr{{2, 0, 0, 0, 0, 16}}));
  REQUIRE(t.lookup(0x0b000010, m));
  CHECK(m.b[5] == 16);
}

TEST_CASE("static neighbour strings", "[neighbour]") {
  uint32_t ip = 0;
  MacAddr m;
  REQUIRE(parse_static_neighbour("10.1.2.3=02:aa:bb:cc:dd:0e", ip, m));
  CHECK(ip == 0x0a010203);
  CHECK(m == MacAddr{{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x0e}});
  CHECK_FALSE(parse_static_neighbour("10.1.2.3", ip, m));
  CHECK_FALSE(parse_static_neighbour("10.1.2=02:aa:bb:cc:dd:0e", ip, m));
  CHECK_FALSE(parse_static_neighbour("10.1.2.3=02:aa:bb:cc:dd", ip, m));
  CHECK_FALSE(parse_static_neighbour("10.1.2.3=02:aa:bb:cc:dd:0e:ff", ip, m));
}

TEST_CASE("a reader racing the resolver sees whole MACs only", "[neighbour]") {
  NeighbourTable t(64);
  MacAddr m;
  for (uint32_t i = 1; i <= 8; ++i) t.lookup(i, m);
  // Two MACs whose halves differ everywhere: a torn read would mix them.
  const MacAddr a{{0x02, 0x11, 0x11, 0x11, 0x11, 0x11}}, b{{0x02, 0xee, 0xee, 0xee, 0xee, 0xee}};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> rounds{0};
  std::thread writer([&] {
    for (int n = 0; !stop.load(); ++n) {
      for (uint32_t i = 1; i <= 8; ++i) t.set(i, (n & 1) ? a : b);
      rounds.fetch_add(1);
    }
  });
  // Read while the writer really runs: on a loaded machine the two threads may take turns on
  // one CPU, so the writer can do all its rounds while the reader waits for its time slice.
  // Read on until reads have seen the writer's MACs too (or 20 s: then `seen` says why).
  uint64_t seen = 0, torn = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (uint64_t n = 0; n < 200000 || rounds.load() < 2000 || (seen < 1000 && std::chrono::steady_clock::now() < deadline);
       ++n) {
    if (t.lookup(1 + n % 8, m)) {
      ++seen;
      torn += !(m == a) && !(m == b);
    }
  }
  stop.store(true);
  writer.join();
  CHECK(seen > 0);
  CHECK(torn == 0);
}

TEST_CASE("IPv6 destinations get stable handles in 240.0.0.0/4 that carry their address", "[neighbour]") {
  NeighbourTable t(16);
  uint8_t a[16] = {0xfd, 0x78}, b[16] = {0xfd, 0x78};
  a[15] = 1;
  b[15] = 2;
  const uint32_t ha = t.handle6(a), hb = t.handle6(b);
  CHECK(NeighbourTable::is_handle6(ha));
  CHECK(NeighbourTable::is_handle6(hb));
  CHECK(ha != hb);
  CHECK(t.handle6(a) == ha);  // the same address, the same handle
  CHECK(memcmp(t.key6(ha), a, 16) == 0);
  CHECK(memcmp(t.key6(hb), b, 16) == 0);
  CHECK_FALSE(NeighbourTable::is_handle6(0x0a4e0001));  // 10.78.0.1
  // The handle is a key like an IPv4 address: a miss makes it wanted, the resolver sets it.
  MacAddr m;
  CHECK_FALSE(t.lookup(ha, m));
  bool wanted = false;
  t.for_each([&](uint32_t k, bool resolved, bool) { wanted = wanted || (k == ha && !resolved); });
  CHECK(wanted);
  CHECK(t.set(ha, MacAddr{{2, 0, 0, 0, 0, 0x61}}));
  REQUIRE(t.lookup(ha, m));
  CHECK(m.b[5] == 0x61);
  // Full: 16 slots of addresses, then 0 (no handle: the packet cannot be resolved).
  for (int i = 3; i <= 16; ++i) {
    uint8_t c[16] = {0xfd, 0x78};
    c[15] = static_cast<uint8_t>(i);
    CHECK(t.handle6(c) != 0);
  }
  uint8_t d[16] = {0xfd, 0x79};
  CHECK(t.handle6(d) == 0);
}
