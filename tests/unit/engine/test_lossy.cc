// Lossy mode (docs/lossy.md): in-band negotiation and the fallback to
// compatible mode, selective repeat with SACK, lanes with per-lane sequences
// (reordering is not loss), the gap_is_loss baseline, trimmed packets, the
// RTO with backoff, lane health and the counters.
#include <algorithm>
#include <random>
#include <set>

#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

// Every operation kind once, checked end to end (used in both modes).
void all_ops(Pair& p) {
  p.a.mem.fill(p.a.addr(0), 20000, 7);
  // SEND (3 packets at MTU 1024), WRITE with immediate, READ, atomics.
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0x100000, 8192)}, 1) == 0);
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0x110000, 64)}, 2) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 3000)}, 11) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWriteWithImm, {sge(p.a, 4096, 5000)}, 12, kSendSignaled,
               p.b.addr(0x120000), p.b.mr.rkey, 0xabcd) == 0);
  p.b.mem.fill(p.b.addr(0x200000), 7000, 9);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x10000, 7000)}, 13, kSendSignaled,
               p.b.addr(0x200000), p.b.mr.rkey) == 0);
  p.b.mem.put64(p.b.addr(0x300000), 40);
  REQUIRE(post_atomic(p.a, p.qa, WrOpcode::kAtomicFetchAdd, sge(p.a, 0x18000, 8), 14,
                      p.b.addr(0x300000), p.b.mr.rkey, 2, 0) == 0);
  REQUIRE(post_atomic(p.a, p.qa, WrOpcode::kAtomicCmpSwp, sge(p.a, 0x18008, 8), 15,
                      p.b.addr(0x300000), p.b.mr.rkey, 42, 77) == 0);
  auto wa = wait_wc(p.w, p.a, 5);
  auto wb = wait_wc(p.w, p.b, 2);
  REQUIRE(wa.size() == 5);
  REQUIRE(wb.size() == 2);
  for (size_t i = 0; i < wa.size(); ++i) {
    CHECK(wa[i].status == WcStatus::kSuccess);
    CHECK(wa[i].wr_id == 11 + i);  // in posting order
  }
  CHECK(wb[0].wr_id == 1);
  CHECK(wb[0].byte_len == 3000);
  CHECK(wb[1].wr_id == 2);
  CHECK(wb[1].opcode == WcOpcode::kRecvRdmaWithImm);
  CHECK(wb[1].imm_data == 0xabcd);
  CHECK(wb[1].byte_len == 5000);
  CHECK(p.b.mem.same(p.b.addr(0x100000), p.a.mem, p.a.addr(0), 3000));
  CHECK(p.b.mem.same(p.b.addr(0x120000), p.a.mem, p.a.addr(4096), 5000));
  CHECK(p.a.mem.same(p.a.addr(0x10000), p.b.mem, p.b.addr(0x200000), 7000));
  CHECK(p.a.mem.get64(p.a.addr(0x18000)) == 40);
  CHECK(p.a.mem.get64(p.a.addr(0x18008)) == 42);
  CHECK(p.b.mem.get64(p.b.addr(0x300000)) == 77);
}

}  // namespace

TEST_CASE("lossy negotiation: against a compatible-only peer the QP stays go-back-N", "[lossy]") {
  EngineConfig off;
  off.lossy.enable = false;
  // a offers lossy mode, b does not (as a plain RoCEv2 peer would).
  Host a(0x0a000001, 11, lossy_cfg()), b(0x0a000002, 22, off);
  Wire w(a, b);
  const Qpn qa = make_qp(a), qb = make_qp(b);
  connect(a, qa, QpType::kRc, b, qb, {.mtu = Mtu::k1024});
  connect(b, qb, QpType::kRc, a, qa, {.mtu = Mtu::k1024});
  a.mem.fill(a.addr(0), 8000, 3);
  REQUIRE(post_recv(b, qb, {sge(b, 0x100000, 8192)}, 1) == 0);
  REQUIRE(post(a, qa, WrOpcode::kSend, {sge(a, 0, 3000)}, 11) == 0);
  REQUIRE(post(a, qa, WrOpcode::kRdmaWrite, {sge(a, 0, 5000)}, 12, kSendSignaled,
               b.addr(0x120000), b.mr.rkey) == 0);
  b.mem.fill(b.addr(0x200000), 5000, 5);
  REQUIRE(post(a, qa, WrOpcode::kRdmaRead, {sge(a, 0x10000, 5000)}, 13, kSendSignaled,
               b.addr(0x200000), b.mr.rkey) == 0);
  REQUIRE(post_atomic(a, qa, WrOpcode::kAtomicFetchAdd, sge(a, 0x18000, 8), 14, b.addr(0x300000),
                      b.mr.rkey, 5, 0) == 0);
  // Loss on the way: go-back-N (a NAK sequence error) must recover it.
  bool dropped = false;
  w.filter = [&](const WirePkt& x) {
    if (x.from == 0 && x.op() == SROCE_OP_WRITE_MIDDLE && !dropped) {
      dropped = true;
      return Verdict::kDrop;
    }
    return Verdict::kDeliver;
  };
  auto wa = wait_wc(w, a, 4);
  auto wb = wait_wc(w, b, 1);
  REQUIRE(wa.size() == 4);
  for (auto& c : wa) CHECK(c.status == WcStatus::kSuccess);
  REQUIRE(wb.size() == 1);
  CHECK(b.mem.same(b.addr(0x100000), a.mem, a.addr(0), 3000));
  CHECK(b.mem.same(b.addr(0x120000), a.mem, a.addr(0), 5000));
  CHECK(a.mem.same(a.addr(0x10000), b.mem, b.addr(0x200000), 5000));
  CHECK(dropped);
  // a offered (CAP on its packets); b never did; nobody sent a trailer.
  CHECK(w.count([](const WirePkt& x) { return x.from == 0 && !x.cap; }) == 0);
  CHECK(w.count([](const WirePkt& x) { return x.from == 1 && x.cap; }) == 0);
  CHECK(w.count([](const WirePkt& x) { return x.ext; }) == 0);
  CHECK(w.count([](const WirePkt& x) { return x.is_nak(); }) >= 1);  // go-back-N was used
  CHECK(qstats(a, qa).mode == QpMode::kCompatible);
  CHECK(qstats(b, qb).mode == QpMode::kCompatible);
  // One source port: compatible mode has no lanes.
  std::set<uint16_t> ports;
  for (auto& x : w.log)
    if (x.from == 0) ports.insert(x.meta.src_port);
  CHECK(ports.size() == 1);
}

TEST_CASE("lossy negotiation: two lossy engines switch, every operation works", "[lossy]") {
  Pair p({}, {.mtu = Mtu::k1024}, {}, lossy_cfg(4));
  warm_up(p);
  const size_t before = p.w.log.size();
  CHECK(p.w.count([](const WirePkt& x) { return x.ext; }) == 0);  // the first WQE is compatible
  all_ops(p);
  CHECK(qstats(p.a, p.qa).mode == QpMode::kLossy);
  CHECK(qstats(p.b, p.qb).mode == QpMode::kLossy);
  // After the switch every request from a carries the trailer; b's ACKs do.
  size_t reqs = 0, acks = 0;
  std::set<uint16_t> ports;
  for (size_t i = before; i < p.w.log.size(); ++i) {
    const WirePkt& x = p.w.log[i];
    if (x.from == 0) {
      CHECK(x.ext);
      ++reqs;
      ports.insert(x.meta.src_port);
      CHECK(x.meta.src_port >= 49152);
      CHECK(x.req.lane < 4);
    } else if (x.op() == SROCE_OP_ACK) {
      CHECK(x.ext);
      ++acks;
    }
  }
  CHECK(reqs > 0);
  CHECK(acks > 0);
  CHECK(ports.size() == 4);  // sprayed over the 4 lanes
  LaneStats ls[8];
  CHECK(p.a->lane_stats(p.qa, ls) == 4);
  uint64_t tx = 0;
  for (int i = 0; i < 4; ++i) {
    CHECK(ls[i].active);
    CHECK(ls[i].tx_packets > 0);
    tx += ls[i].tx_packets;
  }
  CHECK(tx == reqs);
  CHECK(p.a->lane_stats(0xabcdef, ls) == 0);
}

TEST_CASE("lossy RTT: srtt from ACK timing, per QP and per lane", "[lossy]") {
  Pair p({}, {.mtu = Mtu::k1024}, {}, lossy_cfg(2));
  warm_up(p);
  p.a.mem.fill(p.a.addr(0), 8192, 2);
  // Every ACK takes 10 us to come back.
  p.w.filter = [&](const WirePkt& x) { return x.from == 1 ? Verdict::kHold : Verdict::kDeliver; };
  for (int i = 0; i < 8; ++i)
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 2048)}, 1 + i, kSendSignaled,
                 p.b.addr(0x10000), p.b.mr.rkey) == 0);
  std::vector<Wc> got;
  for (int guard = 0; guard < 1000 && got.size() < 8; ++guard) {
    p.w.pump();
    p.w.now += Duration::micros(10);
    p.w.release();
    auto v = p.a.poll();
    got.insert(got.end(), v.begin(), v.end());
  }
  REQUIRE(got.size() == 8);
  const int64_t srtt = qstats(p.a, p.qa).srtt_ps;
  CHECK(srtt >= Duration::micros(9).ps);
  CHECK(srtt <= Duration::micros(21).ps);
  LaneStats ls[2];
  REQUIRE(p.a->lane_stats(p.qa, ls) == 2);
  CHECK(ls[0].srtt_ps > 0);
  CHECK(ls[1].srtt_ps > 0);
}

TEST_CASE("selective repeat: one lost packet is resent alone, no timeout", "[lossy]") {
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 14}, {}, lossy_cfg(4));
  warm_up(p);
  p.a.mem.fill(p.a.addr(0), 16384, 4);
  uint32_t victim = 0;
  bool dropped = false;
  p.w.filter = [&](const WirePkt& x) {
    if (x.from == 0 && x.op() == SROCE_OP_WRITE_MIDDLE && !dropped) {
      dropped = true;
      victim = x.psn;
      return Verdict::kDrop;
    }
    return Verdict::kDeliver;
  };
  const size_t before = p.w.log.size();
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 16384)}, 1, kSendSignaled,
               p.b.addr(0x10000), p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 16384));
  REQUIRE(dropped);
  // Exactly the victim twice, every other PSN of the message once.
  for (size_t i = before; i < p.w.log.size(); ++i) {
    const WirePkt& x = p.w.log[i];
    if (x.from != 0) continue;
    CHECK(sent_with_psn(p.w, 0, x.psn) == (x.psn == victim ? 2u : 1u));
  }
  const QpStats sa = qstats(p.a, p.qa), sb = qstats(p.b, p.qb);
  CHECK(sa.timeouts == 0);
  CHECK(sa.selective_retransmits == 1);
  CHECK(sa.retransmits == 1);
  CHECK(sa.sacks_received > 0);
  CHECK(sb.sacks_sent > 0);
  CHECK(sb.losses_detected == 1);
  CHECK(sb.naks_sent == 0);  // no go-back-N NAK in lossy mode
  CHECK(sa.spurious_retransmits == 0);
  CHECK(sb.max_reorder_depth >= 1);
}

TEST_CASE("lanes: pure reordering across lanes causes no retransmission", "[lossy]") {
  for (const bool naive : {false, true}) {
    DYNAMIC_SECTION((naive ? "gap_is_loss baseline" : "per-lane sequences")) {
      EngineConfig cfg = lossy_cfg(4);
      cfg.lossy.gap_is_loss = naive;
      cfg.lossy.reorder_timeout = Duration::millis(1);
      Pair p({}, {.mtu = Mtu::k1024, .timeout = 14}, {}, cfg);
      warm_up(p);
      p.a.mem.fill(p.a.addr(0), 65536, 5);
      // Lane 3 is a slow path: its packets are held and delivered after the
      // others of their burst (the order inside the lane is kept).
      p.w.filter = [&](const WirePkt& x) {
        if (x.from == 0 && x.ext && x.req.lane == 3) return Verdict::kHold;
        return Verdict::kDeliver;
      };
      REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0x100000, 65536)}, 1) == 0);
      REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 65536)}, 1, kSendSignaled,
                   p.b.addr(0x10000), p.b.mr.rkey) == 0);
      REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 20000)}, 2) == 0);
      std::vector<Wc> wa;
      p.w.run_until(
          [&] {
            p.w.release();  // the slow lane catches up once the fast ones are quiet
            auto v = p.a.poll();
            wa.insert(wa.end(), v.begin(), v.end());
            return wa.size() >= 2;
          },
          Duration::millis(100));
      REQUIRE(wa.size() == 2);
      CHECK(wa[0].status == WcStatus::kSuccess);
      CHECK(wa[1].status == WcStatus::kSuccess);
      auto wb = wait_wc(p.w, p.b, 1);
      REQUIRE(wb.size() == 1);
      CHECK(wb[0].byte_len == 20000);
      CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 65536));
      CHECK(p.b.mem.same(p.b.addr(0x100000), p.a.mem, p.a.addr(0), 20000));
      const QpStats sa = qstats(p.a, p.qa), sb = qstats(p.b, p.qb);
      if (!naive) {
        CHECK(sb.max_reorder_depth >= 2);
        CHECK(sa.retransmits == 0);
        CHECK(sa.spurious_retransmits == 0);
        CHECK(sb.losses_detected == 0);
      } else {
        // The IRN-style receiver takes the reordering for loss.
        CHECK(sb.losses_detected > 0);
        CHECK(sa.retransmits > 0);
        CHECK(sa.spurious_retransmits > 0);
      }
    }
  }
}

TEST_CASE("lanes: a gap inside one lane is a loss at once", "[lossy]") {
  EngineConfig cfg = lossy_cfg(4);
  cfg.lossy.reorder_timeout = Duration::millis(5);  // the timer must not be what finds it
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 18}, {}, cfg);
  warm_up(p);
  p.a.mem.fill(p.a.addr(0), 32768, 6);
  bool dropped = false;
  uint32_t victim = 0;
  p.w.filter = [&](const WirePkt& x) {
    if (x.from == 0 && x.ext && x.req.lane == 2 && !dropped && x.op() == SROCE_OP_WRITE_MIDDLE) {
      dropped = true;
      victim = x.psn;
      return Verdict::kDrop;
    }
    return Verdict::kDeliver;
  };
  const Time t0 = p.w.now;
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 32768)}, 1, kSendSignaled,
               p.b.addr(0x10000), p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 32768));
  CHECK(p.w.now - t0 < Duration::millis(1));  // neither the reorder timer nor the RTO
  CHECK(sent_with_psn(p.w, 0, victim) == 2);
  LaneStats ls[4];
  REQUIRE(p.b->lane_stats(p.qb, ls) == 4);
  CHECK(ls[2].losses_detected == 1);
  REQUIRE(p.a->lane_stats(p.qa, ls) == 4);
  CHECK(ls[2].naks == 1);
}

TEST_CASE("trimmed packet: an immediate precise retransmission", "[lossy]") {
  EngineConfig cfg = lossy_cfg(1);
  cfg.lossy.reorder_timeout = Duration::millis(5);
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 18}, {}, cfg);
  warm_up(p);
  p.a.mem.fill(p.a.addr(0), 8192, 8);
  bool trimmed = false;
  uint32_t victim = 0;
  p.w.filter = [&](const WirePkt& x) {
    if (x.from == 0 && x.ext && x.op() == SROCE_OP_WRITE_LAST && !trimmed) {
      trimmed = true;
      victim = x.psn;
      return Verdict::kHold;  // delivered trimmed below
    }
    return Verdict::kDeliver;
  };
  const Time t0 = p.w.now;
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 8192)}, 1, kSendSignaled,
               p.b.addr(0x10000), p.b.mr.rkey) == 0);
  p.w.pump();
  REQUIRE(p.w.held.size() == 1);
  WirePkt cut = p.w.held[0];
  p.w.held.clear();
  cut.bytes.resize(SROCE_BTH_LEN + 4);  // headers only: payload, trailer and ICRC are gone
  cut.meta.trimmed = true;
  p.w.deliver(cut);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 8192));
  CHECK(p.w.now - t0 < Duration::millis(1));
  CHECK(sent_with_psn(p.w, 0, victim) == 2);
  CHECK(qstats(p.b, p.qb).trims_received == 1);
  CHECK(qstats(p.a, p.qa).timeouts == 0);
  CHECK(p.b->stats().rx_bad_icrc == 0);
}

TEST_CASE("lossy RTO: a lost tail is resent after the timeout, with backoff", "[lossy]") {
  EngineConfig cfg = lossy_cfg(1);
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 8, .retry_cnt = 7}, {}, cfg);
  warm_up(p);
  p.a.mem.fill(p.a.addr(0), 4096, 9);
  // Drop the WRITE's last packet three times: only the RTO can find a lost tail
  // (one lane, nothing after it).
  int drops = 0;
  std::vector<Time> sent;
  p.w.filter = [&](const WirePkt& x) {
    if (x.from == 0 && x.ext && x.op() == SROCE_OP_WRITE_LAST) {
      sent.push_back(p.w.now);
      if (drops < 3) {
        ++drops;
        return Verdict::kDrop;
      }
    }
    return Verdict::kDeliver;
  };
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 4096)}, 1, kSendSignaled,
               p.b.addr(0x10000), p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 4096));
  REQUIRE(sent.size() == 4);
  // Each wait is about twice the previous one (exponential backoff).
  const int64_t g1 = (sent[2] - sent[1]).ps, g2 = (sent[3] - sent[2]).ps;
  CHECK(g2 > g1 * 3 / 2);
  CHECK(qstats(p.a, p.qa).timeouts == 3);
}

TEST_CASE("lane health: a lane that keeps losing is retired", "[lossy]") {
  EngineConfig cfg = lossy_cfg(4);
  Pair p(QpOpts{.max_send_wr = 256, .max_recv_wr = 256}, {.mtu = Mtu::k1024, .timeout = 14}, {},
         cfg);
  warm_up(p);
  p.a.mem.fill(p.a.addr(0), 65536, 10);
  // Lane 1 is a black hole.
  p.w.filter = [&](const WirePkt& x) {
    if (x.from == 0 && x.ext && x.req.lane == 1) return Verdict::kDrop;
    return Verdict::kDeliver;
  };
  for (int i = 0; i < 4; ++i)
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 65536)}, 1 + i, kSendSignaled,
                 p.b.addr(0x100000), p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 4);
  REQUIRE(wa.size() == 4);
  for (auto& c : wa) CHECK(c.status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x100000), p.a.mem, p.a.addr(0), 65536));
  LaneStats ls[4];
  REQUIRE(p.a->lane_stats(p.qa, ls) == 4);
  CHECK(ls[1].naks > 0);
  CHECK(ls[1].tx_packets < ls[0].tx_packets);  // it stopped getting new packets
  CHECK(ls[0].active);
  CHECK(ls[2].active);
}

TEST_CASE("lossy trailers: field positions and round trip", "[lossy][wire]") {
  uint8_t b[SROCE_LEH_LEN];
  sroce_leh_req r{};
  r.lane = 7;
  r.flags = SROCE_LEH_F_RETX;
  r.lane_seq = 0x1234;
  r.prev_psn = 0xabcdef | SROCE_LEH_PSN_VALID;
  r.rsn = 0x1fedcba;  // only 24 bits travel
  r.offset = 0x01020304;
  r.va = 0x1122334455667788ull;
  r.rkey = 0xdeadbeef;
  sroce_leh_req_write(b, &r);
  CHECK(b[0] == 7);
  CHECK(b[1] == SROCE_LEH_F_RETX);
  CHECK((b[2] == 0x12 && b[3] == 0x34));
  CHECK((b[4] == 0x80 && b[5] == 0xab && b[7] == 0xef));
  CHECK((b[8] == 0 && b[9] == 0xfe && b[11] == 0xba));
  CHECK((b[16] == 0x11 && b[23] == 0x88));
  CHECK((b[24] == 0xde && b[27] == 0xef));
  sroce_leh_req q{};
  sroce_leh_req_read(b, &q);
  CHECK(q.lane == 7);
  CHECK(q.lane_seq == 0x1234);
  CHECK(q.prev_psn == (0xabcdefu | SROCE_LEH_PSN_VALID));
  CHECK(q.rsn == 0xfedcbau);
  CHECK(q.offset == 0x01020304u);
  CHECK(q.va == 0x1122334455667788ull);
  CHECK(q.rkey == 0xdeadbeefu);
  CHECK(q.retired == 0);
  CHECK(q.retired_chunk == 0);
  // The retired-lane bitmap rides in bits 31:24 of rsn, its chunk in bits
  // 26:24 of prev_psn; neither disturbs the PSN or the RSN.
  r.retired = 0xa5;
  r.retired_chunk = 6;
  r.flags = SROCE_LEH_F_PROBE;
  sroce_leh_req_write(b, &r);
  CHECK(b[1] == SROCE_LEH_F_PROBE);
  CHECK((b[4] == 0x86 && b[5] == 0xab && b[7] == 0xef));
  CHECK((b[8] == 0xa5 && b[9] == 0xfe && b[11] == 0xba));
  sroce_leh_req_read(b, &q);
  CHECK(q.retired == 0xa5);
  CHECK(q.retired_chunk == 6);
  CHECK(q.prev_psn == (0xabcdefu | SROCE_LEH_PSN_VALID));
  CHECK(q.rsn == 0xfedcbau);

  sroce_leh_ack a{};
  a.echo_lane = 3;
  a.echo_psn = 0x000102 | SROCE_LEH_PSN_VALID;
  a.sack = 0x8000000000000001ull;
  a.rtx = 0x2;
  a.dup_total = 9;
  sroce_leh_ack_write(b, &a);
  CHECK(b[0] == 3);
  CHECK((b[2] == 0 && b[3] == 0));
  CHECK((b[8] == 0x80 && b[15] == 0x01));
  CHECK(b[23] == 0x02);
  CHECK(b[27] == 9);
  sroce_leh_ack c{};
  sroce_leh_ack_read(b, &c);
  CHECK(c.sack == a.sack);
  CHECK(c.rtx == a.rtx);
  CHECK(c.echo_psn == a.echo_psn);
  CHECK(c.dup_total == 9);
}

TEST_CASE("lossy, random loss / duplication / reordering / trims: exactly-once, in order",
          "[lossy][random]") {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    DYNAMIC_SECTION("seed " << seed) {
      EngineConfig cfg = lossy_cfg(seed % 3 == 0 ? 1 : seed % 3 == 1 ? 4 : 16);
      cfg.lossy.reorder_timeout = Duration::micros(200);
      Pair p(QpOpts{.max_send_wr = 128, .max_recv_wr = 128},
             {.mtu = Mtu::k1024, .timeout = 10, .retry_cnt = 7}, {}, cfg);
      warm_up(p);
      std::mt19937 rng(seed);
      std::uniform_int_distribution<int> pct(0, 99);
      uint64_t trims = 0;
      p.w.filter = [&](const WirePkt& x) {
        const int r = pct(rng);
        if (r < 5) return Verdict::kDrop;
        if (r < 8) return Verdict::kDuplicate;
        if (r < 13) return Verdict::kHold;
        if (r < 16 && x.from == 0 && x.ext && x.payload_len > 0) {
          WirePkt cut = x;
          cut.bytes.resize(SROCE_BTH_LEN + 16);
          cut.meta.trimmed = true;
          p.w.deliver(cut);
          ++trims;
          return Verdict::kDrop;
        }
        return Verdict::kDeliver;
      };
      p.a.mem.fill(p.a.addr(0), 65536, seed);
      p.b.mem.fill(p.b.addr(0x200000), 65536, seed + 50);
      constexpr int kOps = 40;
      std::vector<int> kind(kOps);
      std::vector<uint32_t> lens(kOps);
      for (int i = 0; i < kOps; ++i) {
        kind[i] = static_cast<int>(rng() % 3);
        lens[i] = 1 + rng() % 12000;
        post_mixed(p, i, kind[i], lens[i], 0x4000);
      }
      auto got = wait_wc(p.w, p.a, kOps, Duration::millis(5000), [&] { p.w.release(); });
      REQUIRE(got.size() == kOps);
      for (int i = 0; i < kOps; ++i) {
        INFO("wr " << i << " status " << to_string(got[i].status));
        CHECK(got[i].wr_id == static_cast<uint64_t>(i));  // exactly once, in order
        CHECK(got[i].status == WcStatus::kSuccess);
      }
      auto wb = wait_wc(p.w, p.b, static_cast<size_t>(std::count(kind.begin(), kind.end(), 0)));
      uint64_t prev = 0;
      bool first = true;
      for (auto& c : wb) {
        CHECK(c.status == WcStatus::kSuccess);
        if (!first) CHECK(c.wr_id > prev);  // receives in order
        prev = c.wr_id;
        first = false;
        CHECK(c.byte_len == lens[c.wr_id]);
      }
      CHECK(wb.size() == static_cast<size_t>(std::count(kind.begin(), kind.end(), 0)));
      check_mixed_data(p, kind, lens, 0x4000);
      CHECK(qstats(p.a, p.qa).mode == QpMode::kLossy);
      if (trims > 0) CHECK(qstats(p.b, p.qb).trims_received > 0);
    }
  }
}

TEST_CASE("lanes: a burst lost on one lane is found once every lane passed it", "[lossy]") {
  EngineConfig cfg = lossy_cfg(4);
  cfg.lossy.reorder_timeout = Duration::millis(5);  // not the timer
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 18}, {}, cfg);
  warm_up(p);
  p.a.mem.fill(p.a.addr(0), 65536, 12);
  int dropped = 0;
  std::vector<uint32_t> victims;
  p.w.filter = [&](const WirePkt& x) {
    if (x.from == 0 && x.ext && x.req.lane == 1 && dropped < 3 && x.op() == SROCE_OP_WRITE_MIDDLE) {
      ++dropped;
      victims.push_back(x.psn);
      return Verdict::kDrop;
    }
    return Verdict::kDeliver;
  };
  const Time t0 = p.w.now;
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 65536)}, 1, kSendSignaled,
               p.b.addr(0x10000), p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 65536));
  CHECK(p.w.now - t0 < Duration::millis(1));
  REQUIRE(victims.size() == 3);
  for (uint32_t v : victims) CHECK(sent_with_psn(p.w, 0, v) == 2);
  CHECK(qstats(p.a, p.qa).spurious_retransmits == 0);
  CHECK(qstats(p.b, p.qb).losses_detected == 3);
}

TEST_CASE("lossy config edge values: 0 lanes, 200 lanes, zero reorder timeout", "[lossy]") {
  for (const uint16_t lanes : {uint16_t{0}, uint16_t{200}}) {
    EngineConfig cfg = lossy_cfg(lanes);
    cfg.lossy.reorder_timeout = Duration{};
    Pair p({}, {.mtu = Mtu::k1024, .timeout = 12}, {}, cfg);
    warm_up(p);
    p.a.mem.fill(p.a.addr(0), 32768, 13);
    int n = 0;
    p.w.filter = [&](const WirePkt& x) {
      return x.from == 0 && x.ext && ++n % 7 == 0 ? Verdict::kDrop : Verdict::kDeliver;
    };
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 32768)}, 1, kSendSignaled,
                 p.b.addr(0x10000), p.b.mr.rkey) == 0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].status == WcStatus::kSuccess);
    CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 32768));
    LaneStats ls[kMaxLanes];
    CHECK(p.a->lane_stats(p.qa, ls) == (lanes == 0 ? 1u : kMaxLanes));
  }
}

TEST_CASE("lossy: SENDs through an SRQ under loss and reordering complete in order", "[lossy][srq]") {
  EngineConfig cfg = lossy_cfg(4);
  cfg.lossy.reorder_timeout = Duration::micros(100);
  Host a(0x0a000001, 11, cfg), b(0x0a000002, 22, cfg);
  Wire w(a, b);
  auto srq = b->create_srq(b.pd, {64, 2, 0});
  REQUIRE(srq.ok());
  const Qpn qa = make_qp(a), qb = make_qp(b, {.srq = *srq});
  connect(a, qa, QpType::kRc, b, qb, {.mtu = Mtu::k1024, .timeout = 10});
  connect(b, qb, QpType::kRc, a, qa, {.mtu = Mtu::k1024, .timeout = 10});
  a.mem.fill(a.addr(0), 65536, 14);
  // Warm up (negotiation) with a WRITE.
  REQUIRE(post(a, qa, WrOpcode::kRdmaWrite, {sge(a, 0, 8)}, 100, kSendSignaled, b.addr(0x7f0000),
               b.mr.rkey) == 0);
  REQUIRE(wait_wc(w, a, 1).size() == 1);
  std::mt19937 rng(5);
  w.filter = [&](const WirePkt& x) {
    const int r = static_cast<int>(rng() % 100);
    if (x.from == 0 && r < 6) return Verdict::kDrop;
    if (x.from == 0 && r < 14) return Verdict::kHold;
    return Verdict::kDeliver;
  };
  constexpr int kMsgs = 12;
  for (int i = 0; i < kMsgs; ++i) {
    RecvWr rw;
    rw.wr_id = 1000 + i;
    Sge s = sge(b, 0x100000 + 0x2000u * i, 8192);
    rw.sgl = {&s, 1};
    REQUIRE(b->post_srq_recv(*srq, rw) == 0);
  }
  for (int i = 0; i < kMsgs; ++i)
    REQUIRE(post(a, qa, WrOpcode::kSend, {sge(a, 0x1000u * i, 3000 + 100u * i)}, i) == 0);
  std::vector<Wc> got;
  w.run_until(
      [&] {
        w.release();
        auto v = a.poll();
        got.insert(got.end(), v.begin(), v.end());
        return got.size() >= kMsgs;
      },
      Duration::millis(2000));
  REQUIRE(got.size() == kMsgs);
  for (auto& c : got) CHECK(c.status == WcStatus::kSuccess);
  auto wb = wait_wc(w, b, kMsgs);
  REQUIRE(wb.size() == kMsgs);
  for (int i = 0; i < kMsgs; ++i) {
    CHECK(wb[i].wr_id == static_cast<uint64_t>(1000 + i));  // receives in order
    CHECK(wb[i].byte_len == 3000 + 100u * i);
    CHECK(b.mem.same(b.addr(0x100000 + 0x2000u * i), a.mem, a.addr(0x1000u * i), 3000 + 100u * i));
  }
  CHECK(qstats(a, qa).mode == QpMode::kLossy);
}

TEST_CASE("lossy: each direction negotiates on its own; a WRITE with imm waits for its WQE",
          "[lossy]") {
  Pair p({}, {.mtu = Mtu::k1024, .min_rnr_timer = 1}, {}, lossy_cfg(2));
  // b is the requester this time; a only answers (its ACKs carry CAP).
  REQUIRE(post(p.b, p.qb, WrOpcode::kRdmaWrite, {sge(p.b, 0, 8)}, 1, kSendSignaled,
               p.a.addr(0x7f0000), p.a.mr.rkey) == 0);
  REQUIRE(wait_wc(p.w, p.b, 1).size() == 1);
  p.b.mem.fill(p.b.addr(0), 9000, 15);
  // WRITE with immediate before a receive WQE exists: RNR NAK, then success.
  REQUIRE(post(p.b, p.qb, WrOpcode::kRdmaWriteWithImm, {sge(p.b, 0, 9000)}, 2, kSendSignaled,
               p.a.addr(0x10000), p.a.mr.rkey, 0x5151) == 0);
  p.w.run(Duration::micros(20));
  CHECK(p.w.count([](const WirePkt& x) { return x.from == 0 && x.is_rnr(); }) >= 1);
  REQUIRE(post_recv(p.a, p.qa, {sge(p.a, 0x30000, 16)}, 77) == 0);
  auto wb = wait_wc(p.w, p.b, 1);
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].status == WcStatus::kSuccess);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].wr_id == 77);
  CHECK(wa[0].opcode == WcOpcode::kRecvRdmaWithImm);
  CHECK(wa[0].imm_data == 0x5151);
  CHECK(wa[0].byte_len == 9000);
  CHECK(p.a.mem.same(p.a.addr(0x10000), p.b.mem, p.b.addr(0), 9000));
  CHECK(qstats(p.b, p.qb).mode == QpMode::kLossy);
  // a never sent a request: its requester side stays compatible, but its
  // receiver runs lossy mode (qp_stats reports either direction).
  CHECK(qstats(p.a, p.qa).mode == QpMode::kLossy);
  CHECK(p.w.count([](const WirePkt& x) { return x.from == 0 && x.ext && x.op() != SROCE_OP_ACK; }) ==
        0);
}

TEST_CASE("lossy: an RNR at commit takes back a SACK; the PSN is sent again", "[lossy]") {
  // One lane; the reorder timer (not the RTO) finds the second loss.
  EngineConfig cfg = lossy_cfg(1);
  cfg.lossy.reorder_timeout = Duration::millis(5);
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 14, .min_rnr_timer = 1}, {}, cfg);
  warm_up(p);
  p.a.mem.fill(p.a.addr(0), 4096, 16);
  // The WRITE with immediate's first packet is lost twice, so its other
  // packets are placed and SACKed before the commit finds no receive WQE. A
  // later WRITE loses its packet, so that after the RNR wait there is more
  // than the RNR PSN to resend (the RNR PSN must not be skipped as SACKed).
  int first_drops = 0;
  bool first_lost = false, only_lost = false;
  p.w.filter = [&](const WirePkt& x) {
    if (x.from == 0 && x.op() == SROCE_OP_WRITE_FIRST && first_drops < 2) {
      ++first_drops;
      first_lost = true;
      return Verdict::kDrop;
    }
    if (x.from == 0 && first_lost && x.op() == SROCE_OP_WRITE_ONLY && !only_lost) {
      only_lost = true;
      return Verdict::kDrop;
    }
    return Verdict::kDeliver;
  };
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWriteWithImm, {sge(p.a, 0, 4096)}, 1, kSendSignaled,
               p.b.addr(0x10000), p.b.mr.rkey, 0x77) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 512)}, 2, kSendSignaled,
               p.b.addr(0x20000), p.b.mr.rkey) == 0);
  p.w.pump();
  REQUIRE(first_lost);
  REQUIRE(only_lost);
  CHECK(p.w.count([](const WirePkt& x) { return x.from == 1 && x.ext && x.ack.sack != 0; }) >= 1);
  // The reorder timer asks for the first packet again; the commit then RNR NAKs.
  p.w.run_until(
      [&] { return p.w.count([](const WirePkt& x) { return x.from == 1 && x.is_rnr(); }) >= 1; },
      Duration::millis(50));
  CHECK(p.w.count([](const WirePkt& x) { return x.from == 1 && x.is_rnr(); }) >= 1);
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0x30000, 16)}, 5) == 0);
  auto wa = wait_wc(p.w, p.a, 2);
  REQUIRE(wa.size() == 2);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(wa[1].status == WcStatus::kSuccess);
  CHECK(qstats(p.a, p.qa).timeouts == 0);
  auto wb = wait_wc(p.w, p.b, 1);
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].imm_data == 0x77);
  CHECK(wb[0].byte_len == 4096);
  CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 4096));
  CHECK(p.b.mem.same(p.b.addr(0x20000), p.a.mem, p.a.addr(0), 512));
}
