// Helpers for the provider tests that drive libibverbs against a live sroced (run under
// sroce-run by run_with_sroced.sh). Every wait is bounded: a test fails, it never hangs.
#pragma once

#include <infiniband/verbs.h>
#include <poll.h>
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
  a.ah_attr.grh.sgid_index = 0;
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

}  // namespace sroce::test
