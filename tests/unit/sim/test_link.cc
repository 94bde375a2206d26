// Links: serialization and propagation arithmetic, drop-tail queue, and each
// impairment against its configuration.
#include <catch2/catch.hpp>
#include <cmath>

#include "fabric_fixture.h"

using namespace sroce;
using namespace sroce::sim;
using sroce::sim::test::Cable;

TEST_CASE("serialization delay is bits over rate, rounded up to a picosecond", "[sim][link]") {
  CHECK(Link::serialization(1250, 10'000'000'000ull) == Duration::nanos(1000));
  CHECK(Link::serialization(1500, 100'000'000'000ull) == Duration::nanos(120));
  CHECK(Link::serialization(1, 3) == Duration::picos(2'666'666'666'667));  // 8e12/3 rounded up
  CHECK(Link::serialization(0, 1'000'000'000) == Duration::picos(0));
  // 400 Gbit/s: 64-byte frame + 20 bytes preamble/IFG = 672 bits = 1.68 ns.
  CHECK(Link::serialization(84, 400'000'000'000ull) == Duration::picos(1680));
}

TEST_CASE("serialization's 64-bit path gives the exact ceiling, at its bounds too", "[sim][link]") {
  // The reference: ceil(bytes * 8e12 / rate) in 128 bits, written apart from
  // link.cc's arithmetic; sizes and rates around the 2^20-byte and
  // 2^41-bit/s edges of the fast path, and odd rates that never divide.
  const auto want = [](uint64_t bytes, uint64_t rate) {
    const unsigned __int128 num = static_cast<unsigned __int128>(bytes) * 8'000'000'000'000u;
    const unsigned __int128 q = num / rate;
    return static_cast<int64_t>(q + (q * rate != num ? 1 : 0));
  };
  const uint64_t rates[] = {1, 3, 7'000'000'001ull, 25'000'000'000ull, 100'000'000'000ull,
                            (uint64_t{1} << 41) - 1, uint64_t{1} << 41, 3'200'000'000'000ull};
  const uint64_t sizes[] = {0, 1, 64, 84, 1538, 4178, 9000, (uint64_t{1} << 20) - 1, uint64_t{1} << 20,
                            (uint64_t{1} << 20) + 1};
  uint64_t wrong = 0;
  for (uint64_t r : rates)
    for (uint64_t b : sizes) wrong += Link::serialization(b, r).ps != want(b, r);
  Rng rng(3);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t b = rng.below(uint64_t{1} << 21);
    const uint64_t r = 1 + rng.below(uint64_t{1} << 42);
    wrong += Link::serialization(b, r).ps != want(b, r);
  }
  CHECK(wrong == 0);
}

TEST_CASE("back-to-back frames arrive one serialization time apart after the delay",
          "[sim][link]") {
  LinkConfig lc;
  lc.rate_bps = 10'000'000'000ull;
  lc.delay = Duration::micros(2);
  Cable c(1, lc);
  for (uint32_t i = 0; i < 3; ++i) REQUIRE(c.send(1000, i));
  c.sim.run();
  const auto& arr = c.b->arrivals();
  REQUIRE(arr.size() == 3);
  // UD SEND of 1000 bytes: BTH 12 + DETH 8 + 1000 + ICRC 4 = 1024 bytes of UDP payload,
  // + UDP 8 + IPv4 20 + Ethernet 14 = 1066-byte frame, + FCS 4 + preamble/IFG 20 on the wire.
  const uint32_t wire = 1024 + 8 + 20 + 14 + 4 + 20;
  const Duration ser = Link::serialization(wire, lc.rate_bps);
  CHECK(ser == Duration::picos(wire * 8 * 100));  // 100 ps per bit at 10 Gbit/s
  for (size_t i = 0; i < 3; ++i) {
    CHECK(arr[i].at == Time{} + ser * static_cast<int64_t>(i + 1) + lc.delay);
    CHECK(arr[i].payload.size() == 1024);
  }
  CHECK(c.ab->stats().tx_wire_bytes == 3 * wire);
}

TEST_CASE("drop-tail queue drops what does not fit behind the frame in service", "[sim][link]") {
  LinkConfig lc;
  lc.rate_bps = 1'000'000'000ull;
  lc.queue_bytes = 2 * 1066;  // two 1000-byte UD SEND frames
  Cable c(1, lc);
  int accepted = 0;
  for (uint32_t i = 0; i < 5; ++i) accepted += c.send(1000, i);
  CHECK(accepted == 3);  // one in service + two queued
  CHECK(c.ab->stats().queue_drops == 2);
  CHECK(c.ab->stats().max_queue_bytes == 2 * 1066);
  c.sim.run();
  REQUIRE(c.b->arrivals().size() == 3);
  CHECK(c.ab->queued_bytes() == 0);
  CHECK_FALSE(c.ab->busy());
}

TEST_CASE("a link that dies at t1 loses everything until t2, including frames in flight",
          "[sim][link]") {
  LinkConfig lc;
  lc.rate_bps = 100'000'000'000ull;
  lc.delay = Duration::micros(10);
  lc.impair.outages.push_back({Time{} + Duration::micros(20), Time{} + Duration::micros(40)});
  Cable c(1, lc);
  auto at = [&](int64_t us, uint32_t psn) {
    c.sim.call_at(Time{} + Duration::micros(us), [&c, psn](Time) { c.send(100, psn); });
  };
  at(1, 1);    // arrives at ~11 us
  at(15, 2);   // on the wire when the link dies at 20 us: lost
  at(25, 3);   // sent while down: lost at the port
  at(45, 4);   // after recovery
  c.sim.run();
  const auto& arr = c.b->arrivals();
  REQUIRE(arr.size() == 2);
  CHECK(arr[0].serial == 0);
  CHECK(arr[1].at > Time{} + Duration::micros(55));
  CHECK(c.ab->stats().lost_down == 2);
  CHECK(c.ab->up_at(Time{} + Duration::micros(19)));
  CHECK_FALSE(c.ab->up_at(Time{} + Duration::micros(20)));
  CHECK(c.ab->up_at(Time{} + Duration::micros(40)));
}

TEST_CASE("forced drops lose exactly the listed frame ordinals", "[sim][link]") {
  LinkConfig lc;
  lc.impair.drop_frames = {3, 1};
  Cable c(1, lc);
  for (uint32_t i = 0; i < 5; ++i) c.send(64, i);
  c.sim.run();
  std::vector<uint64_t> got;
  for (const auto& a : c.b->arrivals()) got.push_back(a.serial);
  CHECK(got == std::vector<uint64_t>{0, 2, 4});
  CHECK(c.ab->stats().lost_forced == 2);
}

namespace {
// Sends n small frames a->b at once and returns the per-frame loss pattern.
std::vector<bool> loss_pattern(const LinkConfig& lc, uint32_t n, uint64_t seed) {
  LinkConfig big = lc;
  big.queue_bytes = 1ull << 32;
  Cable c(seed, big);
  for (uint32_t i = 0; i < n; ++i) c.send(16, i);
  c.sim.run();
  std::vector<bool> lost(n, true);
  for (const auto& a : c.b->arrivals()) lost[a.serial] = false;
  return lost;
}
double mean_run(const std::vector<bool>& lost) {
  uint64_t runs = 0, total = 0;
  for (size_t i = 0; i < lost.size(); ++i) {
    if (!lost[i]) continue;
    ++total;
    if (i == 0 || !lost[i - 1]) ++runs;
  }
  return runs ? static_cast<double>(total) / static_cast<double>(runs) : 0;
}
double rate(const std::vector<bool>& lost) {
  return static_cast<double>(std::count(lost.begin(), lost.end(), true)) / static_cast<double>(lost.size());
}
}  // namespace

TEST_CASE("Bernoulli loss happens at its rate, in short runs", "[sim][link][impair]") {
  LinkConfig lc;
  lc.impair.loss = 0.02;
  const auto lost = loss_pattern(lc, 50000, 3);
  CHECK(std::abs(rate(lost) - 0.02) < 5 * std::sqrt(0.02 * 0.98 / 50000));
  CHECK(mean_run(lost) < 1.1);
}

TEST_CASE("Gilbert-Elliott loss comes in bursts of the configured mean length",
          "[sim][link][impair]") {
  LinkConfig lc;
  lc.impair.burst = {0.01, 0.2, 0.0, 1.0};  // mean burst 1/0.2 = 5 frames, Bad 1/21 of the time
  const auto lost = loss_pattern(lc, 100000, 4);
  CHECK(std::abs(rate(lost) - 0.01 / 0.21) < 0.01);
  CHECK(mean_run(lost) > 4.0);
  CHECK(mean_run(lost) < 6.0);
}

TEST_CASE("corruption flips exactly one ICRC-covered bit, which the ICRC catches",
          "[sim][link][impair]") {
  LinkConfig lc;
  lc.impair.corrupt = 1.0;
  Cable c(5, lc);
  std::vector<std::vector<std::byte>> sent;
  for (uint32_t i = 0; i < 200; ++i) {
    std::array<std::byte, 512> buf;
    const size_t n = make_ud_send(buf, c.meta(), 0x11, i, 100 + i, static_cast<uint8_t>(i));
    sent.emplace_back(buf.begin(), buf.begin() + static_cast<long>(n));
    REQUIRE(icrc_ok(sent.back(), c.meta()));
    c.a->send(sent.back(), c.meta(), c.sim.now());
  }
  c.sim.run();
  REQUIRE(c.b->arrivals().size() == 200);
  CHECK(c.ab->stats().corrupted == 200);
  for (size_t i = 0; i < 200; ++i) {
    const auto& a = c.b->arrivals()[i];
    CHECK(a.corrupted);
    REQUIRE(a.payload.size() == sent[i].size());
    int bits = 0;
    for (size_t k = 0; k < a.payload.size(); ++k) {
      const auto x = static_cast<unsigned>(a.payload[k] ^ sent[i][k]);
      bits += __builtin_popcount(x);
      if (x != 0) CHECK(k != 4);  // BTH Resv8a is masked by the ICRC: never flipped
    }
    CHECK(bits == 1);
    CHECK_FALSE(icrc_ok(a.payload, a.meta));
  }
}

TEST_CASE("duplication delivers twice, reordering delays a fraction past later frames",
          "[sim][link][impair]") {
  LinkConfig lc;
  lc.impair.duplicate = 0.1;
  lc.impair.reorder = 0.1;
  lc.impair.reorder_delay = Duration::micros(5);
  lc.queue_bytes = 1u << 24;
  Cable c(6, lc);
  for (uint32_t i = 0; i < 5000; ++i) c.send(64, i);
  c.sim.run();
  const auto& st = c.ab->stats();
  CHECK(c.b->arrivals().size() == 5000 + st.duplicated);
  CHECK(std::abs(static_cast<double>(st.duplicated) - 500) < 5 * std::sqrt(450.0));
  CHECK(std::abs(static_cast<double>(st.reordered) - 500) < 5 * std::sqrt(450.0));
  uint64_t inversions = 0, max_serial = 0, dups = 0;
  for (const auto& a : c.b->arrivals()) {
    if (a.duplicate) {
      ++dups;
      continue;
    }
    if (a.serial < max_serial) ++inversions;
    max_serial = std::max(max_serial, a.serial);
  }
  CHECK(dups == st.duplicated);
  CHECK(inversions > 0);
  CHECK(inversions <= st.reordered);
}

TEST_CASE("ECN-capable frames are marked CE above the threshold, others never", "[sim][link]") {
  LinkConfig lc;
  lc.rate_bps = 1'000'000'000ull;
  lc.ecn_threshold_bytes = 3000;
  Cable c(1, lc);
  std::array<std::byte, 1100> buf;
  for (uint32_t i = 0; i < 10; ++i) {
    PacketMeta m = c.meta();
    m.traffic_class = i % 2 ? 0x02 : 0x00;  // ECT(0) on odd frames
    const size_t n = make_ud_send(buf, m, 0x11, i, 1000, 0);
    c.a->send(std::span<const std::byte>(buf.data(), n), m, c.sim.now());
  }
  c.sim.run();
  const auto& arr = c.b->arrivals();
  REQUIRE(arr.size() == 10);
  uint64_t marked = 0;
  for (size_t i = 0; i < arr.size(); ++i) {
    const uint8_t ecn = arr[i].meta.traffic_class & 3;
    if (i % 2 == 0) CHECK(ecn == 0);
    if (ecn == 3) ++marked;
    // Frames 0..3 find < 3000 bytes queued; from then on the backlog is above the threshold.
    if (i % 2 == 1 && i >= 5) CHECK(ecn == 3);
    if (i < 4) CHECK(ecn != 3);
  }
  CHECK(marked == c.ab->stats().ecn_marked);
  CHECK(marked > 0);
}

TEST_CASE("asymmetric cables: each direction has its own rate and delay", "[sim][link]") {
  LinkConfig fast, slow;
  fast.rate_bps = 100'000'000'000ull;
  fast.delay = Duration::micros(1);
  slow.rate_bps = 1'000'000'000ull;
  slow.delay = Duration::micros(50);
  Cable c(1, fast, slow);
  c.send(1000);
  std::array<std::byte, 1100> buf;
  PacketMeta back;
  back.src = c.b->addr();
  back.dst = c.a->addr();
  const size_t n = make_ud_send(buf, back, 0x11, 0, 1000, 0);
  c.b->send(std::span<const std::byte>(buf.data(), n), back, c.sim.now());
  c.sim.run();
  REQUIRE(c.b->arrivals().size() == 1);
  REQUIRE(c.a->arrivals().size() == 1);
  const uint32_t wire = 1024 + 8 + 20 + 14 + 24;
  CHECK(c.b->arrivals()[0].at == Time{} + Link::serialization(wire, fast.rate_bps) + fast.delay);
  CHECK(c.a->arrivals()[0].at == Time{} + Link::serialization(wire, slow.rate_bps) + slow.delay);
}

TEST_CASE("delay_frames reorders exactly the listed frames", "[sim][link][impair]") {
  LinkConfig lc;
  lc.impair.delay_frames = {1};
  lc.impair.reorder_delay = Duration::micros(1);
  Cable c(1, lc);
  for (uint32_t i = 0; i < 4; ++i) c.send(1000, i);  // ~86 ns apart at 100 Gbit/s
  c.sim.run();
  std::vector<uint64_t> got;
  for (const auto& a : c.b->arrivals()) got.push_back(a.serial);
  CHECK(got == std::vector<uint64_t>{0, 2, 3, 1});
  CHECK(c.ab->stats().reordered == 1);
}
