// ibv_rereg_mr through libibverbs and libsroce against a live sroced (run_with_sroced.sh runs
// it under sroce-run; both QPs of the pair live in this process). What a verbs user observes:
// the keys stay, the new rights, range and PD apply to the next operation, libibverbs' own
// return codes and errno for bad requests, and a failed rereg leaves the MR as it was.
#include <errno.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "verbs_util.h"

using namespace sroce::test;

namespace {

constexpr int kLwRw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

// One signaled work request from `qp` (one SGE of `len` bytes at `src`); returns its status.
ibv_wc_status post_one(ibv_qp* qp, ibv_cq* cq, ibv_wr_opcode op, const Buffer& src, uint32_t len,
                       uint64_t remote_addr = 0, uint32_t rkey = 0) {
  REQUIRE(post_send(qp, op, src, len, 7, remote_addr, rkey) == 0);
  // One completion at a time: whatever follows (a flush) stays in the CQ.
  ibv_wc wc{};
  const int64_t deadline = now_ms() + 10000;
  int n = 0;
  while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && now_ms() < deadline) {
  }
  REQUIRE(n == 1);
  CHECK(wc.wr_id == 7);
  return wc.status;
}

void fill(Buffer& b, uint8_t seed) {
  for (size_t i = 0; i < b.bytes.size(); ++i) b.bytes[i] = static_cast<uint8_t>(seed + i * 7);
}

}  // namespace

TEST_CASE("ibv_rereg_mr: access, translation and PD change; keys stay", "[rereg]") {
  Pair r(IBV_QPT_RC, 8);
  Buffer src(r.pd, 4096, kLwRw);
  Buffer dst(r.pd, 8192, kLwRw);
  const uint32_t lkey = dst.mr->lkey, rkey = dst.mr->rkey;
  fill(src, 1);
  REQUIRE(post_one(r.a, r.cq_a, IBV_WR_RDMA_WRITE, src, 512, dst.addr(), rkey) == IBV_WC_SUCCESS);
  CHECK(memcmp(dst.bytes.data(), src.bytes.data(), 512) == 0);

  SECTION("without REMOTE_WRITE the same rkey is refused; with it again, accepted") {
    REQUIRE(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE) == 0);
    CHECK(dst.mr->lkey == lkey);
    CHECK(dst.mr->rkey == rkey);
    fill(src, 2);
    CHECK(post_one(r.a, r.cq_a, IBV_WR_RDMA_WRITE, src, 512, dst.addr(), rkey) ==
          IBV_WC_REM_ACCESS_ERR);
    CHECK(memcmp(dst.bytes.data(), src.bytes.data(), 512) != 0);  // nothing landed
  }
  SECTION("REMOTE_READ added by rereg lets the peer read") {
    REQUIRE(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         kLwRw | IBV_ACCESS_REMOTE_READ) == 0);
    memset(src.bytes.data(), 0, 256);
    CHECK(post_one(r.a, r.cq_a, IBV_WR_RDMA_READ, src, 256, dst.addr(), rkey) == IBV_WC_SUCCESS);
    CHECK(memcmp(dst.bytes.data(), src.bytes.data(), 256) == 0);
  }
  SECTION("a new range: writes land there with the same rkey, the old range is refused") {
    Buffer moved(r.pd, 4096, IBV_ACCESS_LOCAL_WRITE);  // just memory the process has
    REQUIRE(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, moved.bytes.data(), 4096,
                         0) == 0);
    CHECK(dst.mr->addr == moved.bytes.data());
    CHECK(dst.mr->length == 4096);
    CHECK(dst.mr->rkey == rkey);
    fill(src, 3);
    CHECK(post_one(r.a, r.cq_a, IBV_WR_RDMA_WRITE, src, 512, moved.addr() + 1024, rkey) ==
          IBV_WC_SUCCESS);
    CHECK(memcmp(moved.bytes.data() + 1024, src.bytes.data(), 512) == 0);
    CHECK(post_one(r.a, r.cq_a, IBV_WR_RDMA_WRITE, src, 512, dst.addr() + 4096, rkey) ==
          IBV_WC_REM_ACCESS_ERR);
    // Deregistered while moved: Buffer's destructor deregisters dst.mr, then moved's MR.
  }
  SECTION("another PD: a receive through it fails, the sender sees a remote operation error") {
    ibv_pd* pd2 = ibv_alloc_pd(r.ctx);
    REQUIRE(pd2 != nullptr);
    REQUIRE(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_PD, pd2, nullptr, 0, 0) == 0);
    CHECK(dst.mr->pd == pd2);
    CHECK(ibv_dealloc_pd(pd2) == EBUSY);  // the MR holds it now
    ibv_sge sge{dst.addr(), 512, dst.mr->lkey};
    ibv_recv_wr rwr{};
    rwr.wr_id = 9;
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    REQUIRE(ibv_post_recv(r.b, &rwr, &bad) == 0);
    // A receive on the sender too, left to be flushed when its QP fails.
    ibv_sge asge{src.addr(), 64, src.mr->lkey};
    ibv_recv_wr awr{};
    awr.wr_id = 11;
    awr.sg_list = &asge;
    awr.num_sge = 1;
    REQUIRE(ibv_post_recv(r.a, &awr, &bad) == 0);
    CHECK(post_one(r.a, r.cq_a, IBV_WR_SEND, src, 64) == IBV_WC_REM_OP_ERR);
    auto wb = poll_n(r.cq_b, 1);
    REQUIRE(wb.size() == 1);
    CHECK(wb[0].wr_id == 9);
    CHECK(wb[0].status == IBV_WC_LOC_PROT_ERR);
    // Back to the first PD: the second one can go.
    REQUIRE(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_PD, r.pd, nullptr, 0, 0) == 0);
    CHECK(ibv_dealloc_pd(pd2) == 0);

    // Restate both QPs as rdma-core's tests do (RESET, then INIT..RTS): the flush of a's
    // receive is not reported after the reset (mlx5 cleans the CQ there too), and the MR
    // works again through the same keys.
    for (ibv_qp* q : {r.a, r.b}) {
      ibv_qp_attr ra{};
      ra.qp_state = IBV_QPS_RESET;
      REQUIRE(ibv_modify_qp(q, &ra, IBV_QP_STATE) == 0);
    }
    CHECK(poll_n(r.cq_a, 1, 200).empty());
    CHECK(poll_n(r.cq_b, 1, 200).empty());
    ibv_gid gid{};
    REQUIRE(ibv_query_gid(r.ctx, 1, 0, &gid) == 0);
    connect_qp(r.a, r.b->qp_num, gid);
    connect_qp(r.b, r.a->qp_num, gid);
    rwr.wr_id = 13;
    REQUIRE(ibv_post_recv(r.b, &rwr, &bad) == 0);
    fill(src, 4);
    CHECK(post_one(r.a, r.cq_a, IBV_WR_SEND, src, 64) == IBV_WC_SUCCESS);
    wb = poll_n(r.cq_b, 1);
    REQUIRE(wb.size() == 1);
    CHECK(wb[0].wr_id == 13);
    CHECK(wb[0].status == IBV_WC_SUCCESS);
    CHECK(memcmp(dst.bytes.data(), src.bytes.data(), 64) == 0);
  }
}

TEST_CASE("ibv_rereg_mr: bad requests fail with the usual errno and change nothing", "[rereg]") {
  Pair r(IBV_QPT_RC, 8);
  Buffer src(r.pd, 4096, kLwRw);
  Buffer dst(r.pd, 4096, kLwRw);
  ibv_mr* mr = dst.mr;
  const uint32_t lkey = mr->lkey, rkey = mr->rkey;
  void* const addr = mr->addr;

  // libibverbs itself: unknown flag bits, a translation without memory, memory without one.
  errno = 0;
  CHECK(ibv_rereg_mr(mr, 1 << 6, nullptr, nullptr, 0, 0) == IBV_REREG_MR_ERR_INPUT);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 0, 0) ==
        IBV_REREG_MR_ERR_INPUT);
  CHECK(errno == EINVAL);
  // The provider and the daemon: no change asked, like the kernel's uverbs.
  errno = 0;
  CHECK(ibv_rereg_mr(mr, 0, nullptr, nullptr, 0, 0) == IBV_REREG_MR_ERR_CMD);
  CHECK(errno == EINVAL);
  // IBA 10.6: remote write needs local write (refused before the daemon is asked).
  errno = 0;
  CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                     IBV_ACCESS_REMOTE_WRITE) == IBV_REREG_MR_ERR_CMD);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, nullptr, nullptr, 0, 0) == IBV_REREG_MR_ERR_CMD);
  CHECK(errno == EINVAL);
  // Memory the process does not have: EFAULT, as ibv_reg_mr. The valid access change asked
  // with it must not be applied either.
  const size_t page = 4096;
  void* gone = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(gone != MAP_FAILED);
  REQUIRE(munmap(gone, 2 * page) == 0);
  errno = 0;
  CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS, nullptr,
                     gone, 2 * page, IBV_ACCESS_LOCAL_WRITE) == IBV_REREG_MR_ERR_CMD);
  CHECK(errno == EFAULT);

  // The MR is as it was: same keys, range and rights; a remote write still lands.
  CHECK(mr->lkey == lkey);
  CHECK(mr->rkey == rkey);
  CHECK(mr->addr == addr);
  CHECK(mr->length == 4096);
  fill(src, 9);
  CHECK(post_one(r.a, r.cq_a, IBV_WR_RDMA_WRITE, src, 1024, dst.addr() + 2048, rkey) ==
        IBV_WC_SUCCESS);
  CHECK(memcmp(dst.bytes.data() + 2048, src.bytes.data(), 1024) == 0);
}
