// The helpers of the sroced two-host tests (test_daemon.cc, test_share_mr.cc): JSON stats
// over the control socket, QP attributes for INIT/RTR/RTS, one RC side (Side) and two daemons
// in two network namespaces joined by veth (TwoDaemons).
#pragma once

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "abi_client.h"
#include "harness.h"
#include "../skip.h"  // SROCE_SKIP

namespace sroce::test {

inline nlohmann::json stats_of(const std::string& socket) {
  AbiClient c;
  if (c.connect(socket) != 0) return nlohmann::json{};
  std::string s = c.stats();
  return s.empty() ? nlohmann::json{} : nlohmann::json::parse(s);
}

// Waits until pred(stats) holds or `ms` pass; returns the last stats.
template <typename F>
nlohmann::json wait_stats(const std::string& socket, F pred, int ms = 5000) {
  nlohmann::json j;
  for (int i = 0; i < ms / 20; ++i) {
    j = stats_of(socket);
    if (!j.is_null() && pred(j)) return j;
    usleep(20000);
  }
  return j;
}

inline sroce_qp_attr init_attr() {
  sroce_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  return a;
}
constexpr uint32_t kInitMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;

inline sroce_qp_attr rtr_attr(uint32_t dest_qpn, const std::string& peer_ip) {
  sroce_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 100;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  in_addr ip{};
  inet_pton(AF_INET, peer_ip.c_str(), &ip);
  a.ah_attr.dgid[10] = 0xff;
  a.ah_attr.dgid[11] = 0xff;
  memcpy(&a.ah_attr.dgid[12], &ip, 4);
  a.ah_attr.hop_limit = 64;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  return a;
}
constexpr uint32_t kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;

inline sroce_qp_attr rts_attr(uint8_t timeout = 14, uint8_t retry = 7) {
  sroce_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 100;
  a.timeout = timeout;
  a.retry_cnt = retry;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return a;
}
constexpr uint32_t kRtsMask =
    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

// One side of an RC connection: context, PD, MR over `buf`, CQ, QP.
struct Side {
  AbiClient c;
  uint32_t pd = 0;
  sroce_reg_mr_resp mr{};
  ClientCq cq;
  ClientQp qp;
  std::vector<char> buf;

  int open(const std::string& socket, size_t bytes) {
    buf.assign(bytes, 0);
    if (int rc = c.connect(socket)) return rc;
    if (int rc = c.hello()) return rc;
    if (int rc = c.alloc_pd(&pd)) return rc;
    if (int rc = c.reg_mr(pd, buf.data(), buf.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, &mr))
      return rc;
    if (int rc = c.create_cq(64, 0, &cq)) return rc;
    return c.create_qp(pd, cq.handle, cq.handle, IBV_QPT_RC, 32, &qp);
  }
  int connect_to(uint32_t peer_qpn, const std::string& peer_ip, uint8_t timeout = 14, uint8_t retry = 7) {
    if (int rc = c.modify_qp(qp.qpn, init_attr(), kInitMask)) return rc;
    if (int rc = c.modify_qp(qp.qpn, rtr_attr(peer_qpn, peer_ip), kRtrMask)) return rc;
    return c.modify_qp(qp.qpn, rts_attr(timeout, retry), kRtsMask);
  }
  sroce_sge sge(size_t off, uint32_t len) const {
    return sroce_sge{reinterpret_cast<uint64_t>(buf.data() + off), len, mr.lkey};
  }
};

// Two namespaces joined by a veth pair, a sroced in each (the fixture of the two-host cases);
// connect() opens an RC QP on each side with a 1 MiB MR and connects them.
struct TwoDaemons {
  NetnsPair ns;
  DaemonProcess da{{"--address", ns.addr_a}, ns.ns_a};
  DaemonProcess db{{"--address", ns.addr_b}, ns.ns_b};
  TwoDaemons() {
    REQUIRE(ns.ok());
    REQUIRE(da.ok());
    REQUIRE(db.ok());
  }
  void connect(Side& a, Side& b) {
    REQUIRE(a.open(da.socket(), 1 << 20) == 0);
    REQUIRE(b.open(db.socket(), 1 << 20) == 0);
    REQUIRE(a.connect_to(b.qp.qpn, ns.addr_b) == 0);
    REQUIRE(b.connect_to(a.qp.qpn, ns.addr_a) == 0);
  }
};

inline sroce_send_wqe wqe(uint64_t wr_id, uint8_t opcode, uint32_t flags = IBV_SEND_SIGNALED) {
  sroce_send_wqe w{};
  w.wr_id = wr_id;
  w.opcode = opcode;
  w.send_flags = flags;
  w.num_sge = 1;
  return w;
}

#define REQUIRE_ROOT()                                           \
  do {                                                           \
    if (!have_root()) {                                          \
      SROCE_SKIP("needs root (network namespaces, veth)");       \
    }                                                            \
  } while (0)

}  // namespace sroce::test
