// Control-path helpers for scenarios and tests: the verbs sequence an RDMA
// application runs (PD, MR, CQ, QP, INIT -> RTR -> RTS), against a Host's
// engine, with errors carried up as sroce::Error.
#pragma once

#include <cstdint>
#include <utility>

#include "sroce/engine/engine.h"
#include "sroce/sim/host.h"

namespace sroce::sim {

struct QpOptions {
  QpType type = QpType::kRc;
  Mtu mtu = Mtu::k1024;
  uint32_t send_wr = 256;
  uint32_t recv_wr = 256;
  uint32_t max_sge = 4;
  uint32_t max_inline = 0;
  uint32_t cqe = 4096;
  uint8_t timeout = 8;         // 4.096 us * 2^8 = 1.05 ms local ACK timeout
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;       // infinite
  uint8_t min_rnr_timer = 1;   // 0.01 ms (IBA table 45)
  uint8_t max_rd_atomic = 16;
  uint32_t access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                    kAccessRemoteAtomic;
  uint32_t qkey = 0x11111111;  // UD
  uint8_t traffic_class = 0;   // IP TOS of the QP's packets (DSCP << 2 | ECN)
  bool sq_sig_all = false;
};

// One side of a QP: the engine (and host, when it runs in one), its PD and
// CQs, the QP.
struct QpEnd {
  Host* host = nullptr;      // null for a bare engine (benchmarks)
  Engine* engine = nullptr;
  Gid addr;                  // the engine's GID 0
  Handle pd = kNoHandle;
  Handle send_cq = kNoHandle;
  Handle recv_cq = kNoHandle;
  Qpn qpn = 0;
  uint32_t sq_psn = 0;
  Handle ah = kNoHandle;  // UD: address handle toward the peer
};

// PD (shared if `pd` given), one CQ for send and receive, the QP in RESET.
// The host version also has the host watch the CQ.
Result<QpEnd> create_qp_end(Host& h, const QpOptions& o, Handle pd = kNoHandle);
Result<QpEnd> create_qp_end(Engine& e, Gid addr, const QpOptions& o, Handle pd = kNoHandle);
// INIT -> RTR -> RTS toward `remote` at time `now`. For UD the AH toward
// remote is created.
Result<void> connect_qp(QpEnd& local, const QpEnd& remote, const QpOptions& o,
                        uint32_t remote_sq_psn, Time now);
// Both ends, connected; starting PSNs drawn from `psn_seed` (24 bits each).
Result<std::pair<QpEnd, QpEnd>> make_qp_pair(Host& a, Host& b, const QpOptions& o,
                                             uint64_t psn_seed);
Result<std::pair<QpEnd, QpEnd>> make_qp_pair(Engine& a, Gid a_addr, Engine& b, Gid b_addr,
                                             const QpOptions& o, uint64_t psn_seed, Time now);

// reg_mr with an error that says which region failed.
Result<MrKeys> reg_region(Host& h, Handle pd, uint64_t addr, uint64_t len, uint32_t access);

}  // namespace sroce::sim
