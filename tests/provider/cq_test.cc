// Completion timestamps and ibv_resize_cq through libibverbs and libsroce against a live
// sroced (run_with_sroced.sh runs it under sroce-run; both QPs of the pair live in this
// process). See docs/provider.md, "Completion timestamps" and "ibv_resize_cq".
#include <errno.h>
#include <infiniband/verbs.h>
#include <time.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "verbs_util.h"

using namespace sroce::test;

namespace {

uint64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

struct Stamp {
  uint64_t wr_id;
  ibv_wc_status status;
  ibv_wc_opcode opcode;
  uint64_t ts, wall;
};

// Polls `cq` with the extended API until `want` completions arrived (10 s at most).
std::vector<Stamp> poll_ex(ibv_cq_ex* cq, size_t want) {
  std::vector<Stamp> out;
  const int64_t deadline = now_ms() + 10000;
  while (out.size() < want && now_ms() < deadline) {
    ibv_poll_cq_attr attr{};
    if (ibv_start_poll(cq, &attr) != 0) continue;
    do {
      out.push_back({cq->wr_id, cq->status, ibv_wc_read_opcode(cq), ibv_wc_read_completion_ts(cq),
                     ibv_wc_read_completion_wallclock_ns(cq)});
    } while (ibv_next_poll(cq) == 0);
    ibv_end_poll(cq);
  }
  return out;
}

// Two connected RC QPs on the context of `p`, both completing into `cq`.
struct QpPair {
  Pair& p;
  ibv_qp* a;
  ibv_qp* b;
  QpPair(Pair& pair, ibv_cq* cq, uint32_t depth = 16)
      : p(pair), a(pair.make_qp(IBV_QPT_RC, cq, depth)), b(pair.make_qp(IBV_QPT_RC, cq, depth)) {
    connect_qp(a, b->qp_num, p.gid);
    connect_qp(b, a->qp_num, p.gid);
  }
  ~QpPair() {
    ibv_destroy_qp(a);
    ibv_destroy_qp(b);
  }
};

}  // namespace

TEST_CASE("completion timestamps: device clock, rt values, CQE stamps", "[timestamp]") {
  Pair p;
  ibv_device_attr_ex dev{};
  REQUIRE(ibv_query_device_ex(p.ctx, nullptr, &dev) == 0);
  CHECK(dev.hca_core_clock == 1000000);  // kHz: one tick a nanosecond
  CHECK(dev.completion_timestamp_mask == ~uint64_t{0});

  // The device clock now lies between two readings of CLOCK_MONOTONIC around the query.
  ibv_values_ex v{};
  v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  const uint64_t before = clock_ns(CLOCK_MONOTONIC);
  REQUIRE(ibv_query_rt_values_ex(p.ctx, &v) == 0);
  const uint64_t after = clock_ns(CLOCK_MONOTONIC);
  CHECK(v.comp_mask == IBV_VALUES_MASK_RAW_CLOCK);
  CHECK(v.raw_clock.tv_sec == 0);
  CHECK(uint64_t(v.raw_clock.tv_nsec) >= before);
  CHECK(uint64_t(v.raw_clock.tv_nsec) <= after);
  v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK | (1u << 5);  // an unknown bit
  CHECK(ibv_query_rt_values_ex(p.ctx, &v) == EINVAL);

  // Not every extended flag: CVLAN stays unsupported.
  ibv_cq_init_attr_ex bad{};
  bad.cqe = 8;
  bad.wc_flags = IBV_WC_EX_WITH_CVLAN;
  errno = 0;
  CHECK(ibv_create_cq_ex(p.ctx, &bad) == nullptr);
  CHECK(errno == EOPNOTSUPP);

  ibv_cq_init_attr_ex ia{};
  ia.cqe = 32;
  ia.wc_flags = uint64_t{IBV_WC_STANDARD_FLAGS} | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
  ibv_cq_ex* cq = ibv_create_cq_ex(p.ctx, &ia);
  REQUIRE(cq != nullptr);
  REQUIRE(cq->read_completion_ts != nullptr);
  REQUIRE(cq->read_completion_wallclock_ns != nullptr);
  {
    QpPair q(p, ibv_cq_ex_to_cq(cq));
    Buffer src(p.pd, 256, kAllAccess), dst(p.pd, 256, kAllAccess);
    uint64_t prev = 0;
    for (int round = 0; round < 3; ++round) {
      const uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
      const uint64_t w0 = clock_ns(CLOCK_REALTIME);
      REQUIRE(post_recv(q.b, dst, 256, 100 + round) == 0);
      REQUIRE(post_send(q.a, IBV_WR_SEND, src, 64, 200 + round) == 0);
      auto got = poll_ex(cq, 2);
      const uint64_t t1 = clock_ns(CLOCK_MONOTONIC);
      const uint64_t w1 = clock_ns(CLOCK_REALTIME);
      REQUIRE(got.size() == 2);
      const Stamp* rx = nullptr;
      const Stamp* tx = nullptr;
      for (const Stamp& s : got) {
        CHECK(s.status == IBV_WC_SUCCESS);
        (s.opcode == IBV_WC_RECV ? rx : tx) = &s;
      }
      REQUIRE(rx != nullptr);
      REQUIRE(tx != nullptr);
      CHECK(rx->wr_id == uint64_t(100 + round));
      CHECK(tx->wr_id == uint64_t(200 + round));
      // Stamped by the daemon while the work completed: inside this round, on its clock.
      CHECK(rx->ts >= t0);
      CHECK(tx->ts <= t1);
      // The receive completes when the SEND arrives, the send when its ACK does.
      CHECK(rx->ts <= tx->ts);
      CHECK(rx->ts > prev);
      prev = tx->ts;
      // The wall clock is the same instant on CLOCK_REALTIME (1 ms of slack for a clock step).
      CHECK(tx->wall + 1000000 >= w0);
      CHECK(tx->wall <= w1 + 1000000);
      // Each read converts with the clocks' difference of that moment: equal to within
      // the reads' own jitter.
      const int64_t skew = int64_t(tx->wall - rx->wall) - int64_t(tx->ts - rx->ts);
      CHECK(skew < 100000);
      CHECK(skew > -100000);
    }
  }
  CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == 0);
}

TEST_CASE("ibv_resize_cq: grows and shrinks without losing completions", "[resize]") {
  Pair p;
  ibv_cq* cq = ibv_create_cq(p.ctx, 3, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  {
    QpPair q(p, cq, 32);
    Buffer src(p.pd, 64, kAllAccess), dst(p.pd, 64, kAllAccess);
    ibv_device_attr dev{};
    REQUIRE(ibv_query_device(p.ctx, &dev) == 0);

    REQUIRE(ibv_resize_cq(cq, 1) == 0);
    CHECK(cq->cqe >= 1);
    REQUIRE(ibv_resize_cq(cq, 7) == 0);
    CHECK(cq->cqe >= 7);
    CHECK(ibv_resize_cq(cq, 0) == EINVAL);
    CHECK(ibv_resize_cq(cq, dev.max_cqe + 1) == EINVAL);

    // RDMA WRITEs into dst: one completion each, on the sender's side only.
    auto write = [&](uint64_t id) {
      REQUIRE(post_send(q.a, IBV_WR_RDMA_WRITE, src, 8, id, dst.addr(), dst.mr->rkey) == 0);
    };
    auto settle = [] {
      timespec ts{0, 200 * 1000 * 1000};  // completions reach the ring meanwhile
      nanosleep(&ts, nullptr);
    };
    const int n = cq->cqe - 1;
    for (int i = 0; i < n; ++i) write(1000 + i);
    // Below what the CQ owes: refused, and nothing is lost.
    CHECK(ibv_resize_cq(cq, 1) == EINVAL);
    settle();
    CHECK(ibv_resize_cq(cq, n - 1) == EINVAL);
    // Grow while they wait in the ring: all of them, in order, from the new ring.
    REQUIRE(ibv_resize_cq(cq, 64) == 0);
    CHECK(cq->cqe >= 64);
    auto got = poll_n(cq, size_t(n));
    REQUIRE(got.size() == size_t(n));
    for (int i = 0; i < n; ++i) {
      CHECK(got[i].wr_id == uint64_t(1000 + i));
      CHECK(got[i].status == IBV_WC_SUCCESS);
    }
    // Shrink to exactly what it holds: kept, in order; then the new size is used.
    for (int i = 0; i < 3; ++i) write(2000 + i);
    settle();
    REQUIRE(ibv_resize_cq(cq, 3) == 0);
    CHECK(cq->cqe >= 3);
    CHECK(cq->cqe < 64);
    got = poll_n(cq, 3);
    REQUIRE(got.size() == 3);
    for (int i = 0; i < 3; ++i) CHECK(got[i].wr_id == uint64_t(2000 + i));
    // Traffic after the resize still flows through the new ring.
    for (int i = 0; i < 3; ++i) write(3000 + i);
    got = poll_n(cq, 3);
    REQUIRE(got.size() == 3);
    for (int i = 0; i < 3; ++i) CHECK(got[i].wr_id == uint64_t(3000 + i));
    CHECK(poll_n(cq, 1, 100).empty());
  }
  CHECK(ibv_destroy_cq(cq) == 0);
}

TEST_CASE("ibv_resize_cq: an armed CQ stays armed", "[resize]") {
  Pair p;
  ibv_comp_channel* ch = ibv_create_comp_channel(p.ctx);
  REQUIRE(ch != nullptr);
  ibv_cq* cq = ibv_create_cq(p.ctx, 4, nullptr, ch, 0);
  REQUIRE(cq != nullptr);
  {
    QpPair q(p, cq);
    Buffer src(p.pd, 64, kAllAccess), dst(p.pd, 64, kAllAccess);
    REQUIRE(ibv_req_notify_cq(cq, 0) == 0);
    REQUIRE(ibv_resize_cq(cq, 16) == 0);
    CHECK_FALSE(readable(ch->fd, 100));
    REQUIRE(post_send(q.a, IBV_WR_RDMA_WRITE, src, 8, 5, dst.addr(), dst.mr->rkey) == 0);
    REQUIRE(readable(ch->fd, 10000));
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    REQUIRE(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0);
    CHECK(ev_cq == cq);
    ibv_ack_cq_events(cq, 1);
    auto got = poll_n(cq, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].wr_id == 5);
  }
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_destroy_comp_channel(ch) == 0);
}
