// Engine::resize_cq (ibv_resize_cq, IBA 11.2.6.3), completion timestamps (Wc::timestamp) and
// Engine::rereg_mr_host (a new translation of an MR whose host address and iova differ, as
// the daemon registers the kernel path's MRs).
#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

constexpr uint32_t kLwRw = kAccessLocalWrite | kAccessRemoteWrite;

int code(const Result<void>& r) { return r.ok() ? 0 : r.error().code; }

// n signaled 64-byte RDMA WRITEs from a to b (wr_id base + i), run to completion unpolled.
// The wire's clock moves 1 ms first, so completions carry a time of their own.
Time writes(Pair& p, int n, uint64_t base) {
  p.w.now += Duration::millis(1);
  const Time start = p.w.now;
  for (int i = 0; i < n; ++i)
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 64)}, base + i, kSendSignaled,
                 p.b.addr(0x100000), p.b.mr.rkey) == 0);
  p.w.run();
  return start;
}

}  // namespace

TEST_CASE("resize_cq keeps unpolled completions in order; refuses below them",
          "[objects][resize]") {
  Pair p;
  const Handle cq = p.a.cq;
  const Time t0 = writes(p, 5, 100);
  CHECK(code(p.a->resize_cq(cq, 4)) == EINVAL);  // 5 held
  CHECK(code(p.a->resize_cq(cq, 0)) == EINVAL);
  CHECK(code(p.a->resize_cq(cq, EngineConfig{}.max_cqe + 1)) == EINVAL);
  CHECK(code(p.a->resize_cq(kNoHandle, 8)) == EINVAL);
  REQUIRE(p.a->resize_cq(cq, 5).ok());
  auto got = p.a.poll();
  REQUIRE(got.size() == 5);
  Time prev = t0;
  for (int i = 0; i < 5; ++i) {
    CHECK(got[i].wr_id == uint64_t(100 + i));
    CHECK(got[i].status == WcStatus::kSuccess);
    // Stamped with the time of the entry point that completed it (the ACK's arrival).
    CHECK(got[i].timestamp >= t0);
    CHECK(got[i].timestamp >= prev);
    CHECK(got[i].timestamp <= p.w.now);
    prev = got[i].timestamp;
  }
  // The new size is the CQ's: 5 fit, the 6th overruns it (IBA 11.4: CQ error).
  writes(p, 5, 200);
  CHECK(p.a.events().empty());
  writes(p, 1, 300);
  auto ev = p.a.events();
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].type == AsyncEventType::kCqErr);
}

TEST_CASE("rereg_mr_host: a new translation moves host address and iova apart",
          "[objects][rereg]") {
  Pair p;
  // As the daemon registers a kernel-path MR: keys checked against the iova peers use, data
  // at a host address of its own.
  constexpr uint64_t kIova = 0x5000000, kIova2 = 0x6000000;
  auto k = p.b->reg_mr_host(p.b.pd, p.b.addr(0x10000), 4096, kLwRw, kIova);
  REQUIRE(k.ok());
  auto write_at = [&](uint64_t va, uint64_t wr_id) {
    p.a.mem.fill(p.a.addr(0), 256, static_cast<uint32_t>(wr_id));
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 256)}, wr_id, kSendSignaled, va,
                 k->rkey) == 0);
    auto wc = wait_wc(p.w, p.a, 1);
    REQUIRE(wc.size() == 1);
    return wc[0].status;
  };
  CHECK(write_at(kIova + 512, 1) == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x10000 + 512), p.a.mem, p.a.addr(0), 256));
  REQUIRE(p.b->rereg_mr_host(k->lkey, kReregTranslation, kNoHandle, p.b.addr(0x30000), 8192,
                             0, kIova2)
              .ok());
  CHECK(write_at(kIova2 + 4096, 2) == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x30000 + 4096), p.a.mem, p.a.addr(0), 256));
  // Access only: the iova stays where the translation put it (rereg_mr alone would not know it).
  REQUIRE(p.b->rereg_mr_host(k->lkey, kReregAccess, kNoHandle, 0, 0, kLwRw, 0).ok());
  CHECK(write_at(kIova2, 3) == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x30000), p.a.mem, p.a.addr(0), 256));
  // The old iova is outside the MR now: refused, and the QP goes to error.
  CHECK(write_at(kIova + 512, 4) == WcStatus::kRemAccessErr);
  CHECK(code(p.b->rereg_mr_host(k->lkey, kReregTranslation, kNoHandle, p.b.addr(0), 16, 0,
                                ~0ull - 4)) == EINVAL);
}
