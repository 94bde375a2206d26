// libsroce through libibverbs' public API against a live sroced (loopback: both QPs of a pair
// live in this process). Run by run_with_sroced.sh under sroce-run. What a verbs user can
// observe: device/port/GID queries, errno values, traffic with data checks, completion
// channels, the extended CQ and QP APIs, SRQ, UD with address handles.
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "verbs_util.h"

using namespace sroce::test;

TEST_CASE("device, port and GID queries", "[device]") {
  ibv_context* ctx = open_sroce();
  REQUIRE(ctx != nullptr);
  ibv_device_attr dev{};
  REQUIRE(ibv_query_device(ctx, &dev) == 0);
  CHECK(dev.phys_port_cnt == 1);
  CHECK(dev.max_qp > 0);
  CHECK(dev.max_cqe > 0);
  CHECK(dev.node_guid != 0);
  ibv_device_attr_ex ex{};
  REQUIRE(ibv_query_device_ex(ctx, nullptr, &ex) == 0);
  CHECK(ex.orig_attr.max_qp == dev.max_qp);
  CHECK(ex.phys_port_cnt_ex == 1);
  ibv_port_attr port{};
  REQUIRE(ibv_query_port(ctx, 1, &port) == 0);
  CHECK(port.state == IBV_PORT_ACTIVE);
  CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
  CHECK(port.gid_tbl_len >= 1);
  CHECK(ibv_query_port(ctx, 2, &port) == EINVAL);
  // GID 0 is the IPv4-mapped loopback address the daemon serves, typed RoCE v2.
  ibv_gid gid{};
  REQUIRE(ibv_query_gid(ctx, 1, 0, &gid) == 0);
  const uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  CHECK(memcmp(gid.raw, want, 16) == 0);
  ibv_gid_entry entry{};
  REQUIRE(ibv_query_gid_ex(ctx, 1, 0, &entry, 0) == 0);
  CHECK(entry.gid_type == IBV_GID_TYPE_ROCE_V2);
  CHECK(entry.ndev_ifindex != 0);
  CHECK(ctx->num_comp_vectors == 1);
  CHECK(ctx->async_fd >= 0);
  CHECK(ibv_close_device(ctx) == 0);
}

TEST_CASE("memory registration follows the IBA access rules", "[mr]") {
  ibv_context* ctx = open_sroce();
  REQUIRE(ctx != nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  REQUIRE(pd != nullptr);
  std::vector<uint8_t> mem(8192);
  // IBA 10.6: remote write / remote atomic need local write.
  errno = 0;
  CHECK(ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_REMOTE_WRITE) == nullptr);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_REMOTE_ATOMIC) == nullptr);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND) ==
        nullptr);
  CHECK(errno == EOPNOTSUPP);
  ibv_mr* r = ibv_reg_mr(pd, mem.data(), 4096, IBV_ACCESS_REMOTE_READ);
  REQUIRE(r != nullptr);
  ibv_mr* w = ibv_reg_mr(pd, mem.data() + 4096, 4096, kAllAccess);
  REQUIRE(w != nullptr);
  CHECK(r->lkey != w->lkey);
  CHECK(r->rkey != w->rkey);
  CHECK(r->addr == mem.data());
  CHECK(r->length == 4096);
  // Reregistration: bad access is refused locally; otherwise the daemon changes the MR in
  // place and keeps its keys (the full story is in rereg_test.cc).
  const uint32_t old_lkey = r->lkey, old_rkey = r->rkey;
  errno = 0;
  CHECK(ibv_rereg_mr(r, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_REMOTE_WRITE) ==
        IBV_REREG_MR_ERR_CMD);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_rereg_mr(r, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kAllAccess) == 0);
  CHECK(r->lkey == old_lkey);
  CHECK(r->rkey == old_rkey);
  // A PD with MRs cannot go (IBA 11.2: resources still associated).
  CHECK(ibv_dealloc_pd(pd) == EBUSY);
  CHECK(ibv_dereg_mr(r) == 0);
  CHECK(ibv_dereg_mr(w) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  ibv_close_device(ctx);
}

TEST_CASE("CQ and QP creation limits and errno", "[create]") {
  ibv_context* ctx = open_sroce();
  REQUIRE(ctx != nullptr);
  ibv_device_attr dev{};
  REQUIRE(ibv_query_device(ctx, &dev) == 0);
  errno = 0;
  CHECK(ibv_create_cq(ctx, 0, nullptr, nullptr, 0) == nullptr);
  CHECK(errno == EINVAL);
  CHECK(ibv_create_cq(ctx, dev.max_cqe + 1, nullptr, nullptr, 0) == nullptr);
  CHECK(ibv_create_cq(ctx, 8, nullptr, nullptr, 1) == nullptr);  // one completion vector
  ibv_cq* cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  CHECK(cq->cqe >= 8);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  REQUIRE(pd != nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.cap.max_send_wr = 4;
  init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.qp_type = IBV_QPT_RAW_PACKET;
  errno = 0;
  CHECK(ibv_create_qp(pd, &init) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_sge = dev.max_sge + 1;
  errno = 0;
  CHECK(ibv_create_qp(pd, &init) == nullptr);
  CHECK(errno == EINVAL);
  init.cap.max_send_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &init);
  REQUIRE(qp != nullptr);
  CHECK(qp->state == IBV_QPS_RESET);
  CHECK(qp->qp_num != 0);
  CHECK(init.cap.max_send_wr >= 4);
  // IBA 10.8: nothing may be posted to a QP in Reset.
  std::vector<uint8_t> mem(64);
  ibv_mr* mr = ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);
  ibv_sge sge{reinterpret_cast<uintptr_t>(mem.data()), 64, mr->lkey};
  ibv_send_wr swr{};
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  ibv_send_wr* sbad = nullptr;
  CHECK(ibv_post_send(qp, &swr, &sbad) == EINVAL);
  CHECK(sbad == &swr);
  ibv_recv_wr rwr{};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  CHECK(ibv_post_recv(qp, &rwr, &rbad) == EINVAL);
  // A CQ in use by a QP cannot be destroyed.
  CHECK(ibv_destroy_cq(cq) == EBUSY);
  ibv_qp_attr attr{};
  ibv_qp_init_attr got{};
  REQUIRE(ibv_query_qp(qp, &attr, IBV_QP_STATE | IBV_QP_CAP, &got) == 0);
  CHECK(attr.qp_state == IBV_QPS_RESET);
  CHECK(got.qp_type == IBV_QPT_RC);
  CHECK(got.send_cq == cq);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  ibv_close_device(ctx);
}

TEST_CASE("RC send, RDMA write/read and atomics carry the right bytes", "[rc]") {
  Pair p;
  Buffer src(p.pd, 4096, kAllAccess);
  Buffer dst(p.pd, 4096, kAllAccess);
  for (size_t i = 0; i < src.bytes.size(); ++i) src.bytes[i] = static_cast<uint8_t>(i * 7 + 3);

  REQUIRE(post_recv(p.b, dst, 4096, 11) == 0);
  REQUIRE(post_send(p.a, IBV_WR_SEND, src, 3000, 21) == 0);
  auto wa = poll_n(p.cq_a, 1);
  auto wb = poll_n(p.cq_b, 1);
  REQUIRE(wa.size() == 1);
  REQUIRE(wb.size() == 1);
  CHECK(wa[0].status == IBV_WC_SUCCESS);
  CHECK(wa[0].opcode == IBV_WC_SEND);
  CHECK(wa[0].wr_id == 21);
  CHECK(wb[0].status == IBV_WC_SUCCESS);
  CHECK(wb[0].opcode == IBV_WC_RECV);
  CHECK(wb[0].wr_id == 11);
  CHECK(wb[0].byte_len == 3000);
  CHECK(wb[0].qp_num == p.b->qp_num);
  CHECK(memcmp(src.bytes.data(), dst.bytes.data(), 3000) == 0);

  // RDMA write with immediate: data lands, the receiver sees the immediate in network order.
  std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
  REQUIRE(post_recv(p.b, dst, 0, 12) == 0);
  {
    ibv_sge sge{src.addr(), 1024, src.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 22;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(0xabcd1234);
    wr.wr.rdma.remote_addr = dst.addr() + 512;
    wr.wr.rdma.rkey = dst.mr->rkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(p.a, &wr, &bad) == 0);
  }
  wa = poll_n(p.cq_a, 1);
  wb = poll_n(p.cq_b, 1);
  REQUIRE(wa.size() == 1);
  REQUIRE(wb.size() == 1);
  CHECK(wa[0].opcode == IBV_WC_RDMA_WRITE);
  CHECK(wb[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM);
  CHECK((wb[0].wc_flags & IBV_WC_WITH_IMM) != 0);
  CHECK(ntohl(wb[0].imm_data) == 0xabcd1234);
  CHECK(memcmp(src.bytes.data(), dst.bytes.data() + 512, 1024) == 0);

  // RDMA read back into a fresh buffer.
  Buffer back(p.pd, 4096, kAllAccess);
  REQUIRE(post_send(p.a, IBV_WR_RDMA_READ, back, 1024, 23, dst.addr() + 512, dst.mr->rkey) == 0);
  wa = poll_n(p.cq_a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == IBV_WC_SUCCESS);
  CHECK(wa[0].opcode == IBV_WC_RDMA_READ);
  CHECK(memcmp(back.bytes.data(), src.bytes.data(), 1024) == 0);

  // Atomics on an 8-byte aligned word: fetch-and-add, then compare-and-swap.
  uint64_t word = 40;
  memcpy(dst.bytes.data() + 64, &word, 8);
  {
    ibv_sge sge{back.addr(), 8, back.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 24;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = dst.addr() + 64;
    wr.wr.atomic.rkey = dst.mr->rkey;
    wr.wr.atomic.compare_add = 2;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(p.a, &wr, &bad) == 0);
    wa = poll_n(p.cq_a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].opcode == IBV_WC_FETCH_ADD);
    uint64_t old = 0;
    memcpy(&old, back.bytes.data(), 8);
    CHECK(old == 40);
    wr.wr_id = 25;
    wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.wr.atomic.compare_add = 42;
    wr.wr.atomic.swap = 7;
    REQUIRE(ibv_post_send(p.a, &wr, &bad) == 0);
    wa = poll_n(p.cq_a, 1);
    REQUIRE(wa.size() == 1);
    CHECK(wa[0].opcode == IBV_WC_COMP_SWAP);
    memcpy(&word, dst.bytes.data() + 64, 8);
    CHECK(word == 7);
  }

  // Inline send: the buffer may change right after post returns.
  REQUIRE(post_recv(p.b, dst, 64, 13) == 0);
  memset(src.bytes.data(), 0x5a, 32);
  REQUIRE(post_send(p.a, IBV_WR_SEND, src, 32, 26, 0, 0, IBV_SEND_SIGNALED | IBV_SEND_INLINE) == 0);
  memset(src.bytes.data(), 0, 32);
  wb = poll_n(p.cq_b, 1);
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].byte_len == 32);
  CHECK(dst.bytes[0] == 0x5a);
  CHECK(dst.bytes[31] == 0x5a);
  CHECK(poll_n(p.cq_a, 1).size() == 1);
}

TEST_CASE("a bad rkey fails the WR and flushes the rest", "[rc][errors]") {
  Pair p;
  Buffer src(p.pd, 256, kAllAccess);
  Buffer dst(p.pd, 256, IBV_ACCESS_LOCAL_WRITE);  // no remote access
  REQUIRE(post_send(p.a, IBV_WR_RDMA_WRITE, src, 64, 1, dst.addr(), dst.mr->rkey) == 0);
  REQUIRE(post_send(p.a, IBV_WR_RDMA_WRITE, src, 64, 2, dst.addr(), dst.mr->rkey) == 0);
  auto wc = poll_n(p.cq_a, 2);
  REQUIRE(wc.size() == 2);
  CHECK(wc[0].wr_id == 1);
  CHECK(wc[0].status == IBV_WC_REM_ACCESS_ERR);
  CHECK(wc[1].wr_id == 2);
  CHECK(wc[1].status == IBV_WC_WR_FLUSH_ERR);
}

TEST_CASE("the send queue holds max_send_wr outstanding requests", "[rc][queue]") {
  // No receives posted at B, infinite RNR retry: every send stays outstanding.
  Pair p(IBV_QPT_RC, 8);
  Buffer src(p.pd, 64, kAllAccess);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  REQUIRE(ibv_query_qp(p.a, &attr, IBV_QP_CAP, &init) == 0);
  uint32_t depth = attr.cap.max_send_wr;
  REQUIRE(depth >= 8);
  for (uint32_t i = 0; i < depth; ++i) REQUIRE(post_send(p.a, IBV_WR_SEND, src, 8, i) == 0);
  CHECK(post_send(p.a, IBV_WR_SEND, src, 8, 999) == ENOMEM);
  // Receives arrive: everything completes, in order, and the queue has room again.
  Buffer dst(p.pd, 64, kAllAccess);
  for (uint32_t i = 0; i < depth; ++i) REQUIRE(post_recv(p.b, dst, 64, i) == 0);
  auto wc = poll_n(p.cq_a, depth, 20000);
  REQUIRE(wc.size() == depth);
  for (uint32_t i = 0; i < depth; ++i) {
    CHECK(wc[i].wr_id == i);
    CHECK(wc[i].status == IBV_WC_SUCCESS);
  }
  CHECK(poll_n(p.cq_b, depth, 10000).size() == depth);
  CHECK(post_recv(p.b, dst, 64, 100) == 0);
  CHECK(post_send(p.a, IBV_WR_SEND, src, 8, 100) == 0);
  CHECK(poll_n(p.cq_a, 1).size() == 1);
}

TEST_CASE("completion channels deliver events for armed CQs", "[events]") {
  ibv_context* ctx = open_sroce();
  REQUIRE(ctx != nullptr);
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  REQUIRE(ch != nullptr);  // needs libsroce-shim (sroce-run preloads it)
  ibv_cq* cq = ibv_create_cq(ctx, 16, reinterpret_cast<void*>(0x1234), ch, 0);
  REQUIRE(cq != nullptr);
  CHECK(cq->channel == ch);
  CHECK(ibv_destroy_comp_channel(ch) == EBUSY);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_gid gid{};
  REQUIRE(ibv_query_gid(ctx, 1, 0, &gid) == 0);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  ibv_qp* a = ibv_create_qp(pd, &init);
  ibv_qp* b = ibv_create_qp(pd, &init);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  connect_qp(a, b->qp_num, gid);
  connect_qp(b, a->qp_num, gid);
  {
    Buffer buf(pd, 64, kAllAccess);
    // Not armed: a completion raises no event.
    REQUIRE(post_recv(b, buf, 64, 1) == 0);
    REQUIRE(post_send(a, IBV_WR_SEND, buf, 16, 2) == 0);
    CHECK(poll_n(cq, 2).size() == 2);
    CHECK_FALSE(readable(ch->fd, 200));
    // Armed: the next completion raises exactly one event naming our CQ.
    REQUIRE(ibv_req_notify_cq(cq, 0) == 0);
    REQUIRE(post_recv(b, buf, 64, 3) == 0);
    REQUIRE(post_send(a, IBV_WR_SEND, buf, 16, 4) == 0);
    REQUIRE(readable(ch->fd, 5000));
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    REQUIRE(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0);
    CHECK(ev_cq == cq);
    CHECK(ev_ctx == reinterpret_cast<void*>(0x1234));
    ibv_ack_cq_events(cq, 1);
    CHECK(poll_n(cq, 2).size() == 2);
    CHECK_FALSE(readable(ch->fd, 200));
    ibv_destroy_qp(a);
    ibv_destroy_qp(b);
  }
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_destroy_comp_channel(ch) == 0);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

TEST_CASE("extended CQ and QP: ibv_wr_* and ibv_start_poll", "[ex]") {
  ibv_context* ctx = open_sroce();
  REQUIRE(ctx != nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_gid gid{};
  REQUIRE(ibv_query_gid(ctx, 1, 0, &gid) == 0);
  ibv_cq_init_attr_ex cattr{};
  cattr.cqe = 16;
  cattr.wc_flags = IBV_WC_EX_WITH_CVLAN;  // timestamps are supported (provider_cq)
  errno = 0;
  CHECK(ibv_create_cq_ex(ctx, &cattr) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  cattr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_IMM;
  ibv_cq_ex* cqx = ibv_create_cq_ex(ctx, &cattr);
  REQUIRE(cqx != nullptr);
  ibv_cq* cq = ibv_cq_ex_to_cq(cqx);
  ibv_qp_init_attr_ex qattr{};
  qattr.qp_type = IBV_QPT_RC;
  qattr.send_cq = cq;
  qattr.recv_cq = cq;
  qattr.cap.max_send_wr = qattr.cap.max_recv_wr = 8;
  qattr.cap.max_send_sge = qattr.cap.max_recv_sge = 2;
  qattr.cap.max_inline_data = 32;
  qattr.pd = pd;
  qattr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qattr.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND;
  ibv_qp* a = ibv_create_qp_ex(ctx, &qattr);
  REQUIRE(a != nullptr);
  ibv_qp_ex* ax = ibv_qp_to_qp_ex(a);
  REQUIRE(ax != nullptr);
  qattr.comp_mask = IBV_QP_INIT_ATTR_PD;
  ibv_qp* b = ibv_create_qp_ex(ctx, &qattr);
  REQUIRE(b != nullptr);
  CHECK(ibv_qp_to_qp_ex(b) == nullptr);  // no send ops asked for
  connect_qp(a, b->qp_num, gid);
  connect_qp(b, a->qp_num, gid);
  {
    Buffer src(pd, 256, kAllAccess);
    Buffer dst(pd, 256, kAllAccess);
    for (int i = 0; i < 256; ++i) src.bytes[i] = static_cast<uint8_t>(255 - i);
    REQUIRE(post_recv(b, dst, 256, 9) == 0);
    ibv_wr_start(ax);
    ax->wr_id = 1;
    ax->wr_flags = 0;  // unsignaled: completes with the next signaled one
    ibv_wr_rdma_write(ax, dst.mr->rkey, dst.addr() + 128);
    ibv_wr_set_sge(ax, src.mr->lkey, src.addr(), 100);
    ax->wr_id = 2;
    ax->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(ax);
    ibv_wr_set_inline_data(ax, src.bytes.data() + 10, 20);
    REQUIRE(ibv_wr_complete(ax) == 0);

    // Two completions: the send at A and the receive at B, through the extended poller.
    std::vector<std::pair<uint64_t, uint32_t>> seen;  // wr_id, byte_len (recv)
    const int64_t deadline = now_ms() + 10000;
    while (seen.size() < 2 && now_ms() < deadline) {
      ibv_poll_cq_attr pa{};
      int rc = ibv_start_poll(cqx, &pa);
      if (rc == ENOENT) continue;
      REQUIRE(rc == 0);
      do {
        CHECK(cqx->status == IBV_WC_SUCCESS);
        uint32_t len = ibv_wc_read_opcode(cqx) == IBV_WC_RECV ? ibv_wc_read_byte_len(cqx) : 0;
        CHECK((ibv_wc_read_qp_num(cqx) == a->qp_num || ibv_wc_read_qp_num(cqx) == b->qp_num));
        seen.emplace_back(cqx->wr_id, len);
      } while (ibv_next_poll(cqx) == 0);
      ibv_end_poll(cqx);
    }
    REQUIRE(seen.size() == 2);
    bool got_send = false, got_recv = false;
    for (auto& [id, len] : seen) {
      if (id == 2) got_send = true;
      if (id == 9 && len == 20) got_recv = true;
    }
    CHECK(got_send);
    CHECK(got_recv);
    CHECK(memcmp(dst.bytes.data() + 128, src.bytes.data(), 100) == 0);
    CHECK(memcmp(dst.bytes.data(), src.bytes.data() + 10, 20) == 0);

    // An operation the device does not carry fails the whole batch.
    ibv_wr_start(ax);
    ax->wr_id = 3;
    ax->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send_tso(ax, nullptr, 0, 0);  // (memory windows are carried now: mw_test.cc)
    CHECK(ibv_wr_complete(ax) == EOPNOTSUPP);
    // wr_abort discards what was built.
    ibv_wr_start(ax);
    ibv_wr_send(ax);
    ibv_wr_set_sge(ax, src.mr->lkey, src.addr(), 8);
    ibv_wr_abort(ax);
    ibv_poll_cq_attr pa{};
    CHECK(ibv_start_poll(cqx, &pa) == ENOENT);
  }
  ibv_destroy_qp(a);
  ibv_destroy_qp(b);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

TEST_CASE("UD needs a GRH address handle and delivers the GRH", "[ud]") {
  Pair p(IBV_QPT_UD);
  for (ibv_qp* qp : {p.a, p.b}) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = 0x11111111;
    REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) ==
            0);
    a.qp_state = IBV_QPS_RTR;
    REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 5;
    REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
  }
  ibv_ah_attr ah_attr{};
  ah_attr.port_num = 1;
  errno = 0;
  CHECK(ibv_create_ah(p.pd, &ah_attr) == nullptr);  // RoCE: no GRH, no route
  CHECK(errno == EINVAL);
  ah_attr.is_global = 1;
  ah_attr.grh.dgid = p.gid;
  ah_attr.grh.sgid_index = 0;
  ah_attr.grh.hop_limit = 64;
  ibv_ah* ah = ibv_create_ah(p.pd, &ah_attr);
  REQUIRE(ah != nullptr);
  Buffer src(p.pd, 512, kAllAccess);
  Buffer dst(p.pd, 512 + 40, kAllAccess);
  for (int i = 0; i < 512; ++i) src.bytes[i] = static_cast<uint8_t>(i);
  REQUIRE(post_recv(p.b, dst, 512 + 40, 7) == 0);
  ibv_sge sge{src.addr(), 256, src.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 8;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = p.b->qp_num;
  wr.wr.ud.remote_qkey = 0x11111111;
  ibv_send_wr* bad = nullptr;
  REQUIRE(ibv_post_send(p.a, &wr, &bad) == 0);
  auto wb = poll_n(p.cq_b, 1);
  REQUIRE(wb.size() == 1);
  CHECK(wb[0].status == IBV_WC_SUCCESS);
  CHECK(wb[0].byte_len == 256 + 40);  // IBA 11.4: UD receives start with the 40-byte GRH
  CHECK(wb[0].src_qp == p.a->qp_num);
  CHECK((wb[0].wc_flags & IBV_WC_GRH) != 0);
  CHECK(memcmp(dst.bytes.data() + 40, src.bytes.data(), 256) == 0);
  CHECK(poll_n(p.cq_a, 1).size() == 1);
  CHECK(ibv_destroy_ah(ah) == 0);
}

TEST_CASE("SRQ receives for its QPs", "[srq]") {
  ibv_context* ctx = open_sroce();
  REQUIRE(ctx != nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_gid gid{};
  REQUIRE(ibv_query_gid(ctx, 1, 0, &gid) == 0);
  ibv_srq_init_attr sattr{};
  sattr.attr.max_wr = 16;
  sattr.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd, &sattr);
  REQUIRE(srq != nullptr);
  CHECK(sattr.attr.max_wr >= 16);
  ibv_srq_attr q{};
  REQUIRE(ibv_query_srq(srq, &q) == 0);
  CHECK(q.max_wr >= 16);
  ibv_cq* cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 8;
  init.cap.max_send_sge = 1;
  ibv_qp* a = ibv_create_qp(pd, &init);
  init.srq = srq;
  ibv_qp* b = ibv_create_qp(pd, &init);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  connect_qp(a, b->qp_num, gid);
  connect_qp(b, a->qp_num, gid);
  {
    Buffer buf(pd, 1024, kAllAccess);
    CHECK(post_recv(b, buf, 64, 1) == EINVAL);  // IBA 10.2: receives go to the SRQ
    for (int i = 0; i < 4; ++i) {
      ibv_sge sge{buf.addr() + 256 * i, 256, buf.mr->lkey};
      ibv_recv_wr wr{};
      wr.wr_id = 100 + i;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      REQUIRE(ibv_post_srq_recv(srq, &wr, &bad) == 0);
    }
    for (int i = 0; i < 4; ++i) REQUIRE(post_send(a, IBV_WR_SEND, buf, 16, i) == 0);
    auto wc = poll_n(cq, 8);
    REQUIRE(wc.size() == 8);
    int recvs = 0;
    for (auto& w : wc) {
      CHECK(w.status == IBV_WC_SUCCESS);
      if (w.opcode == IBV_WC_RECV) {
        ++recvs;
        CHECK(w.wr_id >= 100);
        CHECK(w.qp_num == b->qp_num);
      }
    }
    CHECK(recvs == 4);
  }
  CHECK(ibv_destroy_qp(a) == 0);
  CHECK(ibv_destroy_qp(b) == 0);
  CHECK(ibv_destroy_srq(srq) == 0);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

// ibv_alloc_parent_domain: a PD wrapper whose objects belong to its protection domain
// (libsroce never calls the allocators: its rings come from sroced).
TEST_CASE("a parent domain stands for its protection domain", "[pd]") {
  Pair p;
  ibv_parent_domain_init_attr attr{};
  errno = 0;
  CHECK(ibv_alloc_parent_domain(p.ctx, &attr) == nullptr);  // no PD
  CHECK(errno == EINVAL);
  attr.pd = p.pd;
  ibv_pd* parent = ibv_alloc_parent_domain(p.ctx, &attr);
  REQUIRE(parent != nullptr);
  CHECK(parent != p.pd);
  {
    // An MR registered through the parent is in p.pd: p.a's RDMA WRITE reaches it.
    Buffer dst(parent, 256, kAllAccess);
    Buffer src(p.pd, 256, kAllAccess);
    memset(src.bytes.data(), 0x5a, 256);
    REQUIRE(post_send(p.a, IBV_WR_RDMA_WRITE, src, 256, 1, dst.addr(), dst.mr->rkey) == 0);
    auto wc = poll_n(p.cq_a, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    CHECK(dst.bytes[0] == 0x5a);
    CHECK(dst.bytes[255] == 0x5a);
  }
  // Freeing the parent leaves the protection domain (~Pair deallocates it).
  CHECK(ibv_dealloc_pd(parent) == 0);
  ibv_pd* again = ibv_alloc_parent_domain(p.ctx, &attr);
  REQUIRE(again != nullptr);
  CHECK(ibv_dealloc_pd(again) == 0);
}

// Shared MRs through libibverbs and a live sroced (docs/performance.md, "Shared memory"): an
// RDMA WRITE lands in pages the provider moved onto a memfd; after ibv_dereg_mr they are private
// anonymous memory again with those bytes, and MADV_DONTNEED zeroes them.
TEST_CASE("a shared MR's pages go back to private memory at dereg, with their bytes", "[mr][share]") {
  const char* env = getenv("SROCE_SHARE_MR");
  const bool sharing = !(env && strcmp(env, "0") == 0);
  Pair p;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t len = 16 * page;
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  auto* dst = static_cast<uint8_t*>(m);
  memset(dst, 0x33, len);
  ibv_mr* mr = ibv_reg_mr(p.pd, dst, len, kAllAccess);
  REQUIRE(mr != nullptr);
  auto on_memfd = [](const void* addr) {
    std::ifstream f("/proc/self/maps");
    std::string line;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    while (std::getline(f, line)) {
      uintptr_t s = 0, e = 0;
      if (sscanf(line.c_str(), "%lx-%lx", &s, &e) == 2 && s <= a && a < e)
        return line.find("/memfd:sroce-mr") != std::string::npos;
    }
    return false;
  };
  CHECK(on_memfd(dst) == sharing);
  Buffer src(p.pd, 3 * page, kAllAccess);
  for (size_t i = 0; i < src.bytes.size(); ++i) src.bytes[i] = static_cast<uint8_t>(i * 13 + 5);
  REQUIRE(post_send(p.a, IBV_WR_RDMA_WRITE, src, static_cast<uint32_t>(3 * page), 31,
                    reinterpret_cast<uintptr_t>(dst) + 2 * page + 100, mr->rkey) == 0);
  auto wc = poll_n(p.cq_a, 1);
  REQUIRE(wc.size() == 1);
  REQUIRE(wc[0].status == IBV_WC_SUCCESS);
  std::vector<uint8_t> expect(len, 0x33);
  memcpy(expect.data() + 2 * page + 100, src.bytes.data(), 3 * page);
  CHECK(memcmp(dst, expect.data(), len) == 0);
  REQUIRE(ibv_dereg_mr(mr) == 0);
  for (size_t off = 0; off < len; off += page) CHECK_FALSE(on_memfd(dst + off));
  CHECK(memcmp(dst, expect.data(), len) == 0);
  REQUIRE(madvise(dst, len, MADV_DONTNEED) == 0);
  bool zero = true;
  for (size_t i = 0; i < len; ++i) zero = zero && dst[i] == 0;
  CHECK(zero);
  munmap(m, len);
}
