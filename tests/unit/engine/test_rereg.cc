// Engine::rereg_mr (ibv_rereg_mr, IBA 11.2.8 "Reregister Memory Region"): the MR changes in
// place, its keys stay, a peer holding the rkey sees the new range, PD and rights at once, and
// a refused change leaves the MR exactly as it was.
#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

constexpr uint32_t kLw = kAccessLocalWrite;
constexpr uint32_t kLwRw = kAccessLocalWrite | kAccessRemoteWrite;

// A's RDMA WRITE of 256 bytes to b's address `off` with `rkey`; returns a's completion.
Wc write_to(Pair& p, uint64_t off, uint32_t rkey, uint64_t wr_id, uint32_t seed) {
  p.a.mem.fill(p.a.addr(0), 256, seed);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 256)}, wr_id, kSendSignaled,
               p.b.addr(off), rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  return wa[0];
}

}  // namespace

TEST_CASE("rereg_mr: access, translation and PD change in place; keys stay", "[objects][rereg]") {
  Pair p;
  auto k = p.b->reg_mr(p.b.pd, p.b.addr(0x10000), 4096, kLwRw);
  REQUIRE(k.ok());
  CHECK(write_to(p, 0x10000, k->rkey, 1, 1).status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 256));

  SECTION("dropping REMOTE_WRITE makes the same rkey fail") {
    REQUIRE(p.b->rereg_mr(k->lkey, kReregAccess, kNoHandle, 0, 0, kLw).ok());
    p.b.mem.zero(p.b.addr(0x10000), 256);
    CHECK(write_to(p, 0x10000, k->rkey, 2, 2).status == WcStatus::kRemAccessErr);
    CHECK(p.b.mem.get64(p.b.addr(0x10000)) == 0);  // nothing was written
  }
  SECTION("a new range: the old addresses fail, the new ones work with the same rkey") {
    REQUIRE(p.b->rereg_mr(k->lkey, kReregTranslation, kNoHandle, p.b.addr(0x30000), 8192, 0).ok());
    CHECK(write_to(p, 0x31000, k->rkey, 2, 3).status == WcStatus::kSuccess);
    CHECK(p.b.mem.same(p.b.addr(0x31000), p.a.mem, p.a.addr(0), 256));
    // The QP stays usable after a success; the old range now fails it.
    CHECK(write_to(p, 0x10000, k->rkey, 3, 4).status == WcStatus::kRemAccessErr);
  }
  SECTION("another PD: the QP's PD no longer matches; the PDs' references move") {
    const Handle pd2 = *p.b->alloc_pd();
    REQUIRE(p.b->rereg_mr(k->lkey, kReregPd, pd2, 0, 0, 0).ok());
    CHECK(p.b->dealloc_pd(pd2).error().code == EBUSY);
    CHECK(write_to(p, 0x10000, k->rkey, 2, 5).status == WcStatus::kRemAccessErr);
    REQUIRE(p.b->dereg_mr(k->lkey).ok());
    CHECK(p.b->dealloc_pd(pd2).ok());
  }
  SECTION("all three at once, then a local SGE through the lkey") {
    const Handle pd2 = *p.b->alloc_pd();
    REQUIRE(p.b->rereg_mr(k->lkey, kReregTranslation | kReregPd | kReregAccess, p.b.pd,
                          p.b.addr(0x50000), 4096, kLwRw | kAccessRemoteRead)
                .ok());
    CHECK(write_to(p, 0x50000, k->rkey, 2, 6).status == WcStatus::kSuccess);
    CHECK(p.b.mem.same(p.b.addr(0x50000), p.a.mem, p.a.addr(0), 256));
    CHECK(p.b->dealloc_pd(pd2).ok());  // never referenced
  }
}

TEST_CASE("rereg_mr: a refused change leaves the MR as it was", "[objects][rereg]") {
  Pair p;
  auto k = p.b->reg_mr(p.b.pd, p.b.addr(0x10000), 4096, kLwRw);
  REQUIRE(k.ok());
  const Handle pd2 = *p.b->alloc_pd();
  auto code = [](const Result<void>& r) { return r.ok() ? 0 : r.error().code; };
  CHECK(code(p.b->rereg_mr(k->lkey, 0, kNoHandle, 0, 0, 0)) == EINVAL);
  CHECK(code(p.b->rereg_mr(k->lkey, 1u << 3, kNoHandle, 0, 0, 0)) == EINVAL);
  CHECK(code(p.b->rereg_mr(k->lkey ^ 0x100, kReregAccess, kNoHandle, 0, 0, kLw)) == EINVAL);
  // Each bad request also carries a valid change that must not be applied.
  CHECK(code(p.b->rereg_mr(k->lkey, kReregPd | kReregAccess, kNoHandle, 0, 0, kLw)) == EINVAL);
  CHECK(code(p.b->rereg_mr(k->lkey, kReregPd | kReregAccess, pd2, 0, 0, kAccessRemoteWrite)) ==
        EINVAL);
  CHECK(code(p.b->rereg_mr(k->lkey, kReregTranslation | kReregPd, pd2, ~0ull - 10, 4096, 0)) ==
        EINVAL);
  CHECK(p.b->dealloc_pd(pd2).ok());  // the MR never moved to it
  CHECK(write_to(p, 0x10000, k->rkey, 1, 7).status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 256));
}

// Engine::reg_mr_host (the kernel path's MRs, docs/kmod.md): peers name the MR by its iova,
// the engine hands MemoryAccess the host address; a rereg that does not change the
// translation keeps that iova.
TEST_CASE("reg_mr_host: peers use the iova, MemoryAccess gets the host address",
          "[objects][rereg]") {
  Pair p;
  constexpr uint64_t kIova = 0x7f00'0000'0000ull;
  auto k = p.b->reg_mr_host(p.b.pd, p.b.addr(0x20000), 4096, kLwRw, kIova);
  REQUIRE(k.ok());
  auto write_iova = [&](uint64_t wr_id, uint32_t seed) {
    p.a.mem.fill(p.a.addr(0), 256, seed);
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 256)}, wr_id, kSendSignaled,
                 kIova + 0x100, k->rkey) == 0);
    auto wa = wait_wc(p.w, p.a, 1);
    REQUIRE(wa.size() == 1);
    return wa[0].status;
  };
  CHECK(write_iova(1, 1) == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x20100), p.a.mem, p.a.addr(0), 256));
  // The host address is no iova of this MR: a peer naming it is refused.
  p.a.mem.fill(p.a.addr(0), 256, 9);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 256)}, 2, kSendSignaled,
               p.b.addr(0x20100), k->rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kRemAccessErr);
}

TEST_CASE("reg_mr_host: a rereg of the rights keeps the iova", "[objects][rereg]") {
  Pair p;
  constexpr uint64_t kIova = 0x7f00'0000'0000ull;
  auto k = p.b->reg_mr_host(p.b.pd, p.b.addr(0x20000), 4096, kLw, kIova);
  REQUIRE(k.ok());
  REQUIRE(p.b->rereg_mr(k->lkey, kReregAccess, kNoHandle, 0, 0, kLwRw).ok());
  p.a.mem.fill(p.a.addr(0), 256, 3);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 256)}, 1, kSendSignaled,
               kIova, k->rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x20000), p.a.mem, p.a.addr(0), 256));
}
