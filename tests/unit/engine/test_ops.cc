// Every operation end to end between two engines: SEND (+imm, +invalidate),
// RDMA WRITE (+imm), READ, atomics, inline data, SGLs, segmentation at every
// MTU, UC, UD with GRH, SRQ, unsignaled completions, CQ notification.
#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

uint32_t count_op(const Wire& w, int from, uint8_t op) {
  return static_cast<uint32_t>(
      w.count([&](const WirePkt& p) { return p.from == from && p.op() == op; }));
}

}  // namespace

TEST_CASE("RC SEND small message is delivered and both sides complete", "[ops]") {
  Pair p;
  p.a.mem.fill(p.a.addr(0), 100, 1);
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0x1000, 256)}, 77) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 100)}, 5) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  auto wb = p.b.poll();
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].wr_id == 5);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(wa[0].opcode == WcOpcode::kSend);
  CHECK(wa[0].qp_num == p.qa);
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].wr_id == 77);
  CHECK(wb[0].status == WcStatus::kSuccess);
  CHECK(wb[0].opcode == WcOpcode::kRecv);
  CHECK(wb[0].byte_len == 100);
  CHECK(wb[0].qp_num == p.qb);
  CHECK(wb[0].src_qp == p.qa);
  CHECK(wb[0].wc_flags == 0);
  CHECK(p.b.mem.same(p.b.addr(0x1000), p.a.mem, p.a.addr(0), 100));
  // One SEND_ONLY with AckReq, one ACK back; the ACK carries MSN 1.
  REQUIRE(p.w.log.size() == 2);
  CHECK(p.w.log[0].op() == SROCE_OP_SEND_ONLY);
  CHECK(p.w.log[0].ack_req);
  CHECK(p.w.log[0].psn == 100);
  CHECK(p.w.log[1].is_ack());
  CHECK(p.w.log[1].psn == 100);
  CHECK((p.w.log[1].syndrome & 0x1f) == SROCE_AETH_CREDIT_INVALID);
  CHECK(p.w.log[1].msn == 1);
}

TEST_CASE("MSN counts completed messages - READ responses carry it", "[ops]") {
  // Compatible mode: a coalesced ACK carries the MSN of its own PSN (a lossy
  // receiver's ACK reports the MSN as of sending, with its SACK state).
  EngineConfig cfg;
  cfg.lossy.enable = false;
  Pair p({}, {.mtu = Mtu::k256}, {}, cfg);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 600)}, 1, kSendSignaled, p.b.addr(0),
               p.b.mr.rkey) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 10)}, 2, kSendSignaled, p.b.addr(0),
               p.b.mr.rkey) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0, 600)}, 3, kSendSignaled, p.b.addr(0),
               p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 3);
  REQUIRE(wa.size() == 3);
  uint32_t last_ack_msn = 0, first_resp_msn = 0, last_resp_msn = 0;
  for (auto& x : p.w.log) {
    if (x.is_ack()) last_ack_msn = x.msn;
    if (x.op() == SROCE_OP_READ_RESP_FIRST) first_resp_msn = x.msn;
    if (x.op() == SROCE_OP_READ_RESP_LAST) last_resp_msn = x.msn;
  }
  CHECK(last_ack_msn == 2);  // two WRITEs completed when the last ACK went out
  CHECK(first_resp_msn == 3);
  CHECK(last_resp_msn == 3);
}

TEST_CASE("transmit: round-robin over QPs / responses before requests", "[ops][tx]") {
  // Quanta of one packet (train_bytes 0): the QPs alternate packet by packet
  // (test_lossy_trains.cc checks the quanta of train_bytes).
  EngineConfig one;
  one.lossy.train_bytes = 0;
  Host a(0x0a000001, 1, one), b(0x0a000002, 2, one);
  Qpn a1 = make_qp(a), a2 = make_qp(a), b1 = make_qp(b), b2 = make_qp(b);
  connect(a, a1, QpType::kRc, b, b1, {.mtu = Mtu::k256});
  connect(a, a2, QpType::kRc, b, b2, {.mtu = Mtu::k256});
  connect(b, b1, QpType::kRc, a, a1, {.mtu = Mtu::k256});
  connect(b, b2, QpType::kRc, a, a2, {.mtu = Mtu::k256});
  REQUIRE(post(a, a1, WrOpcode::kRdmaWrite, {sge(a, 0, 4 * 256)}, 1, kSendSignaled, b.addr(0),
               b.mr.rkey) == 0);
  REQUIRE(post(a, a2, WrOpcode::kRdmaWrite, {sge(a, 0, 4 * 256)}, 2, kSendSignaled, b.addr(0),
               b.mr.rkey) == 0);
  std::vector<std::byte> buf(Engine::kMaxPacket);
  std::vector<Qpn> order;
  while (auto tx = a->poll_transmit(buf, Time::zero())) {
    WirePkt w = Wire::make(0, std::span(buf.data(), tx->len), tx->meta);
    order.push_back(w.dqpn);
    b->on_packet(std::span(buf.data(), tx->len), tx->meta, Time::zero());
  }
  REQUIRE(order.size() == 8);
  for (size_t i = 0; i < order.size(); ++i)
    CHECK(order[i] == (i % 2 == 0 ? b1 : b2));  // alternating
  // b owes two ACKs; give b requests of its own too: the ACKs go out first.
  REQUIRE(post(b, b1, WrOpcode::kRdmaWrite, {sge(b, 0, 256)}, 3, kSendSignaled, a.addr(0),
               a.mr.rkey) == 0);
  std::vector<uint8_t> ops;
  while (auto tx = b->poll_transmit(buf, Time::zero()))
    ops.push_back(Wire::make(1, std::span(buf.data(), tx->len), tx->meta).op());
  REQUIRE(ops.size() == 3);
  CHECK(ops[0] == SROCE_OP_ACK);
  CHECK(ops[1] == SROCE_OP_ACK);
  CHECK(ops[2] == SROCE_OP_WRITE_ONLY);
}

TEST_CASE("COMM_EST when a request reaches a QP in RTR", "[ops]") {
  Host a(0x0a000001, 1), b(0x0a000002, 2);
  Wire w(a, b);
  Qpn qa = make_qp(a), qb = make_qp(b);
  connect(a, qa, QpType::kRc, b, qb);
  to_init(b, qb, QpType::kRc);
  to_rtr(b, qb, QpType::kRc, a, qa);
  REQUIRE(post_recv(b, qb, {sge(b, 0, 64)}, 1) == 0);
  REQUIRE(post(a, qa, WrOpcode::kSend, {sge(a, 0, 8)}, 1) == 0);
  auto wa = wait_wc(w, a, 1);  // RTR receives and acknowledges
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  auto ev = b.events();
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].type == AsyncEventType::kCommEst);
  CHECK(ev[0].element == qb);
}

TEST_CASE("RC SEND with immediate and zero-length SEND", "[ops]") {
  Pair p;
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 64)}, 1) == 0);
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 64, 64)}, 2) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSendWithImm, {sge(p.a, 0, 10)}, 10, kSendSignaled, 0, 0,
               0xdeadbeef) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {}, 11) == 0);
  auto wa = wait_wc(p.w, p.a, 2);
  auto wb = p.b.poll();
  REQUIRE(wb.size() == 2);
  CHECK(wb[0].wr_id == 1);
  CHECK(wb[0].byte_len == 10);
  CHECK(wb[0].imm_data == 0xdeadbeef);
  CHECK(wb[0].wc_flags == kWcWithImm);
  CHECK(wb[1].wr_id == 2);
  CHECK(wb[1].byte_len == 0);
  CHECK(wb[1].wc_flags == 0);
  CHECK(count_op(p.w, 0, SROCE_OP_SEND_ONLY_IMM) == 1);
}

TEST_CASE("RC SEND with invalidate invalidates the peer's R_Key", "[ops]") {
  Pair p;
  auto k = p.b->reg_mr(p.b.pd, p.b.addr(0x10000), 4096, kAccessLocalWrite | kAccessRemoteWrite);
  REQUIRE(k.ok());
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 64)}, 1) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSendWithInv, {sge(p.a, 0, 8)}, 1, kSendSignaled, 0, 0,
               k->rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  auto wb = p.b.poll();
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].wc_flags == kWcWithInv);
  CHECK(wb[0].imm_data == k->rkey);
  CHECK(count_op(p.w, 0, SROCE_OP_SEND_ONLY_INV) == 1);
  // The invalidated R_Key no longer grants access.
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 8)}, 2, kSendSignaled,
               p.b.addr(0x10000), k->rkey) == 0);
  wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kRemAccessErr);
}

TEST_CASE("RC RDMA WRITE and WRITE with immediate", "[ops]") {
  Pair p;
  p.a.mem.fill(p.a.addr(0), 5000, 3);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 5000)}, 1, kSendSignaled,
               p.b.addr(0x20000), p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(wa[0].opcode == WcOpcode::kRdmaWrite);
  CHECK(p.b.mem.same(p.b.addr(0x20000), p.a.mem, p.a.addr(0), 5000));
  CHECK(p.b.poll().empty());  // a plain WRITE consumes no receive WQE

  REQUIRE(post_recv(p.b, p.qb, {}, 9) == 0);  // WRITE with imm needs a WQE, even without SGEs
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWriteWithImm, {sge(p.a, 100, 2000)}, 2, kSendSignaled,
               p.b.addr(0x30000), p.b.mr.rkey, 0x1234) == 0);
  wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  auto wb = p.b.poll();
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].wr_id == 9);
  CHECK(wb[0].opcode == WcOpcode::kRecvRdmaWithImm);
  CHECK(wb[0].byte_len == 2000);
  CHECK(wb[0].imm_data == 0x1234);
  CHECK(wb[0].wc_flags == kWcWithImm);
  CHECK(p.b.mem.same(p.b.addr(0x30000), p.a.mem, p.a.addr(100), 2000));
  CHECK(count_op(p.w, 0, SROCE_OP_WRITE_LAST_IMM) == 1);
}

TEST_CASE("RC RDMA READ", "[ops]") {
  Pair p;
  p.b.mem.fill(p.b.addr(0x40000), 10000, 9);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x1000, 10000)}, 3, kSendSignaled,
               p.b.addr(0x40000), p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(wa[0].opcode == WcOpcode::kRdmaRead);
  CHECK(wa[0].byte_len == 10000);
  CHECK(p.a.mem.same(p.a.addr(0x1000), p.b.mem, p.b.addr(0x40000), 10000));
  CHECK(count_op(p.w, 0, SROCE_OP_READ_REQUEST) == 1);
  CHECK(count_op(p.w, 1, SROCE_OP_READ_RESP_FIRST) == 1);
  CHECK(count_op(p.w, 1, SROCE_OP_READ_RESP_MIDDLE) == 8);
  CHECK(count_op(p.w, 1, SROCE_OP_READ_RESP_LAST) == 1);
  CHECK(count_op(p.w, 1, SROCE_OP_ACK) == 0);  // the responses are the acknowledgement
}

TEST_CASE("RC zero-length READ and WRITE need no R_Key", "[ops]") {
  Pair p;
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {}, 1, kSendSignaled, 0, 0xbad) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {}, 2, kSendSignaled, 0, 0xbad) == 0);
  auto wa = wait_wc(p.w, p.a, 2);
  REQUIRE(wa.size() == 2);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(wa[1].status == WcStatus::kSuccess);
}

TEST_CASE("RC atomics: compare-and-swap and fetch-and-add", "[ops]") {
  Pair p;
  const uint64_t target = p.b.addr(0x8000);
  p.b.mem.put64(target, 40);
  // CAS that matches: 40 -> 99, returns 40.
  REQUIRE(post_atomic(p.a, p.qa, WrOpcode::kAtomicCmpSwp, sge(p.a, 0, 8), 1, target, p.b.mr.rkey,
                      40, 99) == 0);
  // CAS that does not match: stays 99, returns 99.
  REQUIRE(post_atomic(p.a, p.qa, WrOpcode::kAtomicCmpSwp, sge(p.a, 8, 8), 2, target, p.b.mr.rkey,
                      40, 7) == 0);
  // FETCH_ADD: 99 + 1000, returns 99.
  REQUIRE(post_atomic(p.a, p.qa, WrOpcode::kAtomicFetchAdd, sge(p.a, 16, 8), 3, target, p.b.mr.rkey,
                      1000, 0) == 0);
  auto wa = wait_wc(p.w, p.a, 3);
  REQUIRE(wa.size() == 3);
  CHECK(wa[0].opcode == WcOpcode::kCompSwap);
  CHECK(wa[2].opcode == WcOpcode::kFetchAdd);
  for (auto& wc : wa) CHECK(wc.status == WcStatus::kSuccess);
  CHECK(p.a.mem.get64(p.a.addr(0)) == 40);
  CHECK(p.a.mem.get64(p.a.addr(8)) == 99);
  CHECK(p.a.mem.get64(p.a.addr(16)) == 99);
  CHECK(p.b.mem.get64(target) == 1099);
  CHECK(count_op(p.w, 1, SROCE_OP_ATOMIC_ACK) == 3);
}

TEST_CASE("atomics need 8 bytes at an 8-byte aligned address (post-time EINVAL)", "[ops]") {
  Pair p;
  CHECK(post_atomic(p.a, p.qa, WrOpcode::kAtomicFetchAdd, sge(p.a, 0, 8), 1, p.b.addr(0x8004),
                    p.b.mr.rkey, 1, 0) == EINVAL);
  CHECK(post_atomic(p.a, p.qa, WrOpcode::kAtomicFetchAdd, sge(p.a, 0, 4), 1, p.b.addr(0x8000),
                    p.b.mr.rkey, 1, 0) == EINVAL);
  CHECK(post_atomic(p.a, p.qa, WrOpcode::kAtomicFetchAdd, sge(p.a, 0, 8), 1, p.b.addr(0x8000),
                    p.b.mr.rkey, 1, 0) == 0);
}

TEST_CASE("inline data is copied at post time and needs no L_Key", "[ops]") {
  Pair p;
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 64)}, 1) == 0);
  std::memcpy(p.a.mem.at(p.a.addr(0)), "hello, inline world", 20);
  const Sge s{p.a.addr(0), 20, 0xdeadbeef};  // bogus lkey: not checked for inline
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {s}, 1, kSendSignaled | kSendInline) == 0);
  std::memcpy(p.a.mem.at(p.a.addr(0)), "overwritten after!!", 20);  // buffer reusable at once
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  auto wb = p.b.poll();
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].byte_len == 20);
  CHECK(std::memcmp(p.b.mem.at(p.b.addr(0)), "hello, inline world", 20) == 0);
  // Inline WRITE too, and the max_inline limit.
  const Sge s2{p.a.addr(0), 8, 0};
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {s2}, 2, kSendSignaled | kSendInline,
               p.b.addr(0x500), p.b.mr.rkey) == 0);
  wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(std::memcmp(p.b.mem.at(p.b.addr(0x500)), "overwrit", 8) == 0);
  const Sge big{p.a.addr(0), 65, 0};  // max_inline is 64
  CHECK(post(p.a, p.qa, WrOpcode::kSend, {big}, 3, kSendSignaled | kSendInline) == EINVAL);
  CHECK(post(p.a, p.qa, WrOpcode::kRdmaRead, {s2}, 3, kSendSignaled | kSendInline, p.b.addr(0),
             p.b.mr.rkey) == EINVAL);
}

TEST_CASE("scatter/gather lists on both sides", "[ops]") {
  Pair p({}, {.mtu = Mtu::k256});
  p.a.mem.fill(p.a.addr(0), 4096, 5);
  // 3 gather pieces of odd sizes -> 3 scatter pieces of other odd sizes.
  std::vector<Sge> g = {sge(p.a, 0, 100), sge(p.a, 1000, 300), sge(p.a, 3000, 200)};
  std::vector<Sge> s = {sge(p.b, 0x100, 50), sge(p.b, 0x2000, 400), sge(p.b, 0x5000, 400)};
  REQUIRE(post_recv(p.b, p.qb, s, 1) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, g, 1) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  auto wb = p.b.poll();
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].byte_len == 600);
  std::vector<uint8_t> sent, got;
  for (auto& x : g) sent.insert(sent.end(), p.a.mem.at(x.addr), p.a.mem.at(x.addr) + x.length);
  got.insert(got.end(), p.b.mem.at(s[0].addr), p.b.mem.at(s[0].addr) + 50);
  got.insert(got.end(), p.b.mem.at(s[1].addr), p.b.mem.at(s[1].addr) + 400);
  got.insert(got.end(), p.b.mem.at(s[2].addr), p.b.mem.at(s[2].addr) + 150);
  CHECK(sent == got);
  // READ into a scattered local buffer.
  p.b.mem.fill(p.b.addr(0x9000), 700, 8);
  std::vector<Sge> r = {sge(p.a, 0x10000, 123), sge(p.a, 0x11000, 1), sge(p.a, 0x12000, 576)};
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, r, 2, kSendSignaled, p.b.addr(0x9000),
               p.b.mr.rkey) == 0);
  wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(p.a.mem.same(r[0].addr, p.b.mem, p.b.addr(0x9000), 123));
  CHECK(p.a.mem.same(r[1].addr, p.b.mem, p.b.addr(0x9000 + 123), 1));
  CHECK(p.a.mem.same(r[2].addr, p.b.mem, p.b.addr(0x9000 + 124), 576));
}

TEST_CASE("segmentation and reassembly at every path MTU", "[ops][mtu]") {
  const Mtu mtus[] = {Mtu::k256, Mtu::k512, Mtu::k1024, Mtu::k2048, Mtu::k4096};
  for (Mtu m : mtus) {
    const uint32_t mtu = mtu_bytes(m);
    for (uint32_t len : {1u, mtu - 1, mtu, mtu + 1, 3 * mtu, 3 * mtu + 5}) {
      DYNAMIC_SECTION("mtu " << mtu << " len " << len) {
        Pair p({}, {.mtu = m});
        p.a.mem.fill(p.a.addr(0), len, len);
        p.b.mem.fill(p.b.addr(0x100000), len, len + 1);
        REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 4 * mtu)}, 1) == 0);
        REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, len)}, 1) == 0);
        REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, len)}, 2, kSendSignaled,
                     p.b.addr(0x40000), p.b.mr.rkey) == 0);
        REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x80000, len)}, 3, kSendSignaled,
                     p.b.addr(0x100000), p.b.mr.rkey) == 0);
        auto wa = wait_wc(p.w, p.a, 3);
        REQUIRE(wa.size() == 3);
        for (auto& wc : wa) CHECK(wc.status == WcStatus::kSuccess);
        auto wb = p.b.poll();
        REQUIRE(wb.size() == 1);
        CHECK(wb[0].byte_len == len);
        CHECK(p.b.mem.same(p.b.addr(0), p.a.mem, p.a.addr(0), len));
        CHECK(p.b.mem.same(p.b.addr(0x40000), p.a.mem, p.a.addr(0), len));
        CHECK(p.a.mem.same(p.a.addr(0x80000), p.b.mem, p.b.addr(0x100000), len));
        const uint32_t n = (len + mtu - 1) / mtu;
        const uint32_t sends =
            count_op(p.w, 0, SROCE_OP_SEND_FIRST) + count_op(p.w, 0, SROCE_OP_SEND_MIDDLE) +
            count_op(p.w, 0, SROCE_OP_SEND_LAST) + count_op(p.w, 0, SROCE_OP_SEND_ONLY);
        CHECK(sends == n);
        CHECK(count_op(p.w, 0, SROCE_OP_SEND_ONLY) == (n == 1 ? 1u : 0u));
        CHECK(count_op(p.w, 0, SROCE_OP_SEND_MIDDLE) == (n > 2 ? n - 2 : 0u));
        const uint32_t resps = count_op(p.w, 1, SROCE_OP_READ_RESP_FIRST) +
                               count_op(p.w, 1, SROCE_OP_READ_RESP_MIDDLE) +
                               count_op(p.w, 1, SROCE_OP_READ_RESP_LAST) +
                               count_op(p.w, 1, SROCE_OP_READ_RESP_ONLY);
        CHECK(resps == n);
        // No request packet carries more than one MTU of payload.
        for (auto& pk : p.w.log) CHECK(pk.payload_len <= mtu);
        // PSNs of the requests are consecutive: SEND n, WRITE n, READ n.
        CHECK(p.w.log.back().from == 1);
      }
    }
  }
}

TEST_CASE("unsignaled WRs complete silently / in order", "[ops]") {
  Pair p;
  for (int i = 0; i < 5; ++i)
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 64)}, 100 + i,
                 i == 4 ? uint32_t{kSendSignaled} : 0u, p.b.addr(0x1000), p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  p.w.run(Duration::millis(1));
  wa = p.a.poll();
  CHECK(wa.empty());
  auto st = p.a->qp_stats(p.qa);
  REQUIRE(st.ok());
  CHECK(st->send_wqes_completed == 5);
}

TEST_CASE("sq_sig_all signals every WR", "[ops]") {
  Pair p(QpOpts{.sig_all = true});
  for (int i = 0; i < 3; ++i)
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 8)}, i, 0, p.b.addr(0),
                 p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 3);
  REQUIRE(wa.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(wa[i].wr_id == static_cast<uint64_t>(i));
}

TEST_CASE("many messages pipeline through the window and complete in order", "[ops]") {
  Pair p(QpOpts{.max_send_wr = 512, .max_recv_wr = 512}, {.mtu = Mtu::k1024});
  for (int i = 0; i < 400; ++i)
    REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0x1000 * (i % 8), 4096)}, i) == 0);
  for (int i = 0; i < 400; ++i)
    REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 100u + static_cast<uint32_t>(i) * 7)},
                 i) == 0);
  auto wa = wait_wc(p.w, p.a, 400);
  REQUIRE(wa.size() == 400);
  for (int i = 0; i < 400; ++i) {
    CHECK(wa[i].wr_id == static_cast<uint64_t>(i));
    CHECK(wa[i].status == WcStatus::kSuccess);
  }
  auto wb = p.b.poll();
  REQUIRE(wb.size() == 400);
  for (int i = 0; i < 400; ++i) CHECK(wb[i].byte_len == 100u + static_cast<uint32_t>(i) * 7);
  // ACK coalescing: fewer ACKs than request packets, but at least one per AckReq'd message.
  const auto acks = p.w.count([](const WirePkt& x) { return x.from == 1 && x.is_ack(); });
  CHECK(acks >= 1);
  CHECK(acks <= 400);
}

TEST_CASE("UC SEND and WRITE - a lost packet drops the message silently", "[ops][uc]") {
  Pair p(QpOpts{.type = QpType::kUc}, {.mtu = Mtu::k256});
  p.a.mem.fill(p.a.addr(0), 1000, 2);
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 2000)}, 1) == 0);
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0x4000, 2000)}, 2) == 0);
  // Drop the 2nd packet of the first message (PSN 101).
  p.w.filter = [](const WirePkt& x) {
    return x.from == 0 && x.psn == 101 ? Verdict::kDrop : Verdict::kDeliver;
  };
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 1000)}, 10) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 600)}, 11) == 0);
  auto wa = wait_wc(p.w, p.a, 2);
  REQUIRE(wa.size() == 2);  // UC: complete when sent
  for (auto& wc : wa) CHECK(wc.status == WcStatus::kSuccess);
  auto wb = p.b.poll();
  REQUIRE(wb.size() == 1);  // the first message vanished; its WQE took the second
  CHECK(wb[0].wr_id == 1);
  CHECK(wb[0].byte_len == 600);
  CHECK(p.w.count([](const WirePkt& x) { return x.from == 1; }) == 0);  // no ACKs in UC
  // UC WRITE works, and READ is not a UC operation.
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 700)}, 12, kSendSignaled,
               p.b.addr(0x9000), p.b.mr.rkey) == 0);
  wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(p.b.mem.same(p.b.addr(0x9000), p.a.mem, p.a.addr(0), 700));
  CHECK(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0, 8)}, 13, kSendSignaled, p.b.addr(0),
             p.b.mr.rkey) == EINVAL);
  auto st = p.b->qp_stats(p.qb);
  REQUIRE(st.ok());
  CHECK(st->rx_dropped >= 2);
}

namespace {

struct UdSetup {
  UdSetup() : a(0x0a000001, 1), b(0x0a000002, 2), w(a, b) {
    QpOpts o{.type = QpType::kUd};
    qa = make_qp(a, o);
    qb1 = make_qp(b, o);
    qb2 = make_qp(b, o);
    connect(a, qa, QpType::kUd, b, 0, {.qkey = 0x1000});
    connect(b, qb1, QpType::kUd, a, 0, {.qkey = 0x1000});
    connect(b, qb2, QpType::kUd, a, 0, {.qkey = 0x2000});
    AhAttr ah;
    ah.dgid = b.gid;
    ah_b = *a->create_ah(a.pd, ah);
  }
  int send(Qpn dst, uint32_t qkey, uint32_t len, uint64_t id, WrOpcode op = WrOpcode::kSend) {
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = op;
    wr.send_flags = kSendSignaled;
    Sge s = sge(a, 0, len);
    wr.sgl = {&s, 1};
    wr.imm_data = 0xabcd;
    wr.ud.ah = ah_b;
    wr.ud.remote_qpn = dst;
    wr.ud.remote_qkey = qkey;
    return a->post_send(qa, wr, Time::zero());
  }
  Host a, b;
  Wire w;
  Qpn qa, qb1, qb2;
  Handle ah_b;
};

}  // namespace

TEST_CASE("UD to two QPs: GRH in the first 40 bytes / Q_Key mismatch dropped", "[ops][ud]") {
  UdSetup u;
  u.a.mem.fill(u.a.addr(0), 512, 4);
  REQUIRE(post_recv(u.b, u.qb1, {sge(u.b, 0, 1024)}, 1) == 0);
  REQUIRE(post_recv(u.b, u.qb2, {sge(u.b, 0x1000, 1024)}, 2) == 0);
  REQUIRE(u.send(u.qb1, 0x1000, 300, 10) == 0);
  REQUIRE(u.send(u.qb2, 0x2000, 200, 11, WrOpcode::kSendWithImm) == 0);
  REQUIRE(u.send(u.qb2, 0x1000, 100, 12) == 0);  // wrong Q_Key for qb2: dropped
  auto wa = wait_wc(u.w, u.a, 3);
  REQUIRE(wa.size() == 3);
  for (auto& wc : wa) CHECK(wc.status == WcStatus::kSuccess);  // UD completes when sent
  auto wb = u.b.poll();
  REQUIRE(wb.size() == 2);
  CHECK(wb[0].wr_id == 1);
  CHECK(wb[0].qp_num == u.qb1);
  CHECK(wb[0].src_qp == u.qa);
  CHECK(wb[0].byte_len == 40 + 300);
  CHECK(wb[0].wc_flags == kWcGrh);
  CHECK(wb[1].wr_id == 2);
  CHECK(wb[1].qp_num == u.qb2);
  CHECK(wb[1].byte_len == 40 + 200);
  CHECK(wb[1].wc_flags == (kWcGrh | kWcWithImm));
  CHECK(wb[1].imm_data == 0xabcd);
  CHECK(u.b.mem.same(u.b.addr(40), u.a.mem, u.a.addr(0), 300));
  // IPv4 RoCEv2: bytes 20..39 of the GRH area are the IPv4 header.
  const uint8_t* g = u.b.mem.at(u.b.addr(0));
  CHECK(g[20] == 0x45);
  CHECK(g[20 + 9] == 17);
  CHECK(std::memcmp(g + 20 + 12, u.a.gid.raw + 12, 4) == 0);
  CHECK(std::memcmp(g + 20 + 16, u.b.gid.raw + 12, 4) == 0);
  // ... and sl says so, as ConnectX's CQE does (UDP-encapsulated 0x8 | IPv4 0x2): UCX's
  // ud_verbs reads it to find the destination address in those 40 bytes.
  CHECK(wb[0].sl == 0xa);
  CHECK(wb[1].sl == 0xa);
  CHECK(u.b->stats().rx_drop_reason[kRxDropBadQkey] == 1);
  // The controlled Q_Key: high bit set means "use my QP's Q_Key" (0x1000).
  REQUIRE(post_recv(u.b, u.qb1, {sge(u.b, 0x2000, 1024)}, 3) == 0);
  REQUIRE(u.send(u.qb1, 0x80000000, 10, 13) == 0);
  wait_wc(u.w, u.a, 1);
  wb = u.b.poll();
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].wr_id == 3);
}

TEST_CASE("UD: the address vector's flow label picks the UDP source port", "[ops][ud]") {
  UdSetup u;
  // Label -> port as RoCEv2 NICs derive it (low 14 bits XOR high 6, | 0xC000); 0 keeps the QP's.
  const struct {
    uint32_t label;
    uint16_t port;
  } cases[] = {{0x1, 0xc001}, {0x3fff, 0xffff}, {0x4000, 0xc001}, {0x12345, 0xc000 | (0x2345 ^ 0x4)},
               {0xfffff, 0xc000 | (0x3fff ^ 0x3f)}};
  uint64_t id = 100;
  for (const auto& c : cases) {
    AhAttr ah;
    ah.dgid = u.b.gid;
    ah.flow_label = c.label;
    const Handle h = *u.a->create_ah(u.a.pd, ah);
    REQUIRE(post_recv(u.b, u.qb1, {sge(u.b, 0, 1024)}, id) == 0);
    SendWr wr;
    wr.wr_id = id++;
    wr.opcode = WrOpcode::kSend;
    wr.send_flags = kSendSignaled;
    Sge s = sge(u.a, 0, 16);
    wr.sgl = {&s, 1};
    wr.ud.ah = h;
    wr.ud.remote_qpn = u.qb1;
    wr.ud.remote_qkey = 0x1000;
    const size_t before = u.w.log.size();
    REQUIRE(u.a->post_send(u.qa, wr, Time::zero()) == 0);
    wait_wc(u.w, u.a, 1);
    REQUIRE(u.w.log.size() == before + 1);
    CHECK(u.w.log[before].meta.src_port == c.port);
    auto wb = u.b.poll();
    REQUIRE(wb.size() == 1);
    CHECK(wb[0].status == WcStatus::kSuccess);
  }
  // Label 0: every datagram keeps the QP's one port.
  const size_t before = u.w.log.size();
  REQUIRE(u.send(u.qb1, 0x1000, 8, 200) == 0);
  REQUIRE(u.send(u.qb1, 0x1000, 8, 201) == 0);
  wait_wc(u.w, u.a, 2);
  REQUIRE(u.w.log.size() == before + 2);
  CHECK(u.w.log[before].meta.src_port == u.w.log[before + 1].meta.src_port);
  CHECK(u.w.log[before].meta.src_port >= 0xc000);
}

TEST_CASE("UD: no receive WQE drops / too small a buffer is LOC_LEN_ERR / size limit",
          "[ops][ud]") {
  UdSetup u;
  REQUIRE(u.send(u.qb1, 0x1000, 100, 1) == 0);
  wait_wc(u.w, u.a, 1);
  CHECK(u.b->stats().rx_drop_reason[kRxDropNoRecvWqe] == 1);
  REQUIRE(post_recv(u.b, u.qb1, {sge(u.b, 0, 100)}, 5) == 0);  // 40 + 100 does not fit
  REQUIRE(u.send(u.qb1, 0x1000, 100, 2) == 0);
  wait_wc(u.w, u.a, 1);
  auto wb = u.b.poll();
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].status == WcStatus::kLocLenErr);
  CHECK(u.send(u.qb1, 0x1000, 4097, 3) == EINVAL);  // UD: one packet of at most the port MTU
  CHECK(u.send(u.qb1, 0x1000, 8, 3, WrOpcode::kRdmaWrite) == EINVAL);
}

TEST_CASE("SRQ shared by two QPs raises the limit event once", "[ops][srq]") {
  EngineConfig one;  // the QPs' SENDs alternate (quanta of one packet), as posted
  one.lossy.train_bytes = 0;
  Host a(0x0a000001, 1, one), b(0x0a000002, 2, one);
  Wire w(a, b);
  auto srq = b->create_srq(b.pd, {16, 2, 0});
  REQUIRE(srq.ok());
  Qpn a1 = make_qp(a), a2 = make_qp(a);
  Qpn b1 = make_qp(b, {.srq = *srq}), b2 = make_qp(b, {.srq = *srq});
  connect(a, a1, QpType::kRc, b, b1);
  connect(a, a2, QpType::kRc, b, b2);
  connect(b, b1, QpType::kRc, a, a1);
  connect(b, b2, QpType::kRc, a, a2);
  for (int i = 0; i < 6; ++i) {
    RecvWr r;
    r.wr_id = 1000 + i;
    Sge s = sge(b, 0x1000 * i, 256);
    r.sgl = {&s, 1};
    REQUIRE(b->post_srq_recv(*srq, r) == 0);
  }
  CHECK(post_recv(b, b1, {sge(b, 0, 8)}, 1) == EINVAL);  // receives go to the SRQ
  CHECK(b->modify_srq(*srq, 17).error().code == EINVAL);
  REQUIRE(b->modify_srq(*srq, 3).ok());  // arm: event when fewer than 3 remain
  REQUIRE(post(a, a1, WrOpcode::kSend, {sge(a, 0, 10)}, 1) == 0);
  REQUIRE(post(a, a2, WrOpcode::kSend, {sge(a, 0, 20)}, 2) == 0);
  REQUIRE(post(a, a1, WrOpcode::kSend, {sge(a, 0, 30)}, 3) == 0);
  wait_wc(w, a, 3);
  CHECK(b.events().empty());  // 3 left: not below the limit yet
  REQUIRE(post(a, a2, WrOpcode::kSend, {sge(a, 0, 40)}, 4) == 0);
  REQUIRE(post(a, a1, WrOpcode::kSend, {sge(a, 0, 50)}, 5) == 0);
  wait_wc(w, a, 2);
  auto ev = b.events();
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].type == AsyncEventType::kSrqLimitReached);
  CHECK(ev[0].element == *srq);
  auto wb = b.poll();
  REQUIRE(wb.size() == 5);
  // SRQ WQEs are taken in order across both QPs.
  for (int i = 0; i < 5; ++i) CHECK(wb[i].wr_id == 1000u + static_cast<uint64_t>(i));
  CHECK(wb[0].qp_num == b1);
  CHECK(wb[1].qp_num == b2);
  CHECK(wb[4].byte_len == 50);
  // Disarmed after firing.
  REQUIRE(post(a, a2, WrOpcode::kSend, {sge(a, 0, 1)}, 6) == 0);
  wait_wc(w, a, 1);
  CHECK(b.events().empty());
  CHECK(b->destroy_srq(*srq).error().code == EBUSY);
}

TEST_CASE("CQ notification: next completion / or solicited only", "[ops][cq]") {
  Pair p;
  REQUIRE(p.b->req_notify_cq(p.b.cq, true) == 0);
  for (int i = 0; i < 3; ++i) REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 64)}, i) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 8)}, 1) == 0);
  wait_wc(p.w, p.a, 1);
  CHECK(!p.b->poll_cq_notification());  // not solicited
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 8)}, 2, kSendSignaled | kSendSolicited) ==
          0);
  wait_wc(p.w, p.a, 1);
  auto n = p.b->poll_cq_notification();
  REQUIRE(n);
  CHECK(*n == p.b.cq);
  CHECK(!p.b->poll_cq_notification());  // one notification per arm
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 8)}, 3, kSendSignaled | kSendSolicited) ==
          0);
  wait_wc(p.w, p.a, 1);
  CHECK(!p.b->poll_cq_notification());  // not re-armed
  CHECK(p.w.count([](const WirePkt& x) { return x.from == 0 && x.op() == SROCE_OP_SEND_ONLY; }) ==
        3);
}

TEST_CASE("fence: a fenced WR waits for earlier READs", "[ops]") {
  Pair p;
  p.b.mem.fill(p.b.addr(0x40000), 4096, 1);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0, 4096)}, 1, kSendSignaled,
               p.b.addr(0x40000), p.b.mr.rkey) == 0);
  // Fenced WRITE of what the READ brings in.
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 4096)}, 2, kSendSignaled | kSendFence,
               p.b.addr(0x60000), p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 2);
  REQUIRE(wa.size() == 2);
  // On the wire, the WRITE starts only after the last READ response.
  size_t last_resp = 0, first_write = 0;
  for (size_t i = 0; i < p.w.log.size(); ++i) {
    if (p.w.log[i].op() == SROCE_OP_READ_RESP_LAST) last_resp = i;
    if (!first_write && p.w.log[i].op() == SROCE_OP_WRITE_FIRST) first_write = i;
  }
  CHECK(first_write > last_resp);
  CHECK(p.b.mem.same(p.b.addr(0x60000), p.b.mem, p.b.addr(0x40000), 4096));
}

TEST_CASE("max_rd_atomic bounds outstanding READs on the wire", "[ops]") {
  Pair p({}, {.max_rd_atomic = 2});
  for (int i = 0; i < 6; ++i)
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x1000 * i, 2048)}, i, kSendSignaled,
                 p.b.addr(0x40000), p.b.mr.rkey) == 0);
  // Hold all responses: only two READ requests can be on the wire.
  p.w.filter = [](const WirePkt& x) { return x.from == 1 ? Verdict::kHold : Verdict::kDeliver; };
  p.w.pump();
  CHECK(p.w.count([](const WirePkt& x) { return x.op() == SROCE_OP_READ_REQUEST; }) == 2);
  p.w.filter = nullptr;
  p.w.release();
  auto wa = wait_wc(p.w, p.a, 6);
  REQUIRE(wa.size() == 6);
  for (auto& wc : wa) CHECK(wc.status == WcStatus::kSuccess);
}
