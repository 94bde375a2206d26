// Error completions (IBA 10.8.3 / 11.4.2 and the responder error classes of
// 9.9.3): what the requester's WC says, what happens to the responder, and
// that the rest of the queue is flushed in order.
#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

QpState state(Host& h, Qpn q) { return h->query_qp(q)->qp_state; }

bool has_event(const std::vector<AsyncEvent>& ev, AsyncEventType t, uint32_t element) {
  for (auto& e : ev)
    if (e.type == t && e.element == element) return true;
  return false;
}

}  // namespace

TEST_CASE("REM_ACCESS_ERR: bad R_Key / out of bounds / missing MR right / QP right", "[err]") {
  SECTION("bad rkey") {
    Pair p;
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 8)}, 1, kSendSignaled, p.b.addr(0),
                 p.b.mr.rkey ^ 1) == 0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].status == WcStatus::kRemAccessErr);
    CHECK(state(p.a, p.qa) == QpState::kErr);
    CHECK(state(p.b, p.qb) == QpState::kErr);
    CHECK(has_event(p.b.events(), AsyncEventType::kQpAccessErr, p.qb));
    for (auto& x : p.w.log)
      if (x.is_nak()) CHECK((x.syndrome & 0x1f) == SROCE_NAK_REMOTE_ACCESS);
    CHECK(one_nak(p.a, p.b, kNakRemoteAccess));  // an access fault, counted on both sides
    CHECK(std::string(to_string(kNakRemoteAccess)) == "remote_access");
  }
  SECTION("out of bounds") {
    Pair p;
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0, 16)}, 1, kSendSignaled,
                 p.b.addr(kMemSize - 8), p.b.mr.rkey) == 0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].status == WcStatus::kRemAccessErr);
  }
  SECTION("MR without REMOTE_WRITE") {
    Pair p;
    auto k = p.b->reg_mr(p.b.pd, p.b.addr(0), 4096, kAccessLocalWrite | kAccessRemoteRead);
    REQUIRE(k.ok());
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 8)}, 1, kSendSignaled, p.b.addr(0),
                 k->rkey) == 0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].status == WcStatus::kRemAccessErr);
  }
  SECTION("MR without REMOTE_ATOMIC") {
    Pair p;
    auto k = p.b->reg_mr(p.b.pd, p.b.addr(0), 4096, kAccessLocalWrite | kAccessRemoteWrite);
    REQUIRE(k.ok());
    REQUIRE(post_atomic(p.a, p.qa, WrOpcode::kAtomicCmpSwp, sge(p.a, 0, 8), 1, p.b.addr(0), k->rkey,
                        0, 1) == 0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].status == WcStatus::kRemAccessErr);
    CHECK(p.b.mem.get64(p.b.addr(0)) == 0);  // not executed
  }
  SECTION("R_Key of another PD") {
    Pair p;
    const Handle pd2 = *p.b->alloc_pd();
    auto k = p.b->reg_mr(pd2, p.b.addr(0), 4096, kAccessLocalWrite | kAccessRemoteWrite);
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 8)}, 1, kSendSignaled, p.b.addr(0),
                 k->rkey) == 0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].status == WcStatus::kRemAccessErr);
  }
  SECTION("QP without remote READ access") {
    Pair p({}, {}, {.access = kAccessRemoteWrite});
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0, 8)}, 1, kSendSignaled, p.b.addr(0),
                 p.b.mr.rkey) == 0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].status == WcStatus::kRemAccessErr);
  }
  SECTION("responder memory access fails (a WRITE's write, a READ's read)") {
    for (const bool read : {false, true}) {
      Pair p;
      (read ? p.b.mem.fail_reads : p.b.mem.fail_writes) = true;
      REQUIRE(post(p.a, p.qa, read ? WrOpcode::kRdmaRead : WrOpcode::kRdmaWrite, {sge(p.a, 0, 8)},
                   1, kSendSignaled, p.b.addr(0), p.b.mr.rkey) == 0);
      auto wa = wait_wc(p.w, p.a, 1);
      REQUIRE(wa.size() == 1);
      CHECK(wa[0].status == WcStatus::kRemAccessErr);
      CHECK(one_nak(p.a, p.b, kNakRemoteAccess));
    }
  }
}

TEST_CASE("errors complete in order: earlier WRs succeed / the failing one errs / the rest flush",
          "[err]") {
  Pair p;
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 3000)}, 1, kSendSignaled, p.b.addr(0),
               p.b.mr.rkey) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 8)}, 2, 0, p.b.addr(0), p.b.mr.rkey) ==
          0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 8)}, 3, 0, p.b.addr(0), 0x12345678) ==
          0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 8)}, 4, 0, p.b.addr(0), p.b.mr.rkey) ==
          0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 8)}, 5) == 0);
  auto wa = wait_wc(p.w, p.a, 4);
  REQUIRE(wa.size() == 4);  // 2 succeeded unsignaled: no completion
  CHECK(wa[0].wr_id == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(wa[1].wr_id == 3);
  CHECK(wa[1].status == WcStatus::kRemAccessErr);  // errors complete even unsignaled
  CHECK(wa[2].wr_id == 4);
  CHECK(wa[2].status == WcStatus::kWrFlushErr);
  CHECK(wa[3].wr_id == 5);
  CHECK(wa[3].status == WcStatus::kWrFlushErr);
}

TEST_CASE("SEND longer than the receive buffer: LOC_LEN_ERR there / REM_INV_REQ_ERR here",
          "[err]") {
  Pair p;
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 1000)}, 7) == 0);
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 1000)}, 8) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 3000)}, 1) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kRemInvReqErr);
  auto wb = p.b.poll();
  REQUIRE(wb.size() == 2);
  CHECK(wb[0].wr_id == 7);
  CHECK(wb[0].status == WcStatus::kLocLenErr);
  CHECK(wb[1].wr_id == 8);
  CHECK(wb[1].status == WcStatus::kWrFlushErr);
  CHECK(state(p.b, p.qb) == QpState::kErr);
  CHECK(has_event(p.b.events(), AsyncEventType::kQpReqErr, p.qb));
  for (auto& x : p.w.log)
    if (x.is_nak()) CHECK((x.syndrome & 0x1f) == SROCE_NAK_INVALID_REQ);
  CHECK(one_nak(p.a, p.b, kNakInvalidRequest));
}

TEST_CASE("bad receive buffer: LOC_PROT_ERR there / REM_OP_ERR here", "[err]") {
  Pair p;
  REQUIRE(post_recv(p.b, p.qb, {Sge{p.b.addr(0), 64, p.b.mr.lkey ^ 0x55}}, 7) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 10)}, 1) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kRemOpErr);
  auto wb = p.b.poll();
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].status == WcStatus::kLocProtErr);
  CHECK(one_nak(p.a, p.b, kNakRemoteOp));
}

TEST_CASE("LOC_PROT_ERR: bad L_Key / local bounds / READ into a read-only MR / other PD", "[err]") {
  SECTION("bad lkey") {
    Pair p;
    REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {Sge{p.a.addr(0), 8, 0x1234}}, 1) == 0);
    REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 8)}, 2) == 0);
    auto wa = wait_wc(p.w, p.a, 2);
    REQUIRE(wa.size() == 2);
    CHECK(wa[0].status == WcStatus::kLocProtErr);
    CHECK(wa[1].status == WcStatus::kWrFlushErr);
    CHECK(p.w.log.empty());  // nothing was sent
    CHECK(state(p.a, p.qa) == QpState::kErr);
  }
  SECTION("local bounds") {
    Pair p;
    REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {Sge{p.a.addr(kMemSize - 4), 8, p.a.mr.lkey}}, 1) ==
            0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].status == WcStatus::kLocProtErr);
  }
  SECTION("READ into an MR without LOCAL_WRITE") {
    Pair p;
    auto ro = p.a->reg_mr(p.a.pd, p.a.addr(0), 4096, kAccessRemoteRead);
    REQUIRE(ro.ok());
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {Sge{p.a.addr(0), 8, ro->lkey}}, 1, kSendSignaled,
                 p.b.addr(0), p.b.mr.rkey) == 0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].status == WcStatus::kLocProtErr);
    // The same MR is fine as a SEND source.
  }
  SECTION("an earlier WR in flight completes first") {
    Pair p;
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 4000)}, 1, kSendSignaled,
                 p.b.addr(0), p.b.mr.rkey) == 0);
    REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {Sge{p.a.addr(0), 8, 0x1234}}, 2) == 0);
    auto wa = wait_wc(p.w, p.a, 2);
    REQUIRE(wa.size() == 2);
    CHECK(wa[0].wr_id == 1);
    CHECK(wa[0].status == WcStatus::kSuccess);
    CHECK(wa[1].wr_id == 2);
    CHECK(wa[1].status == WcStatus::kLocProtErr);
  }
}

TEST_CASE("MemoryAccess failures become local access errors", "[err]") {
  SECTION("gather fails") {
    Pair p;
    p.a.mem.fail_reads = true;
    REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 8)}, 1) == 0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].status == WcStatus::kLocAccessErr);
  }
  SECTION("READ response placement fails") {
    Pair p;
    p.a.mem.fail_writes = true;
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0, 8)}, 1, kSendSignaled, p.b.addr(0),
                 p.b.mr.rkey) == 0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].status == WcStatus::kLocAccessErr);
  }
  SECTION("inline copy at post time fails") {
    Pair p;
    REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {Sge{0x10, 8, 0}}, 1, kSendSignaled | kSendInline) ==
            0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].status == WcStatus::kLocProtErr);
  }
}

TEST_CASE("too many outstanding READs for max_dest_rd_atomic: NAK invalid request", "[err]") {
  // The requester is allowed 4, the responder only has 1 resource.
  Pair p({}, {.max_rd_atomic = 4}, {.max_dest_rd_atomic = 1});
  // Both READs reach the responder before it can send the first response.
  p.w.filter = [](const WirePkt& x) { return x.from == 0 ? Verdict::kHold : Verdict::kDeliver; };
  for (int i = 0; i < 2; ++i)
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0, 8)}, i, kSendSignaled, p.b.addr(0),
                 p.b.mr.rkey) == 0);
  p.w.pump();
  REQUIRE(p.w.held.size() == 2);
  p.w.filter = nullptr;
  p.w.release();
  auto wa = wait_wc(p.w, p.a, 2);
  REQUIRE(wa.size() == 2);
  // The first READ's response was queued before the second overflowed the table.
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(wa[1].status == WcStatus::kRemInvReqErr);
}

TEST_CASE("CQ overflow raises a CQ error event", "[err][cq]") {
  Host a(0x0a000001, 1), b(0x0a000002, 2);
  Wire w(a, b);
  const Handle small = *a->create_cq(2);
  QpInitAttr ia;
  ia.send_cq = ia.recv_cq = small;
  ia.cap = {8, 8, 1, 1, 0};
  const Qpn qa = *a->create_qp(a.pd, ia);
  const Qpn qb = make_qp(b);
  connect(a, qa, QpType::kRc, b, qb);
  connect(b, qb, QpType::kRc, a, qa);
  for (int i = 0; i < 3; ++i)
    REQUIRE(post(a, qa, WrOpcode::kRdmaWrite, {sge(a, 0, 8)}, i, kSendSignaled, b.addr(0),
                 b.mr.rkey) == 0);
  w.run(Duration::millis(10));
  auto ev = a.events();
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].type == AsyncEventType::kCqErr);
  CHECK(ev[0].element == small);
  CHECK(a->stats().cq_overflows == 1);
  CHECK(a.poll(small).size() == 2);
}
