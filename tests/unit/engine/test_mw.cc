// Memory windows (IBA 10.6.7): type 1 and type 2 binds, the responder's R_Key checks
// through a window (bounds, rights, PD, the type 2 QP association), invalidation by
// LOCAL_INV and by SEND with Invalidate, bind errors as MW_BIND_ERR, and what dereg_mr /
// dealloc_mw / dealloc_pd do while windows are bound.
#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

constexpr uint64_t kMrOff = 0x40000;   // b's MR that windows are bound to
constexpr uint64_t kMrLen = 0x10000;
constexpr uint64_t kWinOff = 0x41000;  // the window: 4 KiB inside it
constexpr uint64_t kWinLen = 0x1000;

uint32_t next_key(uint32_t rkey) { return (rkey & ~0xffu) | ((rkey + 1) & 0xffu); }

// b registers an MR with MW_BIND (and local write, so windows may grant remote write).
MrKeys bind_mr(Host& b, uint32_t extra = kAccessLocalWrite) {
  auto k = b->reg_mr(b.pd, b.addr(kMrOff), kMrLen, kAccessMwBind | extra);
  REQUIRE(k.ok());
  return *k;
}

int post_bind(Host& h, Qpn q, Handle mw, uint32_t rkey, uint32_t mr_lkey, uint64_t addr,
              uint64_t len, uint32_t access, uint64_t wr_id = 77) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kBindMw;
  wr.send_flags = kSendSignaled;
  wr.bind.mw = mw;
  wr.bind.rkey = rkey;
  wr.bind.mr_lkey = mr_lkey;
  wr.bind.addr = addr;
  wr.bind.length = len;
  wr.bind.access = access;
  return h->post_send(q, wr, Time::zero());
}

// Binds window `mw` through b's QP and returns the completion.
Wc bind(Pair& p, Handle mw, uint32_t rkey, const MrKeys& mr, uint32_t access,
        uint64_t off = kWinOff, uint64_t len = kWinLen, Qpn q = 0) {
  REQUIRE(post_bind(p.b, q ? q : p.qb, mw, rkey, mr.lkey, p.b.addr(off), len, access) == 0);
  auto wc = wait_wc(p.w, p.b, 1);
  REQUIRE(wc.size() == 1);
  return wc[0];
}

Wc write_to(Pair& p, uint64_t off, uint32_t rkey, uint32_t len = 256, uint64_t wr_id = 1) {
  p.a.mem.fill(p.a.addr(0), len, static_cast<uint32_t>(wr_id + off));
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, len)}, wr_id, kSendSignaled,
               p.b.addr(off), rkey) == 0);
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  return wc[0];
}

}  // namespace

TEST_CASE("mw: type 2 bound by a WR grants exactly its range and rights", "[mw]") {
  Pair p;
  const MrKeys mr = bind_mr(p.b);
  auto mw = p.b->alloc_mw(p.b.pd, kMwType2);
  REQUIRE(mw.ok());
  // Before any bind the R_Key grants nothing.
  SECTION("unbound") { CHECK(write_to(p, kWinOff, mw->rkey).status == WcStatus::kRemAccessErr); }
  SECTION("bound") {
    const uint32_t rkey = next_key(mw->rkey);
    const Wc b = bind(p, mw->handle, rkey, mr, kAccessRemoteWrite | kAccessRemoteRead);
    CHECK(b.status == WcStatus::kSuccess);
    CHECK(b.opcode == WcOpcode::kBindMw);
    CHECK(b.wr_id == 77);
    CHECK(write_to(p, kWinOff + 0x100, rkey).status == WcStatus::kSuccess);
    CHECK(p.b.mem.same(p.b.addr(kWinOff + 0x100), p.a.mem, p.a.addr(0), 256));
    SECTION("the old key byte is refused") {
      CHECK(write_to(p, kWinOff, mw->rkey, 256, 2).status == WcStatus::kRemAccessErr);
    }
    SECTION("past the window's end (inside the MR) is refused") {
      CHECK(write_to(p, kWinOff + kWinLen - 128, rkey, 256, 2).status ==
            WcStatus::kRemAccessErr);
    }
    SECTION("a right the window lacks is refused") {
      CHECK(post_atomic(p.a, p.qa, WrOpcode::kAtomicFetchAdd, sge(p.a, 0, 8), 3,
                        p.b.addr(kWinOff), rkey, 1, 0) == 0);
      auto wc = wait_wc(p.w, p.a, 1);
      REQUIRE(wc.size() == 1);
      CHECK(wc[0].status == WcStatus::kRemAccessErr);
    }
    SECTION("a type 2 window answers only the QP that bound it (type 2B)") {
      const Qpn qa2 = make_qp(p.a), qb2 = make_qp(p.b);
      connect(p.a, qa2, QpType::kRc, p.b, qb2);
      connect(p.b, qb2, QpType::kRc, p.a, qa2);
      REQUIRE(post(p.a, qa2, WrOpcode::kRdmaWrite, {sge(p.a, 0, 64)}, 9, kSendSignaled,
                   p.b.addr(kWinOff), rkey) == 0);
      auto wc = wait_wc(p.w, p.a, 1);
      REQUIRE(wc.size() == 1);
      CHECK(wc[0].status == WcStatus::kRemAccessErr);
      // The QP that bound it still writes through it.
      CHECK(write_to(p, kWinOff, rkey, 64, 10).status == WcStatus::kSuccess);
    }
    SECTION("binding a bound type 2 window again is MW_BIND_ERR and ends the QP") {
      const Wc e = bind(p, mw->handle, next_key(rkey), mr, kAccessRemoteWrite);
      CHECK(e.status == WcStatus::kMwBindErr);
      CHECK(p.b->query_qp(p.qb)->qp_state == QpState::kErr);
    }
  }
}

TEST_CASE("mw: type 2 invalidation, local and remote, then the R_Key is refused", "[mw]") {
  Pair p;
  const MrKeys mr = bind_mr(p.b);
  auto mw = p.b->alloc_mw(p.b.pd, kMwType2);
  REQUIRE(mw.ok());
  const uint32_t rkey = next_key(mw->rkey);
  REQUIRE(bind(p, mw->handle, rkey, mr, kAccessRemoteWrite).status == WcStatus::kSuccess);
  REQUIRE(write_to(p, kWinOff, rkey).status == WcStatus::kSuccess);
  SECTION("LOCAL_INV") {
    REQUIRE(post(p.b, p.qb, WrOpcode::kLocalInv, {}, 5, kSendSignaled, 0, 0, rkey) == 0);
    auto wc = wait_wc(p.w, p.b, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == WcStatus::kSuccess);
    CHECK(wc[0].opcode == WcOpcode::kLocalInv);
    // Invalidated: MR can go... not before the window is gone? No: unbound, so it can.
    CHECK(write_to(p, kWinOff, rkey, 256, 6).status == WcStatus::kRemAccessErr);
  }
  SECTION("SEND with Invalidate from the peer") {
    REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 256)}, 40) == 0);
    REQUIRE(post(p.a, p.qa, WrOpcode::kSendWithInv, {sge(p.a, 0, 16)}, 41, kSendSignaled, 0, 0,
                 rkey) == 0);
    auto wa = wait_wc(p.w, p.a, 1);
    auto wb = wait_wc(p.w, p.b, 1);
    REQUIRE(wa.size() == 1);
    REQUIRE(wb.size() == 1);
    CHECK(wa[0].status == WcStatus::kSuccess);
    CHECK(wb[0].status == WcStatus::kSuccess);
    CHECK((wb[0].wc_flags & kWcWithInv) != 0);
    CHECK(wb[0].imm_data == rkey);
    CHECK(write_to(p, kWinOff, rkey, 256, 6).status == WcStatus::kRemAccessErr);
  }
  SECTION("after invalidation the window binds again with a new key byte") {
    REQUIRE(post(p.b, p.qb, WrOpcode::kLocalInv, {}, 5, kSendSignaled, 0, 0, rkey) == 0);
    REQUIRE(wait_wc(p.w, p.b, 1).size() == 1);
    const uint32_t k2 = next_key(rkey);
    REQUIRE(bind(p, mw->handle, k2, mr, kAccessRemoteWrite, kWinOff + 0x2000).status ==
            WcStatus::kSuccess);
    CHECK(write_to(p, kWinOff + 0x2000, k2, 256, 7).status == WcStatus::kSuccess);
  }
  SECTION("the MR cannot be deregistered while bound; dealloc_mw unbinds") {
    auto r = p.b->dereg_mr(mr.lkey);
    REQUIRE(!r.ok());
    CHECK(r.error().code == EBUSY);
    CHECK(p.b->rereg_mr(mr.lkey, kReregAccess, kNoHandle, 0, 0, kAccessLocalWrite).error().code ==
          EBUSY);
    REQUIRE(p.b->dealloc_mw(mw->handle).ok());
    CHECK(write_to(p, kWinOff, rkey, 256, 8).status == WcStatus::kRemAccessErr);
    CHECK(p.b->dereg_mr(mr.lkey).ok());
    CHECK(p.b->dealloc_mw(mw->handle).error().code == EINVAL);  // gone
  }
}

TEST_CASE("mw: type 1 bound, rebound with zero length, its PD is busy", "[mw]") {
  Pair p;
  const MrKeys mr = bind_mr(p.b);
  auto mw = p.b->alloc_mw(p.b.pd, kMwType1);
  REQUIRE(mw.ok());
  uint32_t rkey = next_key(mw->rkey);
  REQUIRE(bind(p, mw->handle, rkey, mr, kAccessRemoteWrite).status == WcStatus::kSuccess);
  CHECK(write_to(p, kWinOff, rkey).status == WcStatus::kSuccess);
  CHECK(p.b->dealloc_pd(p.b.pd).error().code == EBUSY);
  SECTION("a type 1 window rebinds without invalidation; the old key goes") {
    const uint32_t k2 = next_key(rkey);
    REQUIRE(bind(p, mw->handle, k2, mr, kAccessRemoteWrite, kWinOff + 0x3000).status ==
            WcStatus::kSuccess);
    CHECK(write_to(p, kWinOff + 0x3000, k2, 256, 2).status == WcStatus::kSuccess);
    CHECK(write_to(p, kWinOff, rkey, 256, 3).status == WcStatus::kRemAccessErr);
  }
  SECTION("zero-length bind unbinds; the MR can then go") {
    const uint32_t k2 = next_key(rkey);
    REQUIRE(bind(p, mw->handle, k2, mr, 0, kWinOff, 0).status == WcStatus::kSuccess);
    CHECK(p.b->dereg_mr(mr.lkey).ok());
    CHECK(write_to(p, kWinOff, k2, 256, 4).status == WcStatus::kRemAccessErr);
  }
  SECTION("LOCAL_INV cannot invalidate a type 1 window: LOC_QP_OP_ERR") {
    REQUIRE(post(p.b, p.qb, WrOpcode::kLocalInv, {}, 5, kSendSignaled, 0, 0, rkey) == 0);
    auto wc = wait_wc(p.w, p.b, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == WcStatus::kLocQpOpErr);
  }
}

TEST_CASE("mw: bind errors are MW_BIND_ERR; allocation and post checks", "[mw]") {
  Pair p;
  CHECK(p.b->alloc_mw(p.b.pd, 3).error().code == EINVAL);
  CHECK(p.b->alloc_mw(kNoHandle, kMwType2).error().code == EINVAL);
  auto mw = p.b->alloc_mw(p.b.pd, kMwType2);
  REQUIRE(mw.ok());
  const uint32_t rkey = next_key(mw->rkey);
  SECTION("MR without MW_BIND (C10-75)") {
    const MrKeys plain{p.b.mr.lkey, p.b.mr.rkey};
    CHECK(bind(p, mw->handle, rkey, plain, kAccessRemoteWrite).status == WcStatus::kMwBindErr);
    // The QP is in ERR: later WRs flush.
    CHECK(p.b->query_qp(p.qb)->qp_state == QpState::kErr);
  }
  SECTION("remote write through an MR without local write") {
    CHECK(bind(p, mw->handle, rkey, bind_mr(p.b, 0), kAccessRemoteWrite).status ==
          WcStatus::kMwBindErr);
  }
  SECTION("a window outside the MR") {
    CHECK(bind(p, mw->handle, rkey, bind_mr(p.b), kAccessRemoteWrite, kMrOff + kMrLen - 16, 32)
              .status == WcStatus::kMwBindErr);
  }
  SECTION("a new R_Key with another index") {
    CHECK(bind(p, mw->handle, rkey ^ 0x100, bind_mr(p.b), kAccessRemoteWrite).status ==
          WcStatus::kMwBindErr);
  }
  SECTION("a window of another PD (C10-72)") {
    const Handle pd2 = *p.b->alloc_pd();
    auto mw2 = p.b->alloc_mw(pd2, kMwType2);
    REQUIRE(mw2.ok());
    CHECK(bind(p, mw2->handle, next_key(mw2->rkey), bind_mr(p.b), kAccessRemoteWrite).status ==
          WcStatus::kMwBindErr);
  }
  SECTION("UD QPs take no binds; binds carry no SGEs") {
    const Qpn ud = make_qp(p.b, QpOpts{.type = QpType::kUd});
    connect(p.b, ud, QpType::kUd, p.a, p.qa);
    CHECK(post_bind(p.b, ud, mw->handle, rkey, 0, 0, 0, 0) == EINVAL);
    SendWr wr;
    wr.opcode = WrOpcode::kBindMw;
    const Sge s = sge(p.b, 0, 8);
    wr.sgl = {&s, 1};
    CHECK(p.b->post_send(p.qb, wr, Time::zero()) == EINVAL);
  }
}

TEST_CASE("mw: a bind completes in order after the WRs before it", "[mw]") {
  Pair p;
  const MrKeys mr = bind_mr(p.b);
  auto mw = p.a->alloc_mw(p.a.pd, kMwType2);
  REQUIRE(mw.ok());
  auto amr = p.a->reg_mr(p.a.pd, p.a.addr(kMrOff), kMrLen, kAccessMwBind | kAccessLocalWrite);
  REQUIRE(amr.ok());
  (void)mr;
  // a: WRITE (needs an ACK), BIND (local), WRITE: completions 1, 2, 3 in that order.
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 4096)}, 1, kSendSignaled,
               p.b.addr(0), p.b.mr.rkey) == 0);
  REQUIRE(post_bind(p.a, p.qa, mw->handle, next_key(mw->rkey), amr->lkey, p.a.addr(kWinOff),
                    kWinLen, kAccessRemoteRead, 2) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 64)}, 3, kSendSignaled,
               p.b.addr(0x8000), p.b.mr.rkey) == 0);
  auto wc = wait_wc(p.w, p.a, 3);
  REQUIRE(wc.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    INFO(wc_str(wc[i]));
    CHECK(wc[i].wr_id == i + 1);
    CHECK(wc[i].status == WcStatus::kSuccess);
  }
  CHECK(wc[1].opcode == WcOpcode::kBindMw);
  // b reads through a's window.
  REQUIRE(post(p.b, p.qb, WrOpcode::kRdmaRead, {sge(p.b, 0x200000, 128)}, 4, kSendSignaled,
               p.a.addr(kWinOff), next_key(mw->rkey)) == 0);
  auto rb = wait_wc(p.w, p.b, 1);
  REQUIRE(rb.size() == 1);
  CHECK(rb[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x200000), p.a.mem, p.a.addr(kWinOff), 128));
}
