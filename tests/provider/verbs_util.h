// Helpers for the provider tests that drive libibverbs against a live sroced (run under
// sroce-run by run_with_sroced.sh). Every wait is bounded: a test fails, it never hangs.
#pragma once

#include <infiniband/verbs.h>
#include <poll.h>
#include <stdlib.h>
#include <time.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

namespace sroce::test {

inline int64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

// Opens the first device whose name starts with "sroce".
inline ibv_context* open_sroce() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; list != nullptr && i < n && ctx == nullptr; ++i)
    if (strncmp(ibv_get_device_name(list[i]), "sroce", 5) == 0) ctx = ibv_open_device(list[i]);
  if (list != nullptr) ibv_free_device_list(list);
  return ctx;
}

// The GID index the tests use: $SROCE_TEST_GID, else 0 (sroce-run's lo: ::ffff:127.0.0.1;
// in the VM the kernel's table puts the IPv4 GID sroced serves elsewhere).
inline uint8_t test_gid_index() {
  const char* e = getenv("SROCE_TEST_GID");
  return e != nullptr && *e != '\0' ? static_cast<uint8_t>(atoi(e)) : 0;
}

// Polls until `want` completions arrived or `ms` passed; returns what arrived.
inline std::vector<ibv_wc> poll_n(ibv_cq* cq, size_t want, int ms = 10000) {
  std::vector<ibv_wc> out;
  const int64_t deadline = now_ms() + ms;
  while (out.size() < want && now_ms() < deadline) {
    ibv_wc wc[16];
    int n = ibv_poll_cq(cq, 16, wc);
    REQUIRE(n >= 0);
    for (int i = 0; i < n; ++i) out.push_back(wc[i]);
    if (n == 0) {
      timespec ts{0, 20000};
      nanosleep(&ts, nullptr);
    }
  }
  return out;
}

// A registered buffer.
struct Buffer {
  std::vector<uint8_t> bytes;
  ibv_mr* mr = nullptr;
  Buffer(ibv_pd* pd, size_t len, int access) : bytes(len) {
    mr = ibv_reg_mr(pd, bytes.data(), len, access);
    REQUIRE(mr != nullptr);
  }
  ~Buffer() {
    if (mr != nullptr) ibv_dereg_mr(mr);
  }
  uint64_t addr() const { return reinterpret_cast<uintptr_t>(bytes.data()); }
};

inline constexpr int kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// RESET -> INIT -> RTR -> RTS for a connected QP towards `remote_qpn` through GID 0.
inline void connect_qp(ibv_qp* qp, uint32_t remote_qpn, const ibv_gid& gid, uint8_t rnr_retry = 7) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.pkey_index = 0;
  a.qp_access_flags = kAllAccess;
  REQUIRE(ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = 100;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.sgid_index = test_gid_index();
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (qp->qp_type == IBV_QPT_RC) {
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  }
  REQUIRE(ibv_modify_qp(qp, &a, mask) == 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 100;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (qp->qp_type == IBV_QPT_RC) {
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = rnr_retry;
    a.max_rd_atomic = 4;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  REQUIRE(ibv_modify_qp(qp, &a, mask) == 0);
}

// Waits up to `ms` for fd to become readable (or hung up); true if it did.
inline bool readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1;
}

// Two connected QPs of one process (loopback through the daemon), each with its own CQ.
struct Pair {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq_a = nullptr;
  ibv_cq* cq_b = nullptr;
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  ibv_gid gid{};

  explicit Pair(ibv_qp_type type = IBV_QPT_RC, uint32_t depth = 16, uint8_t rnr_retry = 7) {
    ctx = open_sroce();
    REQUIRE(ctx != nullptr);
    REQUIRE(ibv_query_gid(ctx, 1, test_gid_index(), &gid) == 0);
    pd = ibv_alloc_pd(ctx);
    REQUIRE(pd != nullptr);
    cq_a = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    cq_b = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    REQUIRE(cq_a != nullptr);
    REQUIRE(cq_b != nullptr);
    a = make_qp(type, cq_a, depth);
    b = make_qp(type, cq_b, depth);
    if (type != IBV_QPT_UD) {
      connect_qp(a, b->qp_num, gid, rnr_retry);
      connect_qp(b, a->qp_num, gid, rnr_retry);
    }
  }
  ibv_qp* make_qp(ibv_qp_type type, ibv_cq* cq, uint32_t depth) {
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = type;
    init.cap.max_send_wr = depth;
    init.cap.max_recv_wr = depth;
    init.cap.max_send_sge = 2;
    init.cap.max_recv_sge = 2;
    init.cap.max_inline_data = 64;
    ibv_qp* qp = ibv_create_qp(pd, &init);
    REQUIRE(qp != nullptr);
    return qp;
  }
  ~Pair() {
    if (a) ibv_destroy_qp(a);
    if (b) ibv_destroy_qp(b);
    if (cq_a) ibv_destroy_cq(cq_a);
    if (cq_b) ibv_destroy_cq(cq_b);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

inline int post_send(ibv_qp* qp, ibv_wr_opcode op, const Buffer& buf, uint32_t len, uint64_t wr_id,
                     uint64_t remote_addr = 0, uint32_t rkey = 0, int flags = IBV_SEND_SIGNALED) {
  ibv_sge sge{buf.addr(), len, buf.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

inline int post_recv(ibv_qp* qp, const Buffer& buf, uint32_t len, uint64_t wr_id) {
  ibv_sge sge{buf.addr(), len, buf.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp, &wr, &bad);
}

}  // namespace sroce::test
