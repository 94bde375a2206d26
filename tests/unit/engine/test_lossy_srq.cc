// Lossy mode on a shared receive queue (docs/lossy.md, "SENDs through an
// SRQ"): a SEND that arrives before the messages ahead of it takes the
// WQEs up to its own off the SRQ and is placed at once, completions still
// in PSN order; a QP in error flushes the WQEs it took and leaves the
// SRQ's others to the QPs that share it; a receive sequence number that no
// PSN can carry takes nothing off the shared queue.
#include <map>
#include <memory>
#include <set>

#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

struct SrqPair {
  explicit SrqPair(EngineConfig cfg, uint32_t srq_wr = 128)
      : a(0x0a000001, 11, cfg), b(0x0a000002, 22, cfg), w(a, b) {
    auto s = b->create_srq(b.pd, {srq_wr, 2, 0});
    REQUIRE(s.ok());
    srq = *s;
    for (int i = 0; i < 2; ++i) {
      qa[i] = make_qp(a);
      qb[i] = make_qp(b, {.srq = srq});
    }
    for (int i = 0; i < 2; ++i) {
      connect(a, qa[i], QpType::kRc, b, qb[i], {.mtu = Mtu::k1024, .timeout = 12});
      connect(b, qb[i], QpType::kRc, a, qa[i], {.mtu = Mtu::k1024, .timeout = 12});
    }
    // Negotiation (both QPs switch to lossy mode on their first request).
    for (int i = 0; i < 2; ++i)
      REQUIRE(post(a, qa[i], WrOpcode::kRdmaWrite, {sge(a, 0, 8)}, 900, kSendSignaled,
                   b.addr(0x7f0000), b.mr.rkey) == 0);
    REQUIRE(wait_wc(w, a, 2).size() == 2);
  }
  void post_srq(uint64_t wr_id, uint64_t off, uint32_t len) {
    RecvWr rw;
    rw.wr_id = wr_id;
    Sge s = sge(b, off, len);
    rw.sgl = {&s, 1};
    REQUIRE(b->post_srq_recv(srq, rw) == 0);
  }
  Host a, b;
  Wire w;
  Handle srq{};
  Qpn qa[2]{}, qb[2]{};
};

constexpr uint64_t kBuf = 0x100000, kStride = 0x4000;

// Posts SRQ WQEs 2000-2005; QP 0's first SEND never arrives and its next two
// (one packet each) do, early: QP 0 then holds 2000-2002, none completed.
void hold_three(SrqPair& p, uint8_t fill) {
  for (int i = 0; i < 6; ++i) p.post_srq(2000 + i, kBuf + kStride * i, 0x4000);
  p.a.mem.fill(p.a.addr(0), 0x10000, fill);
  auto first = std::make_shared<bool>(true);
  p.w.filter = [&p, first](const WirePkt& x) {
    if (x.from == 0 && x.dqpn == p.qb[0] && x.op() == SROCE_OP_SEND_ONLY && *first) {
      *first = false;
      return Verdict::kDrop;
    }
    return Verdict::kDeliver;
  };
  for (int i = 0; i < 3; ++i)
    REQUIRE(post(p.a, p.qa[0], WrOpcode::kSend, {sge(p.a, 0x1000u * i, 500)}, i) == 0);
  p.w.run(Duration::micros(30));
  CHECK(p.b.poll().empty());
}

// QP 1 sends `n` messages: they take the SRQ's WQEs from `first_wr` on, in
// order, each with its bytes (WQE 2000 + k's buffer is kBuf + kStride k).
void serve_qp1(SrqPair& p, int n, uint64_t first_wr) {
  for (int i = 0; i < n; ++i)
    REQUIRE(post(p.a, p.qa[1], WrOpcode::kSend, {sge(p.a, 0x8000u + 0x1000u * i, 600 + i)},
                 10 + i) == 0);
  std::vector<Wc> wb;
  p.w.run_until(
      [&] {
        for (const Wc& c : p.b.poll())
          if (c.qp_num == p.qb[1]) wb.push_back(c);
        return wb.size() >= static_cast<size_t>(n);
      },
      Duration::millis(20));
  REQUIRE(wb.size() == static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    INFO("completion " << i);
    CHECK(wb[i].status == WcStatus::kSuccess);
    CHECK(wb[i].wr_id == first_wr + i);
    CHECK(wb[i].byte_len == 600u + i);
    CHECK(p.b.mem.same(p.b.addr(kBuf + kStride * (first_wr - 2000 + i)), p.a.mem,
                       p.a.addr(0x8000u + 0x1000u * i), 600 + i));
  }
}

}  // namespace

TEST_CASE("lossy SRQ: SENDs reordered across lanes are placed early; no drop, no retransmission",
          "[lossy][srq]") {
  EngineConfig cfg = lossy_cfg(4);
  cfg.lossy.reorder_timeout = Duration::millis(1);
  SrqPair p(cfg);
  constexpr int kMsgs = 24;  // per QP
  for (int i = 0; i < 2 * kMsgs; ++i) p.post_srq(1000 + i, kBuf + kStride * i, 0x4000);
  p.a.mem.fill(p.a.addr(0), 0x80000, 21);
  // Lane 3 is the slow path: its packets wait until the other lanes are quiet.
  p.w.filter = [&](const WirePkt& x) {
    if (x.from == 0 && x.ext && x.req.lane == 3) return Verdict::kHold;
    return Verdict::kDeliver;
  };
  // The two QPs' messages interleave; 1-9 packets each.
  auto src_off = [](int q, int i) { return static_cast<uint64_t>(0x1000 * (i + 40 * q)); };
  auto len_of = [](int q, int i) { return static_cast<uint32_t>(700 + 1013 * ((i * 5 + q) % 9)); };
  for (int i = 0; i < kMsgs; ++i)
    for (int q = 0; q < 2; ++q)
      REQUIRE(post(p.a, p.qa[q], WrOpcode::kSend, {sge(p.a, src_off(q, i), len_of(q, i))},
                   100 * q + i) == 0);
  std::vector<Wc> wa = wait_wc(p.w, p.a, 2 * kMsgs, Duration::millis(200), [&] { p.w.release(); });
  REQUIRE(wa.size() == 2 * kMsgs);
  for (const Wc& c : wa) CHECK(c.status == WcStatus::kSuccess);
  std::vector<Wc> wb = wait_wc(p.w, p.b, 2 * kMsgs, Duration::millis(200));
  REQUIRE(wb.size() == 2 * kMsgs);
  // Per QP: completions in message order, each in a WQE posted later than
  // the one before (the QP takes SRQ WQEs in SRQ order), every byte as sent.
  std::map<Qpn, int> next;
  std::map<Qpn, uint64_t> last_wr;
  std::set<uint64_t> used;
  for (const Wc& c : wb) {
    REQUIRE(c.status == WcStatus::kSuccess);
    const int q = c.qp_num == p.qb[0] ? 0 : 1;
    REQUIRE(c.qp_num == p.qb[q]);
    const int i = next[c.qp_num]++;
    INFO("qp " << q << " message " << i << " " << wc_str(c));
    CHECK(c.byte_len == len_of(q, i));
    CHECK(c.wr_id >= 1000);
    CHECK(c.wr_id < 1000 + 2 * kMsgs);
    CHECK(used.insert(c.wr_id).second);
    if (last_wr.count(c.qp_num)) CHECK(c.wr_id > last_wr[c.qp_num]);
    last_wr[c.qp_num] = c.wr_id;
    const uint64_t dst = kBuf + kStride * (c.wr_id - 1000);
    CHECK(p.b.mem.same(p.b.addr(dst), p.a.mem, p.a.addr(src_off(q, i)), len_of(q, i)));
  }
  uint64_t depth = 0;
  for (int q = 0; q < 2; ++q) {
    const QpStats sa = qstats(p.a, p.qa[q]), sb = qstats(p.b, p.qb[q]);
    CHECK(sb.mode == QpMode::kLossy);
    CHECK(sa.retransmits == 0);
    CHECK(sb.losses_detected == 0);
    depth = std::max(depth, sb.max_reorder_depth);
  }
  CHECK(depth >= 2);  // the early SENDs did come early
  CHECK(p.b->stats().rx_drop_reason[kRxDropOutOfSequence] == 0);
  CHECK(p.b->stats().rx_drop_reason[kRxDropNoRecvWqe] == 0);
}

TEST_CASE("lossy SRQ: a QP in error flushes the WQEs it took; the others stay for the other QP",
          "[lossy][srq]") {
  EngineConfig cfg = lossy_cfg(4);
  cfg.lossy.reorder_timeout = Duration::millis(50);  // no repair inside the test's window
  SrqPair p(cfg);
  hold_three(p, 33);
  // The QP goes to error: the three come back flushed, on its CQ, in order.
  QpAttr at;
  at.qp_state = QpState::kErr;
  REQUIRE(p.b->modify_qp(p.qb[0], at, kQpState, p.w.now).ok());
  p.w.filter = nullptr;
  std::vector<Wc> fl = p.b.poll();
  REQUIRE(fl.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(fl[i].status == WcStatus::kWrFlushErr);
    CHECK(fl[i].wr_id == 2000u + i);
    CHECK(fl[i].qp_num == p.qb[0]);
  }
  // The SRQ's other three serve QP 1.
  serve_qp1(p, 3, 2003);
}

TEST_CASE("lossy SRQ: a receive sequence number beyond its PSN takes nothing off the SRQ",
          "[lossy][srq][security]") {
  EngineConfig cfg = lossy_cfg(1);
  cfg.lossy.reorder_timeout = Duration::millis(50);
  SrqPair p(cfg, 16);
  for (int i = 0; i < 4; ++i) p.post_srq(3000 + i, kBuf + kStride * i, 0x4000);
  p.a.mem.fill(p.a.addr(0), 0x1000, 44);
  // Capture one SEND, then deliver a copy whose RSN names the 4th message
  // ahead while its PSN is the next one: no such message can exist.
  p.w.filter = [&](const WirePkt& x) {
    return x.from == 0 && x.op() == SROCE_OP_SEND_ONLY ? Verdict::kHold : Verdict::kDeliver;
  };
  REQUIRE(post(p.a, p.qa[0], WrOpcode::kSend, {sge(p.a, 0, 300)}, 1) == 0);
  p.w.run(Duration::micros(5));
  REQUIRE(p.w.held.size() == 1);
  WirePkt f = p.w.held[0];
  p.w.held.clear();
  REQUIRE(f.ext);
  const size_t at = f.bytes.size() - SROCE_ICRC_LEN - SROCE_LEH_LEN;
  sroce_leh_req r{};
  sroce_leh_req_read(reinterpret_cast<const uint8_t*>(f.bytes.data() + at), &r);
  r.rsn = (r.rsn + 3) & 0xffffff;
  sroce_leh_req_write(reinterpret_cast<uint8_t*>(f.bytes.data() + at), &r);
  reicrc(f.bytes, f.meta);
  const uint64_t invalid0 = p.b->stats().rx_drop_reason[kRxDropInvalid];
  p.w.deliver(f);
  CHECK(p.b->stats().rx_drop_reason[kRxDropInvalid] == invalid0 + 1);
  CHECK(p.b.poll().empty());
  // The other QP still gets the SRQ's first WQE: the forged copy took none.
  p.w.filter = nullptr;
  REQUIRE(post(p.a, p.qa[1], WrOpcode::kSend, {sge(p.a, 0x800, 200)}, 2) == 0);
  std::vector<Wc> wb = wait_wc(p.w, p.b, 1, Duration::millis(5));
  REQUIRE(wb.size() >= 1);
  CHECK(wb[0].qp_num == p.qb[1]);
  CHECK(wb[0].wr_id == 3000);
  CHECK(wb[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(kBuf), p.a.mem, p.a.addr(0x800), 200));
}

// A QP that goes to RESET (or is destroyed) without passing through ERR used
// none of the SRQ WQEs it held: they return to the front of the SRQ and serve
// the QP that shares it, in their order; those the SRQ has no room for (it was
// refilled meanwhile) complete as flushed, oldest first, so that no receive
// buffer is lost without a word.
TEST_CASE("lossy SRQ: a QP reset or destroyed returns the WQEs it held to the SRQ", "[lossy][srq]") {
  for (const int how : {0, 1, 2}) {
    DYNAMIC_SECTION((how == 0 ? "reset" : how == 1 ? "destroy" : "reset, the SRQ refilled")) {
      EngineConfig cfg = lossy_cfg(4);
      cfg.lossy.reorder_timeout = Duration::millis(50);  // no repair inside the test's window
      SrqPair p(cfg, 6);
      hold_three(p, 35);
      // Room in the SRQ for three more: refilled, the held three no longer fit.
      if (how == 2)
        for (int i = 6; i < 9; ++i) p.post_srq(2000 + i, kBuf + kStride * i, 0x4000);
      // qa[0] stops too: its retransmissions would only meet a QP in RESET.
      QpAttr at;
      at.qp_state = QpState::kErr;
      REQUIRE(p.a->modify_qp(p.qa[0], at, kQpState, p.w.now).ok());
      (void)p.a.poll();
      if (how == 1) {
        REQUIRE(p.b->destroy_qp(p.qb[0]).ok());
      } else {
        at.qp_state = QpState::kReset;
        REQUIRE(p.b->modify_qp(p.qb[0], at, kQpState, p.w.now).ok());
      }
      p.w.filter = nullptr;
      std::vector<Wc> fl = p.b.poll();
      if (how == 2) {
        REQUIRE(fl.size() == 3);
        for (int i = 0; i < 3; ++i) {
          CHECK(fl[i].status == WcStatus::kWrFlushErr);
          CHECK(fl[i].wr_id == 2000u + i);
          CHECK(fl[i].qp_num == p.qb[0]);
        }
      } else {
        CHECK(fl.empty());
      }
      // QP 1 gets all six of the SRQ's WQEs, in order, with its data: the
      // three QP 0 held first, unless they no longer fitted.
      serve_qp1(p, 6, how == 2 ? 2003 : 2000);
    }
  }
}
