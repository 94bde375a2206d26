// The packet pool's two slot sizes and packets that do not carry their
// payload (packet.h): a packet sent as its headers and tail must cross the
// fabric exactly as the whole packet does (same lengths, timing, INT
// records, trimming), and hand its receiver the same headers and tail.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "fabric_fixture.h"
#include "proto/int.h"
#include "sroce/sim/network.h"
#include "sroce/sim/synth.h"

using namespace sroce;
using namespace sroce::sim;
using sroce::sim::test::ip;

namespace {

std::vector<std::byte> ud_send(const PacketMeta& m, uint32_t psn, uint32_t payload, bool shim) {
  std::vector<std::byte> b(kMaxPacketBytes);
  size_t len = make_ud_send(b, m, 1, psn, payload, static_cast<uint8_t>(0x40 + psn));
  if (shim) {
    auto* raw = reinterpret_cast<uint8_t*>(b.data());
    std::memmove(raw + SROCE_INT_SHIM_LEN, raw, len);
    sroce_int_shim_write(raw, SROCE_INT_MAX_HOPS);
    len += SROCE_INT_SHIM_LEN;
  }
  b.resize(len);
  return b;
}

PacketMeta meta() {
  PacketMeta m;
  m.src = ip(1);
  m.dst = ip(2);
  return m;
}

}  // namespace

TEST_CASE("pool: short packets inline, long ones with a body, uncarried ones as headers and tail",
          "[sim][packet]") {
  PacketPool pool;
  const auto small = ud_send(meta(), 0, 16, false);   // 12 + 8 + 16 + 4 = 40 bytes
  const auto big = ud_send(meta(), 1, 2000, false);   // 2024 bytes
  const PacketId a = pool.store(small, false);
  CHECK(pool[a].len == 40);
  CHECK(pool[a].carried());  // nothing worth leaving out
  CHECK(pool[a].body == nullptr);
  const PacketId b = pool.store(big, true);
  CHECK(pool[b].carried());
  CHECK(pool[b].body != nullptr);
  CHECK(pool.bodies() == 1);
  CHECK(std::memcmp(pool[b].data(), big.data(), big.size()) == 0);
  const PacketId c = pool.store(big, false);
  const Packet& pc = pool[c];
  CHECK(pc.len == big.size());
  CHECK(pc.head == 12 + 8);  // BTH + DETH
  CHECK(pc.tail == kTailBytes);
  CHECK(pc.body == nullptr);
  CHECK_FALSE(pc.carried());
  // The receiver's view: headers and tail where they were.
  const auto v = pool.contiguous(pc);
  REQUIRE(v.size() == big.size());
  CHECK(std::memcmp(v.data(), big.data(), pc.head) == 0);
  CHECK(std::memcmp(v.data() + v.size() - kTailBytes, big.data() + big.size() - kTailBytes,
                    kTailBytes) == 0);
  // A copy out has zeros where the payload is not carried.
  std::vector<std::byte> out(big.size(), std::byte{0x77});
  pool.copy_out(pc, out);
  CHECK(std::memcmp(out.data(), big.data(), pc.head) == 0);
  for (size_t i = pc.head; i < big.size() - kTailBytes; ++i) REQUIRE(out[i] == std::byte{0});
  CHECK(std::memcmp(out.data() + out.size() - kTailBytes, big.data() + big.size() - kTailBytes,
                    kTailBytes) == 0);
  // A clone holds the same bytes; freeing returns the body for reuse.
  const PacketId d = pool.clone(b);
  CHECK(pool.bodies() == 2);
  CHECK(std::memcmp(pool[d].data(), big.data(), big.size()) == 0);
  pool.free(b);
  pool.free(d);
  const PacketId e = pool.alloc(kMaxPacketBytes);
  CHECK(pool.bodies() == 2);  // reused, not allocated
  // fit(): a short packet written into a body moves inline.
  std::memcpy(pool[e].buffer().data(), small.data(), small.size());
  pool[e].set_len(static_cast<uint32_t>(small.size()));
  pool.fit(e);
  CHECK(pool[e].body == nullptr);
  CHECK(std::memcmp(pool[e].data(), small.data(), small.size()) == 0);
  CHECK(pool.live() == 3);
  CHECK(sizeof(Packet) <= 384);
  // Byte access: the gap has no bytes.
  Packet& pm = pool[c];
  CHECK(pm.byte_at(0) == pm.data());
  CHECK(pm.byte_at(pm.head) == nullptr);
  CHECK(pm.byte_at(pm.len - 1) == pm.tail_bytes.data() + kTailBytes - 1);
  CHECK(pm.byte_at(pm.len) == nullptr);
}

namespace {

// e1 -> s1 -> s2 -> e2, both switches stamping INT and trimming (a small
// buffer: some packets are cut), 30 packets of growing size, two in three
// with an INT shim, all sent whole or all without their payload.
struct Run {
  std::vector<std::vector<std::byte>> sent;
  std::vector<Endpoint::Arrival> arrivals;
  size_t live_after = 0;
};

Run run_fabric(bool carry) {
  Simulator sim(11);
  Network net(sim);
  SwitchConfig cfg;
  cfg.mmu = true;
  cfg.int_stamp = true;
  cfg.trim = true;
  cfg.pfc.enabled = false;
  cfg.buffer_bytes = 24u << 10;
  cfg.dt_alpha = 1;
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
  net.connect(s1, s2, slow);
  net.connect(s2, e2, slow);
  net.compute_routes();
  Run r;
  for (uint32_t k = 0; k < 30; ++k) {
    r.sent.push_back(ud_send(meta(), k, 1000 + 64 * k, k % 3 != 2));
    REQUIRE(e1.send(r.sent.back(), meta(), sim.now(), carry));
  }
  sim.run();
  r.arrivals = e2.arrivals();
  r.live_after = net.pool().live();
  return r;
}

}  // namespace

TEST_CASE("an uncarried packet crosses stamping and trimming switches as the whole one does",
          "[sim][packet][int]") {
  const Run whole = run_fabric(true);
  const Run part = run_fabric(false);
  REQUIRE(whole.arrivals.size() == 30);
  REQUIRE(part.arrivals.size() == 30);
  CHECK(whole.live_after == 0);
  CHECK(part.live_after == 0);
  size_t trimmed = 0, stamped = 0;
  for (size_t i = 0; i < whole.arrivals.size(); ++i) {
    const auto& w = whole.arrivals[i];
    const auto& p = part.arrivals[i];
    CHECK(w.at == p.at);
    REQUIRE(w.serial == p.serial);
    REQUIRE(w.payload.size() == p.payload.size());
    CHECK(w.trimmed == p.trimmed);
    REQUIRE(w.int_count == p.int_count);
    for (uint8_t h = 0; h < w.int_count; ++h) {
      CHECK(w.int_hops[h].port_id == p.int_hops[h].port_id);
      CHECK(w.int_hops[h].ts == p.int_hops[h].ts);
      CHECK(w.int_hops[h].tx_bytes == p.int_hops[h].tx_bytes);
      CHECK(w.int_hops[h].qlen_bytes == p.int_hops[h].qlen_bytes);
    }
    if (w.int_count > 0) ++stamped;
    const auto& orig = whole.sent[w.serial];
    const size_t n = w.payload.size();
    // The shim with its records, BTH and DETH are the same bytes.
    const size_t orig_hdr = 12 + 8 + (orig[0] == std::byte{SROCE_INT_TYPE} ? SROCE_INT_SHIM_LEN : 0);
    const size_t hdr = orig_hdr + SROCE_INT_HOP_LEN * w.int_count;
    REQUIRE(n >= hdr);
    CHECK(std::memcmp(w.payload.data(), p.payload.data(), hdr) == 0);
    if (w.trimmed) {
      ++trimmed;  // what trimming kept past the headers is payload: not carried
      continue;
    }
    REQUIRE(n == orig.size() + SROCE_INT_HOP_LEN * w.int_count);
    // The last kTailBytes are the same; the whole packet's payload is the one sent.
    CHECK(std::memcmp(w.payload.data() + n - kTailBytes, p.payload.data() + n - kTailBytes,
                      kTailBytes) == 0);
    CHECK(std::memcmp(w.payload.data() + hdr, orig.data() + orig_hdr, n - hdr) == 0);
  }
  CHECK(trimmed > 0);
  CHECK(stamped > 0);
}
