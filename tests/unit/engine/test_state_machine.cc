// The IBA 10.3.1 QP state machine through modify_qp: every (current, next)
// pair for RC, UC and UD, with the attribute masks of IBA 11.2.4.2 written
// out independently here, the errno libibverbs users get, check-then-apply,
// and the queue behaviour of each state.
#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

constexpr QpState kAll[] = {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts,
                            QpState::kSqd,   QpState::kSqe,  QpState::kErr};

// Required attributes of a valid transition, or -1 if the transition is invalid.
int64_t required(QpType t, QpState from, QpState to) {
  using S = QpState;
  const bool ud = t == QpType::kUd, rc = t == QpType::kRc;
  if (to == S::kReset || to == S::kErr) return 0;
  if (from == S::kReset && to == S::kInit)
    return ud ? (kQpPkeyIndex | kQpPort | kQpQkey) : (kQpPkeyIndex | kQpPort | kQpAccessFlags);
  if (from == S::kInit && to == S::kInit) return 0;
  if (from == S::kInit && to == S::kRtr) {
    if (ud) return 0;
    const uint32_t uc = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    return rc ? (uc | kQpMaxDestRdAtomic | kQpMinRnrTimer) : uc;
  }
  if (from == S::kRtr && to == S::kRts)
    return rc ? (kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic) : kQpSqPsn;
  if (from == S::kRts && (to == S::kRts || to == S::kSqd)) return 0;
  if (from == S::kSqd && (to == S::kRts || to == S::kSqd)) return 0;
  if (from == S::kSqe && to == S::kRts && !rc) return 0;
  return -1;
}

// A legal example of an optional attribute for the transition (0 if none).
uint32_t an_optional(QpType t, QpState from, QpState to) {
  using S = QpState;
  if (from == S::kInit && to == S::kInit) return kQpPkeyIndex;
  if (from == S::kInit && to == S::kRtr) return kQpPkeyIndex;
  if (to == S::kRts && from != S::kInit) return kQpCurState;
  if (from == S::kRts && to == S::kSqd) return kQpEnSqdAsyncNotify;
  if (from == S::kSqd && to == S::kSqd) return t == QpType::kRc ? kQpRetryCnt : kQpPkeyIndex;
  return 0;
}

struct Rig {
  explicit Rig(QpType t) : type(t), h(0x0a000001, 3), peer(0x0a000002, 4) {
    qp = make_qp(h, {.type = t});
  }
  QpAttr attrs(QpState to) const {
    QpAttr a;
    a.qp_state = to;
    a.cur_qp_state = cur();
    a.qkey = 7;
    a.qp_access_flags = kAccessRemoteWrite;
    a.ah_attr.dgid = peer.gid;
    a.path_mtu = Mtu::k1024;
    a.dest_qp_num = 0x123;
    a.rq_psn = 5;
    a.sq_psn = 9;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 12;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    return a;
  }
  QpState cur() const { return h->query_qp(qp)->qp_state; }
  Result<void> go(QpState to, uint32_t mask) {
    return h->modify_qp(qp, attrs(to), mask | kQpState, Time::zero());
  }
  // Drives the fresh QP to `s` through valid transitions.
  void reach(QpState s) {
    using S = QpState;
    if (s == S::kReset) return;
    if (s == S::kErr) {
      REQUIRE(go(S::kErr, 0).ok());
      return;
    }
    REQUIRE(go(S::kInit, static_cast<uint32_t>(required(type, S::kReset, S::kInit))).ok());
    if (s == S::kInit) return;
    REQUIRE(go(S::kRtr, static_cast<uint32_t>(required(type, S::kInit, S::kRtr))).ok());
    if (s == S::kRtr) return;
    REQUIRE(go(S::kRts, static_cast<uint32_t>(required(type, S::kRtr, S::kRts))).ok());
    if (s == S::kRts) return;
    if (s == S::kSqd) {
      REQUIRE(go(S::kSqd, 0).ok());
      return;
    }
    // SQE: a UC/UD send queue error (bad L_Key).
    REQUIRE(type != QpType::kRc);
    AhAttr ah;
    ah.dgid = peer.gid;
    const Handle ahh = *h->create_ah(h.pd, ah);
    SendWr wr;
    wr.opcode = WrOpcode::kSend;
    wr.send_flags = kSendSignaled;
    Sge bad{h.addr(0), 8, h.mr.lkey ^ 0x100};
    wr.sgl = {&bad, 1};
    wr.ud.ah = ahh;
    wr.ud.remote_qpn = 0x42;
    REQUIRE(h->post_send(qp, wr, Time::zero()) == 0);
    std::vector<std::byte> buf(Engine::kMaxPacket);
    CHECK(!h->poll_transmit(buf, Time::zero()));
    auto wc = h.poll();
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == WcStatus::kLocProtErr);
    REQUIRE(cur() == S::kSqe);
  }
  QpType type;
  Host h, peer;
  Qpn qp;
};

}  // namespace

TEST_CASE("every state transition for RC / UC and UD: valid ones succeed / others are EINVAL",
          "[qp][state]") {
  for (QpType t : {QpType::kRc, QpType::kUc, QpType::kUd}) {
    for (QpState from : kAll) {
      if (from == QpState::kSqe && t == QpType::kRc) continue;  // RC never enters SQE
      for (QpState to : kAll) {
        DYNAMIC_SECTION("type " << static_cast<int>(t) << " " << to_string(from) << " -> "
                                << to_string(to)) {
          Rig r(t);
          r.reach(from);
          REQUIRE(r.cur() == from);
          const int64_t req = required(t, from, to);
          if (req < 0) {
            auto res = r.go(to, 0);
            REQUIRE(!res.ok());
            CHECK(res.error().code == EINVAL);
            CHECK(r.cur() == from);  // unchanged
          } else {
            const auto mask = static_cast<uint32_t>(req);
            // Each required attribute is required.
            for (uint32_t bit = 1; bit; bit <<= 1) {
              if (!(mask & bit)) continue;
              auto res = r.go(to, mask & ~bit);
              INFO("without attribute " << bit);
              REQUIRE(!res.ok());
              CHECK(res.error().code == EINVAL);
              CHECK(r.cur() == from);
            }
            // A capability change is never allowed by modify_qp.
            auto bad = r.go(to, mask | kQpCap);
            REQUIRE(!bad.ok());
            CHECK(bad.error().code == EINVAL);
            CHECK(r.cur() == from);
            auto ok = r.go(to, mask | an_optional(t, from, to));
            INFO((ok.ok() ? std::string() : ok.error().message));
            REQUIRE(ok.ok());
            CHECK(r.cur() == to);
          }
        }
      }
    }
  }
}

TEST_CASE("attributes not allowed in a transition are EINVAL", "[qp][state]") {
  Rig r(QpType::kRc);
  CHECK(r.go(QpState::kInit, kQpPkeyIndex | kQpPort | kQpAccessFlags | kQpSqPsn).error().code ==
        EINVAL);
  CHECK(r.go(QpState::kInit, kQpPkeyIndex | kQpPort | kQpAccessFlags | kQpQkey).error().code ==
        EINVAL);
  r.reach(QpState::kInit);
  const uint32_t rtr = static_cast<uint32_t>(required(QpType::kRc, QpState::kInit, QpState::kRtr));
  CHECK(r.go(QpState::kRtr, rtr | kQpSqPsn).error().code == EINVAL);
  CHECK(r.go(QpState::kRtr, rtr | kQpTimeout).error().code == EINVAL);
  REQUIRE(r.go(QpState::kRtr, rtr).ok());
  const uint32_t rts = static_cast<uint32_t>(required(QpType::kRc, QpState::kRtr, QpState::kRts));
  CHECK(r.go(QpState::kRts, rts | kQpRqPsn).error().code == EINVAL);
  CHECK(r.go(QpState::kRts, rts | kQpPathMtu).error().code == EINVAL);
  REQUIRE(r.go(QpState::kRts, rts).ok());
  // RTS -> RTS: only the optional ones.
  CHECK(r.h->modify_qp(r.qp, r.attrs(QpState::kRts), kQpMinRnrTimer, Time::zero()).ok());
  CHECK(r.h->modify_qp(r.qp, r.attrs(QpState::kRts), kQpRetryCnt, Time::zero()).error().code ==
        EINVAL);
  CHECK(r.h->modify_qp(r.qp, r.attrs(QpState::kRts), kQpSqPsn, Time::zero()).error().code ==
        EINVAL);
}

TEST_CASE("bad attribute values are EINVAL and change nothing (check / then apply)",
          "[qp][state]") {
  Rig r(QpType::kRc);
  r.reach(QpState::kInit);
  const uint32_t rtr = static_cast<uint32_t>(required(QpType::kRc, QpState::kInit, QpState::kRtr));
  auto try_rtr = [&](auto mutate) {
    QpAttr a = r.attrs(QpState::kRtr);
    mutate(a);
    return r.h->modify_qp(r.qp, a, rtr | kQpState, Time::zero());
  };
  CHECK(try_rtr([](QpAttr& a) { a.path_mtu = static_cast<Mtu>(0); }).error().code == EINVAL);
  CHECK(try_rtr([](QpAttr& a) { a.path_mtu = static_cast<Mtu>(6); }).error().code == EINVAL);
  CHECK(try_rtr([](QpAttr& a) { a.min_rnr_timer = 32; }).error().code == EINVAL);
  CHECK(try_rtr([](QpAttr& a) { a.rq_psn = 1u << 24; }).error().code == EINVAL);
  CHECK(try_rtr([](QpAttr& a) { a.dest_qp_num = 1u << 24; }).error().code == EINVAL);
  CHECK(try_rtr([](QpAttr& a) { a.max_dest_rd_atomic = 200; }).error().code == EINVAL);
  CHECK(try_rtr([](QpAttr& a) { a.ah_attr.sgid_index = 1; }).error().code == EINVAL);
  CHECK(try_rtr([](QpAttr& a) { a.ah_attr.port_num = 2; }).error().code == EINVAL);
  CHECK(r.cur() == QpState::kInit);
  auto q = r.h->query_qp(r.qp);
  CHECK(q->rq_psn == 0);  // nothing of the failed attempts was applied
  CHECK(q->dest_qp_num == 0);
  REQUIRE(try_rtr([](QpAttr&) {}).ok());
  const uint32_t rts = static_cast<uint32_t>(required(QpType::kRc, QpState::kRtr, QpState::kRts));
  auto try_rts = [&](auto mutate) {
    QpAttr a = r.attrs(QpState::kRts);
    mutate(a);
    return r.h->modify_qp(r.qp, a, rts | kQpState, Time::zero());
  };
  CHECK(try_rts([](QpAttr& a) { a.retry_cnt = 8; }).error().code == EINVAL);
  CHECK(try_rts([](QpAttr& a) { a.rnr_retry = 8; }).error().code == EINVAL);
  CHECK(try_rts([](QpAttr& a) { a.timeout = 32; }).error().code == EINVAL);
  CHECK(try_rts([](QpAttr& a) { a.sq_psn = 0x1000000; }).error().code == EINVAL);
  CHECK(try_rts([](QpAttr& a) { a.max_rd_atomic = 17; }).error().code == EINVAL);
  CHECK(r.cur() == QpState::kRtr);
  // cur_qp_state must match when given.
  QpAttr a = r.attrs(QpState::kRts);
  a.cur_qp_state = QpState::kInit;
  CHECK(r.h->modify_qp(r.qp, a, rts | kQpState | kQpCurState, Time::zero()).error().code == EINVAL);
  REQUIRE(try_rts([](QpAttr&) {}).ok());
  q = r.h->query_qp(r.qp);
  CHECK(q->qp_state == QpState::kRts);
  CHECK(q->rq_psn == 5);
  CHECK(q->sq_psn == 9);
  CHECK(q->dest_qp_num == 0x123);
  CHECK(q->path_mtu == Mtu::k1024);
  CHECK(q->timeout == 14);
  CHECK(q->max_rd_atomic == 4);
  CHECK(q->max_dest_rd_atomic == 4);
  CHECK(q->min_rnr_timer == 12);
  // RESET -> INIT values.
  Rig r2(QpType::kRc);
  QpAttr i = r2.attrs(QpState::kInit);
  const uint32_t init = kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags;
  i.pkey_index = 1;
  CHECK(r2.h->modify_qp(r2.qp, i, init, Time::zero()).error().code == EINVAL);
  i.pkey_index = 0;
  i.port_num = 2;
  CHECK(r2.h->modify_qp(r2.qp, i, init, Time::zero()).error().code == EINVAL);
  i.port_num = 1;
  i.qp_access_flags = 1u << 20;
  CHECK(r2.h->modify_qp(r2.qp, i, init, Time::zero()).error().code == EINVAL);
  CHECK(r2.cur() == QpState::kReset);
}

TEST_CASE("path MTU cannot exceed the port MTU", "[qp][state]") {
  EngineConfig cfg;
  cfg.port_mtu = Mtu::k1024;
  Host h(0x0a000001, 1, cfg);
  Qpn q = make_qp(h);
  to_init(h, q, QpType::kRc);
  QpAttr a;
  a.qp_state = QpState::kRtr;
  a.path_mtu = Mtu::k2048;
  a.min_rnr_timer = 1;
  const uint32_t m =
      kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
  CHECK(h->modify_qp(q, a, m, Time::zero()).error().code == EINVAL);
  a.path_mtu = Mtu::k1024;
  CHECK(h->modify_qp(q, a, m, Time::zero()).ok());
}

TEST_CASE("posting per state: send needs RTS / receive needs INIT", "[qp][state]") {
  Rig r(QpType::kRc);
  const Sge s = sge(r.h, 0, 8);
  SendWr wr;
  wr.sgl = {&s, 1};
  RecvWr rw;
  rw.sgl = {&s, 1};
  CHECK(r.h->post_send(r.qp, wr, Time::zero()) == EINVAL);  // RESET
  CHECK(r.h->post_recv(r.qp, rw) == EINVAL);                // RESET
  r.reach(QpState::kInit);
  CHECK(r.h->post_send(r.qp, wr, Time::zero()) == EINVAL);  // INIT
  CHECK(r.h->post_recv(r.qp, rw) == 0);
  REQUIRE(r.go(QpState::kRtr,
               static_cast<uint32_t>(required(QpType::kRc, QpState::kInit, QpState::kRtr)))
              .ok());
  CHECK(r.h->post_send(r.qp, wr, Time::zero()) == EINVAL);  // RTR
  CHECK(r.h->post_recv(r.qp, rw) == 0);
  REQUIRE(r.go(QpState::kRts,
               static_cast<uint32_t>(required(QpType::kRc, QpState::kRtr, QpState::kRts)))
              .ok());
  CHECK(r.h->post_send(r.qp, wr, Time::zero()) == 0);
  CHECK(post(r.h, 0x999, WrOpcode::kSend, {s}, 1) == EINVAL);  // no such QP
}

TEST_CASE("moving to ERR flushes both queues with WR_FLUSH_ERR - posting in ERR flushes",
          "[qp][state]") {
  Pair p;
  for (int i = 0; i < 3; ++i) REQUIRE(post_recv(p.a, p.qa, {sge(p.a, 0, 64)}, 100 + i) == 0);
  p.w.filter = [](const WirePkt&) { return Verdict::kDrop; };
  for (int i = 0; i < 4; ++i)
    REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 64)}, i, i % 2 ? kSendSignaled : 0u) ==
            0);
  p.w.pump();
  QpAttr a;
  a.qp_state = QpState::kErr;
  REQUIRE(p.a->modify_qp(p.qa, a, kQpState, Time::zero()).ok());
  auto wc = p.a.poll();
  REQUIRE(wc.size() == 7);  // unsignaled WRs complete too when flushed (in error)
  for (int i = 0; i < 4; ++i) {
    CHECK(wc[i].wr_id == static_cast<uint64_t>(i));
    CHECK(wc[i].status == WcStatus::kWrFlushErr);
  }
  for (int i = 0; i < 3; ++i) {
    CHECK(wc[4 + i].wr_id == 100u + static_cast<uint64_t>(i));
    CHECK(wc[4 + i].status == WcStatus::kWrFlushErr);
    CHECK(wc[4 + i].opcode == WcOpcode::kRecv);
  }
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 64)}, 50) == 0);
  REQUIRE(post_recv(p.a, p.qa, {sge(p.a, 0, 64)}, 51) == 0);
  wc = p.a.poll();
  REQUIRE(wc.size() == 2);
  CHECK(wc[0].wr_id == 50);
  CHECK(wc[0].status == WcStatus::kWrFlushErr);
  CHECK(wc[1].wr_id == 51);
  CHECK(wc[1].status == WcStatus::kWrFlushErr);
  // Nothing more is sent from ERR, and the timer does not fire.
  const size_t sent = p.w.log.size();
  p.w.run(Duration::millis(1000));
  CHECK(p.w.log.size() == sent);
  CHECK(p.a->next_deadline() == Time::never());
}

TEST_CASE("ERR -> RESET -> connected again works - RESET discards without completions",
          "[qp][state]") {
  Pair p;
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 64)}, 1) == 0);
  QpAttr a;
  a.qp_state = QpState::kReset;
  REQUIRE(p.b->modify_qp(p.qb, a, kQpState, Time::zero()).ok());
  CHECK(p.b.poll().empty());  // the posted WQE vanished without a completion
  connect(p.b, p.qb, QpType::kRc, p.a, p.qa);
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 64)}, 2) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 16)}, 9) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  auto wb = p.b.poll();
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].wr_id == 2);
}

TEST_CASE("SQD holds new WRs / reports SQ_DRAINED / and RTS resumes", "[qp][state]") {
  Pair p;
  p.w.filter = [](const WirePkt& x) { return x.from == 1 ? Verdict::kHold : Verdict::kDeliver; };
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 3000)}, 1, kSendSignaled, p.b.addr(0),
               p.b.mr.rkey) == 0);
  p.w.pump();
  QpAttr a;
  a.qp_state = QpState::kSqd;
  a.en_sqd_async_notify = true;
  REQUIRE(p.a->modify_qp(p.qa, a, kQpState | kQpEnSqdAsyncNotify, Time::zero()).ok());
  CHECK(p.a->query_qp(p.qa)->sq_draining);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 8)}, 2, kSendSignaled, p.b.addr(0),
               p.b.mr.rkey) == 0);
  const size_t before = p.w.log.size();
  p.w.pump();
  CHECK(p.w.log.size() == before);  // not started in SQD
  CHECK(p.a.events().empty());
  p.w.filter = nullptr;
  p.w.release();
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].wr_id == 1);
  auto ev = p.a.events();
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].type == AsyncEventType::kSqDrained);
  CHECK(ev[0].element == p.qa);
  CHECK(!p.a->query_qp(p.qa)->sq_draining);
  a.qp_state = QpState::kRts;
  REQUIRE(p.a->modify_qp(p.qa, a, kQpState, Time::zero()).ok());
  wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].wr_id == 2);
}

TEST_CASE("UD/UC send queue error -> SQE: receive side works / SQE -> RTS resumes", "[qp][state]") {
  Rig r(QpType::kUd);
  r.reach(QpState::kSqe);
  const Sge s = sge(r.h, 0, 8);
  RecvWr rw;
  rw.sgl = {&s, 1};
  CHECK(r.h->post_recv(r.qp, rw) == 0);  // receive queue still works in SQE
  CHECK(r.h.poll().empty());
  REQUIRE(r.go(QpState::kRts, 0).ok());
  CHECK(r.cur() == QpState::kRts);
}

TEST_CASE("create_qp: bad CQ/PD/SRQ / caps over limits / QP table full", "[qp][create]") {
  EngineConfig cfg;
  cfg.max_qps = 2;
  cfg.max_qp_wr = 64;
  cfg.max_sge = 4;
  cfg.max_inline_data = 32;
  Host h(0x0a000001, 1, cfg);
  QpInitAttr a;
  a.send_cq = a.recv_cq = h.cq;
  a.cap = {16, 16, 2, 2, 16};
  CHECK(h->create_qp(0xdead, a).error().code == EINVAL);
  QpInitAttr b = a;
  b.send_cq = 0x1234;
  CHECK(h->create_qp(h.pd, b).error().code == EINVAL);
  b = a;
  b.srq = 0x1234;
  CHECK(h->create_qp(h.pd, b).error().code == EINVAL);
  b = a;
  b.cap.max_send_wr = 65;
  CHECK(h->create_qp(h.pd, b).error().code == EINVAL);
  b = a;
  b.cap.max_recv_sge = 5;
  CHECK(h->create_qp(h.pd, b).error().code == EINVAL);
  b = a;
  b.cap.max_inline_data = 33;
  CHECK(h->create_qp(h.pd, b).error().code == EINVAL);
  b = a;
  b.qp_type = static_cast<QpType>(1);
  CHECK(h->create_qp(h.pd, b).error().code == EINVAL);
  auto q1 = h->create_qp(h.pd, a);
  auto q2 = h->create_qp(h.pd, a);
  REQUIRE(q1.ok());
  REQUIRE(q2.ok());
  CHECK(h->create_qp(h.pd, a).error().code == ENOMEM);
  auto qa = h->query_qp(*q1);
  REQUIRE(qa.ok());
  CHECK(qa->qp_state == QpState::kReset);
  CHECK(qa->cap.max_send_wr == 16);
  CHECK(qa->cap.max_inline_data == 16);
  REQUIRE(h->destroy_qp(*q1).ok());
  CHECK(h->destroy_qp(*q1).error().code == EINVAL);
  CHECK(h->query_qp(*q1).error().code == EINVAL);
  CHECK(h->create_qp(h.pd, a).ok());
}

TEST_CASE("send queue full is ENOMEM - too many SGEs is EINVAL", "[qp]") {
  Pair p(QpOpts{.max_send_wr = 4, .max_recv_wr = 2, .max_send_sge = 2, .max_recv_sge = 1});
  p.w.filter = [](const WirePkt&) { return Verdict::kDrop; };
  for (int i = 0; i < 4; ++i) REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 8)}, i) == 0);
  CHECK(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 8)}, 5) == ENOMEM);
  CHECK(post_recv(p.a, p.qa, {sge(p.a, 0, 8)}, 1) == 0);
  CHECK(post_recv(p.a, p.qa, {sge(p.a, 0, 8)}, 2) == 0);
  CHECK(post_recv(p.a, p.qa, {sge(p.a, 0, 8)}, 3) == ENOMEM);
  CHECK(post_recv(p.b, p.qb, {sge(p.b, 0, 8), sge(p.b, 8, 8)}, 3) == EINVAL);
  CHECK(post(p.b, p.qb, WrOpcode::kSend, {sge(p.b, 0, 8), sge(p.b, 8, 8), sge(p.b, 16, 8)}, 5) ==
        EINVAL);
  // Memory-window operations carry no SGEs (test_mw.cc has the rest).
  CHECK(post(p.b, p.qb, WrOpcode::kLocalInv, {sge(p.b, 0, 8)}, 5) == EINVAL);
  CHECK(post(p.b, p.qb, WrOpcode::kBindMw, {sge(p.b, 0, 8)}, 5) == EINVAL);
}
