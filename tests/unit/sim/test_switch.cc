// The switch's shared-buffer model (switch.h): trimming and its priority
// queue, dynamic thresholds, RED ECN marking, PFC, INT and the shared-buffer
// flag, on synthetic traffic (no engine): known small cases, known results.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "fabric_fixture.h"
#include "sroce/sim/histogram.h"

using namespace sroce;
using namespace sroce::sim;
using sroce::sim::test::ip;

namespace {

// Puts the empty INT shim an INT source sends in front of a packet
// (proto/int.h): switches stamp only packets that carry one.
size_t add_shim(std::span<std::byte> buf, size_t len) {
  auto* raw = reinterpret_cast<uint8_t*>(buf.data());
  std::memmove(raw + SROCE_INT_SHIM_LEN, raw, len);
  sroce_int_shim_write(raw, SROCE_INT_MAX_HOPS);
  return len + SROCE_INT_SHIM_LEN;
}

// n senders -> one switch -> one receiver. Sender links at `in_bps`, the
// switch's port toward the receiver at `out_bps`.
struct Star {
  Simulator sim{7};
  Network net{sim};
  Switch* sw;
  std::vector<Endpoint*> tx;
  Endpoint* rx;
  Link* out;              // switch -> receiver
  std::vector<Link*> in;  // sender i -> switch
  Star(uint32_t n, const SwitchConfig& cfg, uint64_t in_bps = 400'000'000'000ull,
       uint64_t out_bps = 100'000'000'000ull) {
    sw = &net.add_switch("sw");
    sw->configure(cfg);
    LinkConfig lin;
    lin.rate_bps = in_bps;
    lin.queue_bytes = 16u << 20;  // senders queue everything they are given
    for (uint32_t i = 0; i < n; ++i) {
      tx.push_back(&net.add_endpoint("tx" + std::to_string(i), ip(10 + i)));
      in.push_back(net.connect(*tx.back(), *sw, lin).first);
    }
    rx = &net.add_endpoint("rx", ip(1));
    LinkConfig lout;
    lout.rate_bps = out_bps;
    out = net.connect(*sw, *rx, lout).first;
    net.compute_routes();
    rx->keep_payloads = false;
  }
  PacketMeta meta(uint32_t i, uint8_t tc = 0) const {
    PacketMeta m;
    m.src = tx[i]->addr();
    m.dst = rx->addr();
    m.src_port = static_cast<uint16_t>(50000 + i);
    m.traffic_class = tc;
    return m;
  }
  // `count` UD SENDs of `payload` bytes from sender i, all queued now.
  void burst(uint32_t i, uint32_t count, uint32_t payload, uint8_t tc = 0, bool shim = false) {
    std::array<std::byte, 4200> buf;
    for (uint32_t k = 0; k < count; ++k) {
      size_t len = make_ud_send(buf, meta(i, tc), 0x11, k, payload, static_cast<uint8_t>(k));
      if (shim) len = add_shim(buf, len);
      REQUIRE(tx[i]->send(std::span<const std::byte>(buf.data(), len), meta(i, tc), sim.now()));
    }
  }
};

// Frame bytes of a UD SEND with `payload` bytes (BTH 12 + DETH 8 + ICRC 4).
uint32_t ud_frame(uint32_t payload) { return kEthHeader + 20 + kUdpHeader + 12 + 8 + payload + 4; }

}  // namespace

TEST_CASE("histogram: exact below 16, within 1/16 above, quantiles", "[sim][switch]") {
  LogHistogram h;
  for (uint64_t v = 1; v <= 1000; ++v) h.add(v);
  CHECK(h.count() == 1000);
  CHECK(h.max() == 1000);
  const uint64_t p50 = h.quantile(0.5), p99 = h.quantile(0.99);
  CHECK(p50 >= 500);
  CHECK(p50 <= 500 + 500 / 16);
  CHECK(p99 >= 990);
  CHECK(p99 <= 1000);
  CHECK(h.quantile(0.01) == 10);
  for (uint64_t v : {0ull, 15ull, 16ull, 17ull, 1000ull, 123456789ull, (1ull << 62) + 5})
    CHECK(LogHistogram::upper(LogHistogram::index(v)) >= v);
}

TEST_CASE("drop-tail without the MMU is unchanged; with the MMU and no trim the buffer drops",
          "[sim][switch]") {
  SwitchConfig cfg;
  cfg.mmu = true;
  cfg.buffer_bytes = 64u << 10;
  cfg.dt_alpha = 1e9;  // let the buffer, not the threshold, be the limit
  Star s(1, cfg);
  s.burst(0, 200, 1024);
  s.sim.run();
  const uint32_t frame = ud_frame(1024);
  CHECK(s.out->stats().queue_drops > 0);
  CHECK(s.out->stats().trimmed == 0);
  CHECK(s.rx->arrivals().size() + s.out->stats().queue_drops == 200);
  // Never more in the buffer than it holds.
  CHECK(s.sw->stats().max_buffer_bytes <= cfg.buffer_bytes);
  CHECK(s.sw->stats().max_buffer_bytes + frame > cfg.buffer_bytes);
  CHECK(s.sw->stats().buffer_bytes == 0);  // all released
}

TEST_CASE("trimming: an overflowing queue trims instead of dropping, headers overtake data",
          "[sim][switch][trim]") {
  SwitchConfig cfg;
  cfg.mmu = true;
  cfg.buffer_bytes = 64u << 10;
  cfg.dt_alpha = 1e9;
  cfg.trim = true;
  Star s(1, cfg);
  const uint32_t n = 200;
  s.burst(0, n, 1024);
  s.sim.run();
  const auto& arr = s.rx->arrivals();
  // Nothing lost: every packet arrives whole or as its headers.
  REQUIRE(arr.size() == n);
  CHECK(s.out->stats().queue_drops == 0);
  const uint64_t trimmed = static_cast<uint64_t>(
      std::count_if(arr.begin(), arr.end(), [](const auto& a) { return a.trimmed; }));
  CHECK(trimmed > 0);
  CHECK(trimmed == s.out->stats().trimmed);
  CHECK(trimmed == s.sw->stats().trimmed);
  // The UD SEND's BTH+DETH is 20 bytes: trim_keep_bytes (64) survive.
  for (const auto& a : arr) {
    if (!a.trimmed) continue;
    CHECK(a.meta.src_port == 50000);
  }
  // The first trimmed header arrives before data that was sent before it:
  // strict priority lets it pass the queue.
  size_t first_trim = 0;
  while (!arr[first_trim].trimmed) ++first_trim;
  bool overtook = false;
  for (size_t k = first_trim + 1; k < arr.size(); ++k)
    if (!arr[k].trimmed && arr[k].serial < arr[first_trim].serial) overtook = true;
  CHECK(overtook);
  CHECK(s.out->stats().prio_frames == trimmed);
}

TEST_CASE("trimming keeps max(headers, trim_keep_bytes) of the RoCE payload",
          "[sim][switch][trim]") {
  PacketPool pool;
  Packet& p = pool[pool.alloc(kMaxPacketBytes)];
  PacketMeta m;
  m.src = ip(1);
  m.dst = ip(2);
  p.set_len(static_cast<uint32_t>(make_ud_send(p.buffer(), m, 1, 0, 1000, 0)));
  REQUIRE(p.len == 12 + 8 + 1000 + 4);
  CHECK_FALSE(Switch::is_control(p));
  REQUIRE(Switch::trim_packet(p, 64));
  CHECK(p.len == 64);
  CHECK(p.trimmed);
  CHECK_FALSE(Switch::trim_packet(p, 64));  // already header-sized
  Packet& q = pool[pool.alloc(kMaxPacketBytes)];
  q.set_len(static_cast<uint32_t>(make_ud_send(q.buffer(), m, 1, 0, 1000, 0)));
  REQUIRE(Switch::trim_packet(q, 0));
  CHECK(q.len == 12 + 8);  // never less than BTH + DETH
}

TEST_CASE("dynamic threshold: one congested queue settles at alpha/(1+alpha) of the buffer",
          "[sim][switch][dt]") {
  for (double alpha : {1.0, 3.0}) {
    SwitchConfig cfg;
    cfg.mmu = true;
    cfg.buffer_bytes = 256u << 10;
    cfg.dt_alpha = alpha;
    Star s(1, cfg);
    s.burst(0, 600, 1024);
    s.sim.run();
    const double limit = alpha / (1 + alpha) * static_cast<double>(cfg.buffer_bytes);
    const double frame = ud_frame(1024);
    INFO("alpha " << alpha << " max queue " << s.out->stats().max_queue_bytes);
    CHECK(s.out->stats().queue_drops > 0);
    CHECK(static_cast<double>(s.out->stats().max_queue_bytes) <= limit + frame);
    CHECK(static_cast<double>(s.out->stats().max_queue_bytes) >= limit - 2 * frame);
  }
}

TEST_CASE("ECN RED: probability 0 at Kmin, Pmax at Kmax, 1 above", "[sim][switch][ecn]") {
  EcnConfig e;
  e.kmin_bytes = 10'000;
  e.kmax_bytes = 110'000;
  e.pmax = 0.2;
  CHECK(e.probability(0) == 0.0);
  CHECK(e.probability(10'000) == 0.0);
  CHECK(e.probability(60'000) == Approx(0.1));
  CHECK(e.probability(110'000) == Approx(0.2));
  CHECK(e.probability(110'001) == 1.0);
}

TEST_CASE("ECN RED in the fabric: no marks below Kmin, all above Kmax, ECT only, measured Pmax",
          "[sim][switch][ecn]") {
  // Returns (marked, expected marks from the queue each packet left behind,
  // which INT records: it is exactly the q the marking decision used).
  auto run = [](uint64_t kmin, uint64_t kmax, double pmax, uint8_t tc, uint32_t n) {
    SwitchConfig cfg;
    cfg.mmu = true;
    cfg.buffer_bytes = 16u << 20;
    cfg.int_stamp = true;
    cfg.ecn.enabled = true;
    cfg.ecn.kmin_bytes = kmin;
    cfg.ecn.kmax_bytes = kmax;
    cfg.ecn.pmax = pmax;
    auto s = std::make_unique<Star>(1, cfg);
    s->burst(0, n, 1024, tc, /*shim=*/true);
    s->sim.run();
    uint64_t marked = 0;
    double expect = 0;
    for (const auto& a : s->rx->arrivals()) {
      marked += (a.meta.traffic_class & 3) == 3;
      REQUIRE(a.int_count == 1);
      expect += cfg.ecn.probability(a.int_hops[0].qlen_bytes);
    }
    REQUIRE(s->rx->arrivals().size() == n);
    CHECK(s->sw->stats().ecn_marked == marked);
    return std::pair<uint64_t, double>{marked, expect};
  };
  const uint32_t frame = ud_frame(1024);
  // 400 -> 100 Gbit/s: the queue grows by 3 frames per frame served; a burst
  // of 40 never leaves more than 30 frames behind.
  CHECK(run(64 * frame, 128 * frame, 1.0, 2, 40).first == 0);
  // Kmax below any queue: everything that leaves a queue behind is marked
  // (not the first, which finds it empty, nor the last).
  const auto all = run(0, 1, 0.5, 2, 40);
  CHECK(all.first == static_cast<uint64_t>(all.second));
  CHECK(all.first >= 36);
  CHECK(all.first < 40);
  CHECK(run(0, 1, 0.5, 0, 40).first == 0);  // not ECN-capable: never marked
  // Between Kmin and Kmax: the mark count matches sum of p(q) (binomial; 5 %
  // is over 5 standard deviations here).
  const auto mid = run(200'000, 4'000'000, 0.8, 1, 4000);
  INFO("marked " << mid.first << " expected " << mid.second);
  CHECK(mid.second > 500);
  CHECK(std::abs(static_cast<double>(mid.first) - mid.second) < 0.05 * mid.second);
}

TEST_CASE("PFC keeps a 4-to-1 incast lossless where the same buffer without it drops",
          "[sim][switch][pfc]") {
  auto run = [](bool pfc) {
    SwitchConfig cfg;
    cfg.mmu = true;
    cfg.buffer_bytes = 256u << 10;
    cfg.pfc.enabled = pfc;
    cfg.pfc.xoff_bytes = 32u << 10;
    cfg.pfc.xon_bytes = 24u << 10;
    auto s = std::make_unique<Star>(4, cfg, 100'000'000'000ull, 100'000'000'000ull);
    for (uint32_t i = 0; i < 4; ++i) s->burst(i, 500, 1024);
    s->sim.run();
    return s;
  };
  auto lossy = run(false);
  CHECK(lossy->out->stats().queue_drops > 0);
  CHECK(lossy->rx->arrivals().size() < 2000);

  auto lossless = run(true);
  CHECK(lossless->rx->arrivals().size() == 2000);
  CHECK(lossless->out->stats().queue_drops == 0);
  CHECK(lossless->sw->stats().pfc_xoff > 0);
  CHECK(lossless->sw->stats().pfc_xon == lossless->sw->stats().pfc_xoff);
  uint64_t pauses = 0, paused_ps = 0;
  for (Link* l : lossless->in) {
    pauses += l->stats().pfc_pauses;
    paused_ps += l->stats().paused_ps;
    CHECK_FALSE(l->paused());
  }
  CHECK(pauses == lossless->sw->stats().pfc_xoff);
  CHECK(paused_ps > 0);
  // Per ingress: never above xoff plus the headroom, which is what is in
  // flight while the pause travels (2 x 1 us at 100 Gbit/s) and a frame or two.
  const uint64_t headroom = 2 * 12'500 + 2 * ud_frame(1024);  // 1 us at 100 Gbit/s = 12.5 KB
  CHECK(lossless->sw->stats().max_buffer_bytes <= 4 * ((32u << 10) + headroom));
  CHECK(lossless->sw->stats().max_buffer_bytes > 4 * (32u << 10));
  // The output port ran at line rate: the incast took about 2000 frames' time.
  const double wire = 2000.0 * (ud_frame(1024) + kEthFcs + kEthPreambleIfg) * 8 / 100e9;
  const double took = static_cast<double>(lossless->rx->arrivals().back().at.ps) * 1e-12;
  CHECK(took < wire * 1.05 + 5e-6);
}

TEST_CASE("INT: one record per switch hop; shared-buffer flag above its level",
          "[sim][switch][int]") {
  // e1 -> s1 -> s2 -> e2, both switches stamping.
  Simulator sim(3);
  Network net(sim);
  SwitchConfig cfg;
  cfg.mmu = true;
  cfg.int_stamp = true;
  cfg.buffer_bytes = 64u << 10;
  cfg.sb_flag_fraction = 0.25;
  cfg.dt_alpha = 8;
  Switch& s1 = net.add_switch("s1");
  Switch& s2 = net.add_switch("s2");
  s1.configure(cfg);
  s2.configure(cfg);
  Endpoint& e1 = net.add_endpoint("e1", ip(1));
  Endpoint& e2 = net.add_endpoint("e2", ip(2));
  LinkConfig fast;
  fast.rate_bps = 400'000'000'000ull;
  LinkConfig slow;
  slow.rate_bps = 100'000'000'000ull;
  net.connect(e1, s1, fast);
  Link* s1s2 = net.connect(s1, s2, slow).first;
  Link* s2e2 = net.connect(s2, e2, slow).first;
  net.compute_routes();
  PacketMeta m;
  m.src = e1.addr();
  m.dst = e2.addr();
  std::array<std::byte, 4200> buf;
  for (uint32_t k = 0; k < 40; ++k) {
    const size_t len = add_shim(buf, make_ud_send(buf, m, 1, k, 1024, 0));
    e1.send(std::span<const std::byte>(buf.data(), len), m, sim.now());
  }
  // A packet without a shim (a plain RoCEv2 sender) crosses unchanged.
  const size_t plain = make_ud_send(buf, m, 1, 40, 1024, 0);
  const std::vector<std::byte> plain_bytes(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(plain));
  e1.send(std::span<const std::byte>(buf.data(), plain), m, sim.now());
  sim.run();
  auto arr = e2.arrivals();
  REQUIRE(arr.size() == 41);
  CHECK(arr.back().int_count == 0);
  CHECK(arr.back().payload == plain_bytes);
  arr.pop_back();
  bool any_flag = false;
  for (const auto& a : arr) {
    REQUIRE(a.int_count == 2);
    // In the bytes: the shim and two 24-byte records in front of the BTH.
    CHECK(a.payload.size() == SROCE_INT_SHIM_LEN + 2 * SROCE_INT_HOP_LEN + 12 + 8 + 1024 + 4);
    CHECK(a.int_hops[0].port_id == (s1.id() << 16 | s1s2->port_index()));
    CHECK(a.int_hops[1].port_id == (s2.id() << 16 | s2e2->port_index()));
    CHECK(a.int_hops[0].ts < a.int_hops[1].ts);
    CHECK(a.int_hops[1].ts < a.at);
    CHECK(a.int_hops[0].link_bps == 100'000'000'000ull);
    any_flag = any_flag || a.sb_flag;
  }
  // tx_bytes is cumulative per port and includes the packet (with its own
  // record): the last stamped one through s1->s2 saw all 40 frames, and
  // the plain frame after it is the rest.
  Packet q;
  q.meta = m;
  q.len = static_cast<uint32_t>(plain);
  CHECK(arr.back().int_hops[0].tx_bytes + Link::wire_bytes(q) == s1s2->stats().tx_wire_bytes);
  CHECK(arr.front().int_hops[0].qlen_bytes == 0);
  CHECK(arr[20].int_hops[0].qlen_bytes > 0);
  // s1's queue reached ~ 3/4 x 40 frames = 31 KB > 25 % of 64 KiB.
  CHECK(any_flag);
  CHECK_FALSE(arr.front().sb_flag);
  CHECK(s1.stats().sb_flagged > 0);
  CHECK(s2.stats().sb_flagged == 0);  // 100 -> 100: no queue at s2
}

TEST_CASE("a spine that blackholes mid-run loses what ECMP sends it, routes unchanged",
          "[sim][switch]") {
  Simulator sim(5);
  Network net(sim);
  Switch& l0 = net.add_switch("leaf0");
  Switch& l1 = net.add_switch("leaf1");
  Endpoint& e1 = net.add_endpoint("e1", ip(1));
  Endpoint& e2 = net.add_endpoint("e2", ip(2));
  net.connect(e1, l0, LinkConfig{});
  net.connect(e2, l1, LinkConfig{});
  std::vector<Switch*> spines;
  for (int s = 0; s < 2; ++s) {
    spines.push_back(&net.add_switch("spine" + std::to_string(s)));
    net.connect(l0, *spines.back(), LinkConfig{});
    net.connect(l1, *spines.back(), LinkConfig{});
  }
  net.compute_routes();
  const Time dead = Time{} + Duration::micros(100);
  for (const auto& l : net.links())
    if (&l->from() == spines[0] || &l->to() == spines[0])
      l->impairments().outages.push_back({dead, Time::never()});
  // 64 lanes (source ports) before and 64 after the outage.
  auto send_all = [&](Time) {
    PacketMeta m;
    m.src = e1.addr();
    m.dst = e2.addr();
    std::array<std::byte, 200> buf;
    for (uint16_t p = 0; p < 64; ++p) {
      m.src_port = static_cast<uint16_t>(49152 + p);
      const size_t n = make_ud_send(buf, m, 1, p, 64, 0);
      e1.send(std::span<const std::byte>(buf.data(), n), m, sim.now());
    }
  };
  sim.call_at(Time{}, send_all);
  sim.call_at(dead + Duration::micros(10), send_all);
  sim.run();
  size_t before = 0, after = 0;
  for (const auto& a : e2.arrivals()) (a.at < dead ? before : after)++;
  CHECK(before == 64);
  CHECK(after > 0);
  CHECK(after < 64);
  // The routes still list spine 0 (no reroute): its share is lost.
  CHECK(l0.next_hops(e2.addr()).size() == 2);
  uint64_t lost = 0;
  for (const auto& l : net.links()) lost += l->stats().lost_down;
  CHECK(lost == 64 - after);
}
