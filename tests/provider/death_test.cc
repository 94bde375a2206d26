// The daemon dies under a running application (run_with_sroced.sh passes its pid): the app
// must see IBV_EVENT_DEVICE_FATAL and flush completions for all outstanding work, its event
// channel must not leave it blocked, control verbs fail with EIO, and tearing down succeeds.
#include <errno.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <set>

#include "verbs_util.h"

using namespace sroce::test;

TEST_CASE("daemon death: DEVICE_FATAL, flush completions, no hang", "[death]") {
  const char* pid_env = getenv("SROCE_TEST_DAEMON_PID");
  REQUIRE(pid_env != nullptr);
  const pid_t daemon = static_cast<pid_t>(atoi(pid_env));
  REQUIRE(daemon > 0);

  ibv_context* ctx = open_sroce();
  REQUIRE(ctx != nullptr);
  ibv_gid gid{};
  REQUIRE(ibv_query_gid(ctx, 1, 0, &gid) == 0);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  REQUIRE(ch != nullptr);
  ibv_cq* cq = ibv_create_cq(ctx, 64, nullptr, ch, 0);
  REQUIRE(cq != nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = init.cap.max_recv_wr = 8;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  ibv_qp* a = ibv_create_qp(pd, &init);
  ibv_qp* b = ibv_create_qp(pd, &init);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  connect_qp(a, b->qp_num, gid);
  connect_qp(b, a->qp_num, gid);
  Buffer buf(pd, 4096, kAllAccess);

  // Outstanding work that nothing will complete: receives at A (nobody sends to A) and sends
  // from A that B has no receives for (RNR, retried forever).
  std::set<uint64_t> outstanding;
  for (uint64_t i = 0; i < 3; ++i) {
    ibv_sge sge{buf.addr(), 64, buf.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = 100 + i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    REQUIRE(ibv_post_recv(a, &wr, &bad) == 0);
    outstanding.insert(100 + i);
  }
  for (uint64_t i = 0; i < 4; ++i) {
    ibv_sge sge{buf.addr(), 32, buf.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 200 + i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = i == 3 ? IBV_SEND_SIGNALED : 0;  // unsignaled ones are flushed too
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(a, &wr, &bad) == 0);
    outstanding.insert(200 + i);
  }
  REQUIRE(ibv_req_notify_cq(cq, 0) == 0);
  CHECK(poll_n(cq, 1, 300).empty());

  REQUIRE(kill(daemon, SIGKILL) == 0);

  // The async event arrives within seconds.
  REQUIRE(readable(ctx->async_fd, 5000));
  ibv_async_event ev{};
  REQUIRE(ibv_get_async_event(ctx, &ev) == 0);
  CHECK(ev.event_type == IBV_EVENT_DEVICE_FATAL);
  ibv_ack_async_event(&ev);

  // Every outstanding WR completes as flushed, each exactly once.
  auto wc = poll_n(cq, outstanding.size(), 5000);
  CHECK(wc.size() == outstanding.size());
  for (const ibv_wc& w : wc) {
    CHECK(w.status == IBV_WC_WR_FLUSH_ERR);
    CHECK(w.qp_num == a->qp_num);
    CHECK(outstanding.erase(w.wr_id) == 1);
  }
  CHECK(outstanding.empty());
  CHECK(poll_n(cq, 1, 100).empty());

  // A thread blocked on the channel is released (end of file), not left hanging.
  REQUIRE(readable(ch->fd, 5000));
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == -1);

  // New control work fails; posting still queues (and flushes).
  errno = 0;
  CHECK(ibv_alloc_pd(ctx) == nullptr);
  CHECK(errno == EIO);
  ibv_port_attr port{};
  CHECK(ibv_query_port(ctx, 1, &port) == EIO);
  {
    ibv_sge sge{buf.addr(), 8, buf.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 300;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(a, &wr, &bad) == 0);
    auto late = poll_n(cq, 1, 2000);
    REQUIRE(late.size() == 1);
    CHECK(late[0].wr_id == 300);
    CHECK(late[0].status == IBV_WC_WR_FLUSH_ERR);
  }

  // Teardown works without a daemon.
  CHECK(ibv_destroy_qp(a) == 0);
  CHECK(ibv_destroy_qp(b) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_destroy_comp_channel(ch) == 0);
  CHECK(ibv_dereg_mr(buf.mr) == 0);
  buf.mr = nullptr;
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
}
