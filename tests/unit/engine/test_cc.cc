// Congestion control in the engine (userspace/engine/src/congestion.cc;
// docs/cc/README.md, "Integration"): the notification point turns CE marks
// into CNPs, a CNP lowers the DCQCN rate, the window bounds what is in
// flight, pacing spaces packets, and with congestion
// control off the engine does none of it.
#include <algorithm>

#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

EngineConfig cc_cfg(cc::Algorithm alg, Duration base_rtt = Duration::micros(8)) {
  EngineConfig c;
  c.lossy.enable = false;  // compatible mode: one path, go-back-N
  c.cc.enable = true;
  c.cc.config.algorithm = alg;
  c.cc.line_rate_bps = 100'000'000'000;
  c.cc.base_rtt = base_rtt;
  return c;
}

EngineConfig plain_cfg() {
  EngineConfig c;
  c.lossy.enable = false;
  return c;
}

bool is_cnp(const WirePkt& p) { return p.opcode == SROCE_OP_CNP; }
bool is_request(const WirePkt& p, int from) {
  return p.from == from && !is_cnp(p) && p.op() != SROCE_OP_ACK;
}

void post_write(Pair& p, uint32_t len, uint64_t id) {
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, len)}, id, kSendSignaled,
               p.b.addr(0x400000), p.b.mr.rkey) == 0);
}

}  // namespace

TEST_CASE("cc: a CE-marked request makes the responder send one CNP per interval", "[cc]") {
  Pair p({}, {}, {}, cc_cfg(cc::Algorithm::kDcqcn));
  // Deliver every request from a with CE set; ACKs and CNPs as they are.
  p.w.filter = [&](const WirePkt& pk) {
    if (pk.from != 0 || is_cnp(pk) || pk.op() == SROCE_OP_ACK) return Verdict::kDeliver;
    WirePkt m = pk;
    m.meta.traffic_class |= 3;
    p.w.deliver(m);
    return Verdict::kDrop;  // delivered above, marked
  };
  post_write(p, 16 * 1024, 1);
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);
  // Requests are ECN-capable: ECT(0).
  for (const auto& pk : p.w.log)
    if (is_request(pk, 0)) CHECK((pk.meta.traffic_class & 3) == 2);
  const size_t cnps = p.w.count(is_cnp);
  // 16 marked packets, all within one 4 us NP interval of fake time (the
  // wire has no delay): exactly one CNP, from b to a's QP.
  CHECK(cnps == 1);
  for (const auto& pk : p.w.log)
    if (is_cnp(pk)) {
      CHECK(pk.from == 1);
      CHECK(pk.dqpn == p.qa);
      CHECK((pk.meta.traffic_class & 3) == 0);  // CNPs are not ECN-capable
    }
  CHECK(qstats(p.b, p.qb).cnps_sent == 1);
  CHECK(qstats(p.a, p.qa).cnps_received == 1);
  CHECK(p.a->stats().rx_drop_reason[kRxDropCnp] == 0);
}

TEST_CASE("cc: a CNP lowers the DCQCN rate and pacing spaces the packets", "[cc]") {
  Pair p({}, {}, {}, cc_cfg(cc::Algorithm::kDcqcn));
  const uint64_t line = 100'000'000'000;
  CHECK(qstats(p.a, p.qa).cc_rate_bps == line);
  bool marked_one = false;
  std::vector<std::pair<Time, size_t>> sends;  // (time, bytes) of a's requests
  p.w.filter = [&](const WirePkt& pk) {
    if (is_request(pk, 0)) sends.emplace_back(p.w.now, pk.bytes.size());
    if (pk.from != 0 || is_cnp(pk) || pk.op() == SROCE_OP_ACK || marked_one)
      return Verdict::kDeliver;
    marked_one = true;
    WirePkt m = pk;
    m.meta.traffic_class |= 3;
    p.w.deliver(m);
    return Verdict::kDrop;
  };
  post_write(p, 64 * 1024, 1);
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);
  const QpStats s = qstats(p.a, p.qa);
  CHECK(s.cnps_received == 1);
  // One cut by alpha/2 with alpha ~1 (CX preset: initial alpha 1023/1024).
  CHECK(s.cc_rate_bps < line * 6 / 10);
  CHECK(s.cc_rate_bps > line * 4 / 10);
  CHECK(s.cc_paced > 0);
  // After the CNP every request left at least one wire time at the cut rate
  // after the previous one (the rate only grows back on the 300 us timer).
  REQUIRE(sends.size() >= 64);
  const double rate = static_cast<double>(s.cc_rate_bps);
  size_t checked = 0;
  for (size_t i = 3; i < sends.size(); ++i) {
    const double gap_ps = static_cast<double>((sends[i].first - sends[i - 1].first).ps);
    const double want_ps = static_cast<double>(sends[i - 1].second + 66) * 8 / rate * 1e12;
    CHECK(gap_ps >= want_ps * 0.999);
    ++checked;
  }
  CHECK(checked > 50);
  // The transfer took about its bytes at the cut rate, not at line rate.
  const double span_ps = static_cast<double>((sends.back().first - sends.front().first).ps);
  CHECK(span_ps > 60.0 * 1090 * 8 / rate * 1e12);
}

TEST_CASE("cc: the HPCC window bounds the bytes in flight", "[cc]") {
  // base RTT 1 us at 100 Gb/s: a window of one BDP, 12.5 KB = 12 packets of 1 KiB.
  Pair p({}, {}, {}, cc_cfg(cc::Algorithm::kHpcc, Duration::micros(1)));
  const uint64_t w = qstats(p.a, p.qa).cc_window_bytes;
  CHECK(w >= 12'000);
  CHECK(w <= 13'000);
  // Nothing reaches b: count what a sends before the window closes.
  p.w.filter = [](const WirePkt&) { return Verdict::kHold; };
  post_write(p, 64 * 1024, 1);
  p.w.run(Duration::micros(20));  // through the pacing holds (line rate), not the ACK timer
  const size_t sent = p.w.count([](const WirePkt& pk) { return is_request(pk, 0); });
  CHECK(sent >= w / 1024 - 1);
  CHECK(sent <= w / 1024 + 1);
  CHECK(qstats(p.a, p.qa).cc_window_stalls > 0);
  // The last packet before the window closed asked for an ACK.
  bool last_ackreq = false;
  for (const auto& pk : p.w.log)
    if (is_request(pk, 0)) last_ackreq = pk.ack_req;
  CHECK(last_ackreq);
  // Releasing the held packets lets the transfer finish.
  p.w.filter = nullptr;
  p.w.release();
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);

  // Without congestion control the same transfer goes out at once.
  Pair q({}, {}, {}, plain_cfg());
  q.w.filter = [](const WirePkt&) { return Verdict::kHold; };
  REQUIRE(post(q.a, q.qa, WrOpcode::kRdmaWrite, {sge(q.a, 0, 64 * 1024)}, 1, kSendSignaled,
               q.b.addr(0x400000), q.b.mr.rkey) == 0);
  q.w.pump();
  CHECK(q.w.count([](const WirePkt& pk) { return is_request(pk, 0); }) == 64);
}

// INT on the wire (shim, hop records, echo): tests/unit/engine/test_int.cc.

TEST_CASE("cc: off by default: no ECT, no CNP, CNPs dropped as before", "[cc]") {
  Pair p({}, {}, {}, plain_cfg());
  p.w.filter = [&](const WirePkt& pk) {
    if (!is_request(pk, 0)) return Verdict::kDeliver;
    WirePkt m = pk;
    m.meta.traffic_class |= 3;  // CE (as if the AH had asked for ECT)
    p.w.deliver(m);
    return Verdict::kDrop;
  };
  post_write(p, 16 * 1024, 1);
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(p.w.count(is_cnp) == 0);
  for (const auto& pk : p.w.log) {
    CHECK(pk.meta.traffic_class == 0);  // the AH's traffic class, untouched
    CHECK(pk.int_shim == 0);
    CHECK(pk.int_echo == 0);
  }
  const QpStats s = qstats(p.a, p.qa);
  CHECK(s.cc_rate_bps == 0);
  CHECK(s.cnps_received == 0);
  // AckReq only at the engine's own coalescing points (ack_every 16, last packet).
  CHECK(p.w.count([](const WirePkt& pk) { return is_request(pk, 0) && pk.ack_req; }) == 1);
  // A CNP to a QP of an engine without congestion control is dropped and counted.
  std::vector<std::byte> cnp(64);
  auto* raw = reinterpret_cast<uint8_t*>(cnp.data());
  const size_t n = sroce_cnp_write(raw, p.qa, 0xffff);
  std::fill(raw + n, raw + n + 4, 0);
  EngineConfig off = plain_cfg();
  off.icrc_offload = true;
  Host h(0x0a000009, 5, off);
  PacketMeta m;
  h->on_packet(std::span(cnp.data(), n + 4), m, Time::zero());
  CHECK(h->stats().rx_drop_reason[kRxDropCnp] == 1);
}

TEST_CASE("cc: the delay controller gets RTT samples and stays within its window", "[cc]") {
  Pair p({}, {}, {}, cc_cfg(cc::Algorithm::kDelay, Duration::micros(4)));
  // Each request reaches b 20 us later (a long queue): Swift must cut.
  p.w.filter = [&](const WirePkt& pk) {
    if (!is_request(pk, 0)) return Verdict::kDeliver;
    return Verdict::kHold;
  };
  post_write(p, 256 * 1024, 1);
  const uint64_t w0 = qstats(p.a, p.qa).cc_window_bytes;
  for (int round = 0; round < 200 && p.a.poll().empty(); ++round) {
    p.w.pump();
    p.w.now = p.w.now + Duration::micros(20);
    p.w.release();
    p.a->on_timer(p.w.now);
    p.b->on_timer(p.w.now);
  }
  const QpStats s = qstats(p.a, p.qa);
  CHECK(s.cc_window_bytes < w0);
  CHECK(s.cc_window_stalls > 0);
}
