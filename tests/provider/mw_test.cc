// Memory windows through libibverbs and libsroce against a live sroced (run_with_sroced.sh
// runs it under sroce-run; both QPs of the pair live in this process): the device caps,
// ibv_alloc_mw / ibv_bind_mw (type 1) / IBV_WR_BIND_MW (type 2) / IBV_WR_LOCAL_INV, a peer
// writing through the window's rkey, the rkey refused after invalidation, and
// ibv_dereg_mr refused (EBUSY) while a window is bound.
#include <errno.h>
#include <infiniband/verbs.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "verbs_util.h"

using namespace sroce::test;

namespace {

constexpr int kBindable = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;

ibv_wc one_wc(ibv_cq* cq) {
  auto wc = poll_n(cq, 1);
  REQUIRE(wc.size() == 1);
  return wc[0];
}

// a writes 256 bytes of `src` to b's `dst + off` through `rkey`; returns the status.
ibv_wc_status write_through(Pair& r, const Buffer& src, const Buffer& dst, uint64_t off,
                            uint32_t rkey) {
  REQUIRE(post_send(r.a, IBV_WR_RDMA_WRITE, src, 256, 9, dst.addr() + off, rkey) == 0);
  return one_wc(r.cq_a).status;
}

}  // namespace

TEST_CASE("memory windows: device caps and allocation", "[mw]") {
  Pair r;
  ibv_device_attr attr{};
  REQUIRE(ibv_query_device(r.ctx, &attr) == 0);
  CHECK((attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW) != 0);
  CHECK((attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0);
  CHECK(attr.max_mw > 0);
  errno = 0;
  CHECK(ibv_alloc_mw(r.pd, static_cast<ibv_mw_type>(3)) == nullptr);
  CHECK(errno == EINVAL);
  ibv_mw* mw = ibv_alloc_mw(r.pd, IBV_MW_TYPE_2);
  REQUIRE(mw != nullptr);
  CHECK(mw->type == IBV_MW_TYPE_2);
  CHECK(mw->pd == r.pd);
  CHECK(ibv_dealloc_pd(r.pd) == EBUSY);
  CHECK(ibv_dealloc_mw(mw) == 0);
}

TEST_CASE("memory windows: type 1 bound by ibv_bind_mw, then unbound", "[mw]") {
  Pair r;
  Buffer src(r.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
  Buffer dst(r.pd, 8192, kBindable);
  for (size_t i = 0; i < 256; ++i) src.bytes[i] = static_cast<uint8_t>(i * 3 + 1);
  ibv_mw* mw = ibv_alloc_mw(r.pd, IBV_MW_TYPE_1);
  REQUIRE(mw != nullptr);
  const uint32_t first = mw->rkey;
  ibv_mw_bind bind{};
  bind.wr_id = 55;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info.mr = dst.mr;
  bind.bind_info.addr = dst.addr() + 4096;
  bind.bind_info.length = 1024;
  bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  REQUIRE(ibv_bind_mw(r.b, mw, &bind) == 0);
  CHECK(mw->rkey != first);
  CHECK((mw->rkey >> 8) == (first >> 8));  // only the key byte changes
  ibv_wc wc = one_wc(r.cq_b);
  CHECK(wc.status == IBV_WC_SUCCESS);
  CHECK(wc.opcode == IBV_WC_BIND_MW);
  CHECK(wc.wr_id == 55);
  CHECK(write_through(r, src, dst, 4096 + 512, mw->rkey) == IBV_WC_SUCCESS);
  CHECK(memcmp(dst.bytes.data() + 4096 + 512, src.bytes.data(), 256) == 0);
  CHECK(ibv_dereg_mr(dst.mr) == EBUSY);  // a window is bound to it

  // Zero length unbinds (type 1's invalidation); the new rkey grants nothing.
  bind.bind_info.length = 0;
  bind.bind_info.mw_access_flags = 0;
  REQUIRE(ibv_bind_mw(r.b, mw, &bind) == 0);
  CHECK(one_wc(r.cq_b).status == IBV_WC_SUCCESS);
  CHECK(write_through(r, src, dst, 4096, mw->rkey) == IBV_WC_REM_ACCESS_ERR);
  CHECK(ibv_dealloc_mw(mw) == 0);
}

TEST_CASE("memory windows: type 2 bound by a work request, invalidated by LOCAL_INV", "[mw]") {
  Pair r;
  Buffer src(r.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
  Buffer dst(r.pd, 8192, kBindable);
  for (size_t i = 0; i < 256; ++i) src.bytes[i] = static_cast<uint8_t>(i * 5 + 2);
  ibv_mw* mw = ibv_alloc_mw(r.pd, IBV_MW_TYPE_2);
  REQUIRE(mw != nullptr);
  ibv_send_wr wr{};
  wr.wr_id = 66;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info.mr = dst.mr;
  wr.bind_mw.bind_info.addr = dst.addr();
  wr.bind_mw.bind_info.length = 2048;
  wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  ibv_send_wr* bad = nullptr;
  REQUIRE(ibv_post_send(r.b, &wr, &bad) == 0);
  ibv_wc wc = one_wc(r.cq_b);
  CHECK(wc.status == IBV_WC_SUCCESS);
  CHECK(wc.opcode == IBV_WC_BIND_MW);
  const uint32_t rkey = wr.bind_mw.rkey;
  CHECK(write_through(r, src, dst, 1024, rkey) == IBV_WC_SUCCESS);
  CHECK(memcmp(dst.bytes.data() + 1024, src.bytes.data(), 256) == 0);

  SECTION("LOCAL_INV, then the rkey is refused") {
    ibv_send_wr inv{};
    inv.wr_id = 67;
    inv.opcode = IBV_WR_LOCAL_INV;
    inv.send_flags = IBV_SEND_SIGNALED;
    inv.invalidate_rkey = rkey;
    REQUIRE(ibv_post_send(r.b, &inv, &bad) == 0);
    wc = one_wc(r.cq_b);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_LOCAL_INV);
    CHECK(ibv_dereg_mr(dst.mr) == 0);  // nothing bound any more
    dst.mr = nullptr;
    CHECK(write_through(r, src, dst, 1024, rkey) == IBV_WC_REM_ACCESS_ERR);
    CHECK(ibv_dealloc_mw(mw) == 0);
  }
  SECTION("dealloc of the bound window, then the rkey is refused") {
    CHECK(ibv_dealloc_mw(mw) == 0);
    CHECK(write_through(r, src, dst, 1024, rkey) == IBV_WC_REM_ACCESS_ERR);
  }
}
