// INT on the wire (proto/int.h; docs/wire.md, "INT"): two engines that run an
// INT-reading controller agree on INT in band (ICAP), the requester puts a
// shim in front of its requests, a "switch" (this test) pushes hop records
// into the bytes, the responder echoes them in its ACK's bytes and the
// requester's controller moves. A peer without it never sees a shim or an
// echo; malformed shims and echoes are dropped and counted.
#include <algorithm>

#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

EngineConfig hpcc_cfg(bool lossy = false) {
  EngineConfig c;
  c.lossy.enable = lossy;
  c.cc.enable = true;
  c.cc.config.algorithm = cc::Algorithm::kHpcc;
  c.cc.line_rate_bps = 100'000'000'000;
  c.cc.base_rtt = Duration::micros(8);
  return c;
}

bool is_request(const WirePkt& p) { return p.from == 0 && p.op() != SROCE_OP_ACK && p.opcode != SROCE_OP_CNP; }

void post_write(Host& a, Qpn qa, Host& b, uint32_t len, uint64_t id) {
  REQUIRE(post(a, qa, WrOpcode::kRdmaWrite, {sge(a, 0, len)}, id, kSendSignaled, b.addr(0x400000), b.mr.rkey) == 0);
}

// Pushes two hop records on the shim of `pk` (the second with a deep queue),
// as two switches would at their egress; returns the stamped copy.
WirePkt stamp(const WirePkt& pk, Time t, uint64_t tx) {
  WirePkt m = pk;
  m.bytes.resize(pk.bytes.size() + 2 * SROCE_INT_HOP_LEN);
  auto* raw = reinterpret_cast<uint8_t*>(m.bytes.data());
  size_t len = pk.bytes.size();
  sroce_int_hop h{};
  h.node_port = 1;
  h.link_mbps = 100'000;
  h.ts_ps = static_cast<uint64_t>(t.ps);
  h.tx_bytes = tx;
  REQUIRE(sroce_int_push(raw, &len, m.bytes.size(), &h) == 1);
  h.node_port = 2;
  h.qlen = 400'000;
  h.flags = SROCE_INT_HOP_F_SB;
  REQUIRE(sroce_int_push(raw, &len, m.bytes.size(), &h) == 1);
  REQUIRE(len == m.bytes.size());
  return Wire::make(pk.from, m.bytes, pk.meta);
}

}  // namespace

TEST_CASE("int: hops pushed into a request's bytes come back in the ACK's bytes and move HPCC", "[cc][int]") {
  const bool lossy = GENERATE(false, true);
  CAPTURE(lossy);
  Pair p({}, {}, {}, hpcc_cfg(lossy));
  const uint64_t w0 = qstats(p.a, p.qa).cc_window_bytes;
  Time t = Time::zero();
  uint64_t tx = 0;
  size_t stamped = 0;
  std::vector<WirePkt> acks;
  p.w.filter = [&](const WirePkt& pk) {
    if (pk.from == 1 && pk.op() == SROCE_OP_ACK) {
      acks.push_back(pk);
      return Verdict::kDeliver;
    }
    if (!is_request(pk) || pk.int_shim == 0) return Verdict::kDeliver;
    t = t + Duration::nanos(100);
    tx += 1100;
    p.w.deliver(stamp(pk, t, tx));
    ++stamped;
    return Verdict::kDrop;
  };
  // Two messages: lossy mode switches at a message boundary.
  post_write(p.a, p.qa, p.b, 4096, 1);
  post_write(p.a, p.qa, p.b, 64 * 1024, 2);
  auto wc = wait_wc(p.w, p.a, 2);
  REQUIRE(wc.size() == 2);
  CHECK(wc[0].status == WcStatus::kSuccess);
  CHECK(wc[1].status == WcStatus::kSuccess);
  // Negotiation: the first request goes out before the peer's ICAP is seen
  // (plain bytes); once an ACK offered INT, every request carries the shim,
  // empty as the source sends it.
  const auto first = std::find_if(p.w.log.begin(), p.w.log.end(), is_request);
  REQUIRE(first != p.w.log.end());
  CHECK(first->int_shim == 0);
  REQUIRE(stamped > 0);
  for (const auto& pk : p.w.log)
    if (is_request(pk) && pk.int_shim != 0) {
      CHECK(pk.int_shim == SROCE_INT_SHIM_LEN);
      CHECK(pk.int_hops == 0);
      CHECK(static_cast<uint8_t>(pk.bytes[3]) == cc::kMaxHops);  // remaining hop count
    }
  // Every ACK after the first stamped request echoes both records, in its
  // bytes, newest (the second switch) first, inside the ICRC.
  size_t echoed = 0, echoed_sack = 0;
  for (const auto& a : acks) {
    CHECK(a.cap == lossy);
    if (a.int_echo == 0) continue;
    ++echoed;
    REQUIRE(a.int_echo == 2);
    const auto* raw = reinterpret_cast<const uint8_t*>(a.bytes.data());
    const uint8_t* rec = raw + a.bytes.size() - SROCE_ICRC_LEN - sroce_int_echo_bytes(2);
    sroce_int_hop h;
    sroce_int_hop_read(rec, &h);
    CHECK(h.node_port == 2);
    CHECK(h.qlen == 400'000);
    CHECK(h.flags == SROCE_INT_HOP_F_SB);
    CHECK(h.link_mbps == 100'000);
    sroce_int_hop_read(rec + SROCE_INT_HOP_LEN, &h);
    CHECK(h.node_port == 1);
    CHECK(h.qlen == 0);
    // A lossy ACK keeps its SACK trailer in front of the echo.
    echoed_sack += a.ext;
  }
  CHECK(echoed > 0);
  CHECK((echoed_sack > 0) == lossy);
  const QpStats sa = qstats(p.a, p.qa), sb = qstats(p.b, p.qb);
  CHECK(sa.int_shims_sent == stamped);
  CHECK(sb.int_echoes_sent == echoed);
  CHECK(sa.int_echoes_received > 0);
  CHECK(sa.int_echoes_received <= echoed);
  // The deep queue at hop 2 cut HPCC's window.
  CHECK(sa.cc_window_bytes < w0);
  CHECK(p.a->stats().rx_drop_reason[kRxDropBadInt] == 0);
  CHECK(p.b->stats().rx_drop_reason[kRxDropBadInt] == 0);
}

TEST_CASE("int: a shim without hops (a plain fabric) gets no echo; the ACK stays a plain ACK", "[cc][int]") {
  Pair p({}, {}, {}, hpcc_cfg());
  post_write(p.a, p.qa, p.b, 32 * 1024, 1);
  REQUIRE(wait_wc(p.w, p.a, 1).size() == 1);
  size_t shims = 0;
  for (const auto& pk : p.w.log) {
    if (is_request(pk)) shims += pk.int_shim != 0;
    if (pk.from == 1) {
      CHECK(pk.int_echo == 0);
      const auto* raw = reinterpret_cast<const uint8_t*>(pk.bytes.data());
      CHECK((raw[8] & SROCE_BTH8_INT_ECHO) == 0);
      CHECK(pk.bytes.size() == SROCE_BTH_LEN + SROCE_AETH_LEN + SROCE_ICRC_LEN);
    }
  }
  CHECK(shims > 0);
  CHECK(qstats(p.a, p.qa).int_echoes_received == 0);
}

TEST_CASE("int: a peer that does not offer INT never gets a shim", "[cc][int]") {
  // a runs HPCC; b runs no controller (like a plain RoCEv2 peer, it never sets
  // ICAP). And the other way round: b never sends what a did not offer.
  const bool b_plain_dcqcn = GENERATE(false, true);
  EngineConfig cb;
  cb.lossy.enable = false;
  if (b_plain_dcqcn) {
    cb.cc.enable = true;  // DCQCN reads no INT: no ICAP either
    cb.cc.config.algorithm = cc::Algorithm::kDcqcn;
  }
  Host a(0x0a000001, 11, hpcc_cfg()), b(0x0a000002, 22, cb);
  Wire w(a, b);
  const Qpn qa = make_qp(a), qb = make_qp(b);
  connect(a, qa, QpType::kRc, b, qb, {});
  connect(b, qb, QpType::kRc, a, qa, {});
  post_write(a, qa, b, 64 * 1024, 1);
  REQUIRE(wait_wc(w, a, 1).size() == 1);
  REQUIRE(post(b, qb, WrOpcode::kRdmaWrite, {sge(b, 0, 8192)}, 2, kSendSignaled, a.addr(0x400000), a.mr.rkey) == 0);
  REQUIRE(wait_wc(w, b, 1).size() == 1);
  for (const auto& pk : w.log) {
    CHECK(pk.int_shim == 0);
    CHECK(pk.int_echo == 0);
    const auto* raw = reinterpret_cast<const uint8_t*>(pk.bytes.data());
    if (pk.from == 1) CHECK((raw[8] & (SROCE_BTH8_INT_CAP | SROCE_BTH8_INT_ECHO)) == 0);
  }
  CHECK(qstats(a, qa).int_shims_sent == 0);
}

TEST_CASE("int: malformed shims and echoes are dropped and counted", "[cc][int]") {
  Pair p({}, {}, {}, hpcc_cfg());
  std::vector<WirePkt> reqs, acks;
  // Stamp every shimmed request so that ACKs carry echoes.
  p.w.filter = [&](const WirePkt& pk) {
    if (pk.from == 1 && pk.op() == SROCE_OP_ACK) acks.push_back(pk);
    if (!is_request(pk) || pk.int_shim == 0) return Verdict::kDeliver;
    reqs.push_back(pk);
    p.w.deliver(stamp(pk, Time::zero(), 0));
    return Verdict::kDrop;
  };
  post_write(p.a, p.qa, p.b, 32 * 1024, 1);
  REQUIRE(wait_wc(p.w, p.a, 1).size() == 1);
  REQUIRE(!reqs.empty());
  const auto with_echo = std::find_if(acks.begin(), acks.end(), [](const WirePkt& a) { return a.int_echo != 0; });
  REQUIRE(with_echo != acks.end());
  const uint64_t drops_b = p.b->stats().rx_drop_reason[kRxDropBadInt];
  const uint64_t drops_a = p.a->stats().rx_drop_reason[kRxDropBadInt];

  auto to_b = [&](std::vector<std::byte> bytes) { p.b->on_packet(bytes, reqs[0].meta, p.w.now); };
  auto to_a = [&](std::vector<std::byte> bytes) { p.a->on_packet(bytes, with_echo->meta, p.w.now); };
  auto at = [](std::vector<std::byte>& v, size_t i) -> uint8_t& { return reinterpret_cast<uint8_t&>(v[i]); };
  // Oversized hop count (9 > SROCE_INT_MAX_HOPS).
  auto v = reqs[0].bytes;
  at(v, 4) = SROCE_INT_MAX_HOPS + 1;
  to_b(v);
  // Hop count + remaining hops above the maximum.
  v = reqs[0].bytes;
  at(v, 4) = 1;  // remaining is already kMaxHops
  to_b(v);
  // Truncated: a record announced, the packet ends before it and a BTH.
  v.assign(reqs[0].bytes.begin(), reqs[0].bytes.begin() + SROCE_INT_SHIM_LEN + 20);
  at(v, 3) = 0;
  at(v, 4) = 1;
  to_b(v);
  // Shorter than a shim, an unknown version, an unknown record length.
  v.assign(reqs[0].bytes.begin(), reqs[0].bytes.begin() + 5);
  to_b(v);
  v = reqs[0].bytes;
  at(v, 1) = 0x20;
  to_b(v);
  v = reqs[0].bytes;
  at(v, 2) = 8;
  to_b(v);
  CHECK(p.b->stats().rx_drop_reason[kRxDropBadInt] == drops_b + 6);

  // Echo: footer count 0, count above the maximum, count past the packet,
  // wrong type byte.
  const size_t f = with_echo->bytes.size() - SROCE_ICRC_LEN - SROCE_INT_ECHO_FOOTER_LEN;
  for (const uint8_t c : {uint8_t{0}, uint8_t{SROCE_INT_MAX_HOPS + 1}, uint8_t{SROCE_INT_MAX_HOPS}}) {
    v = with_echo->bytes;
    at(v, f) = c;
    to_a(v);
  }
  v = with_echo->bytes;
  at(v, f + 3) = 0;
  to_a(v);
  CHECK(p.a->stats().rx_drop_reason[kRxDropBadInt] == drops_a + 4);
  // An intact copy is not dropped as malformed (a duplicate ACK).
  to_a(with_echo->bytes);
  CHECK(p.a->stats().rx_drop_reason[kRxDropBadInt] == drops_a + 4);
}

TEST_CASE("int: a lane whose INT shows a deep queue is weighted down; the others are not", "[cc][int][lanes]") {
  const bool lane_int = GENERATE(true, false);
  CAPTURE(lane_int);
  EngineConfig c = hpcc_cfg(/*lossy=*/true);
  c.lossy.lanes = 4;
  c.lossy.lane_int = lane_int;
  Pair p({}, {}, {}, c);
  Time t = Time::zero();
  uint64_t tx = 0;
  p.w.filter = [&](const WirePkt& pk) {
    if (!is_request(pk) || pk.int_shim == 0) return Verdict::kDeliver;
    t = t + Duration::nanos(100);
    tx += 1100;
    WirePkt m = stamp(pk, t, tx);  // hop 2 holds 400 KB at 100 Gbit/s: 32 us
    if (!pk.ext || pk.req.lane != 1) {
      // Other lanes' paths: hop 2's queue empty (rewrite its record in place).
      auto* raw = reinterpret_cast<uint8_t*>(m.bytes.data());
      sroce_int_hop h;
      sroce_int_hop_read(sroce_int_shim_hop(raw, 0), &h);
      h.qlen = 0;
      sroce_int_hop_write(raw + SROCE_INT_SHIM_LEN, &h);
    }
    p.w.deliver(m);
    return Verdict::kDrop;
  };
  post_write(p.a, p.qa, p.b, 4096, 1);
  post_write(p.a, p.qa, p.b, 256 * 1024, 2);
  REQUIRE(wait_wc(p.w, p.a, 2).size() == 2);
  std::array<LaneStats, 4> ls{};
  REQUIRE(p.a->lane_stats(p.qa, ls) == 4);
  if (lane_int) {
    CHECK(ls[1].int_high > 0);
    CHECK(ls[1].weight_cuts > 0);
    CHECK(ls[1].weight < kLaneWeightFull);
  } else {
    CHECK(ls[1].int_high == 0);
    CHECK(ls[1].weight_cuts == 0);
  }
  for (const int i : {0, 2, 3}) {
    CAPTURE(i);
    CHECK(ls[i].int_high == 0);
    CHECK(ls[i].weight_cuts == 0);
  }
}
