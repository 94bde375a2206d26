// Verbs-level vocabulary of the engine. Every enum value equals its libibverbs
// counterpart (checked against <infiniband/verbs.h> in tests/unit), so the
// provider and the daemon pass them through without translation tables.
#pragma once

#include <cstdint>
#include <span>

#include "sroce/engine/types.h"

namespace sroce {

using Qpn = uint32_t;  // 24 bits on the wire
using Handle = uint32_t;
inline constexpr Handle kNoHandle = 0;

enum class QpType : uint8_t { kRc = 2, kUc = 3, kUd = 4 };  // ibv_qp_type

enum class QpState : uint8_t {  // ibv_qp_state
  kReset = 0,
  kInit = 1,
  kRtr = 2,
  kRts = 3,
  kSqd = 4,
  kSqe = 5,
  kErr = 6,
};
const char* to_string(QpState s);

enum class Mtu : uint8_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };  // ibv_mtu
constexpr uint32_t mtu_bytes(Mtu m) { return 128u << static_cast<unsigned>(m); }

// ibv_access_flags
enum AccessFlags : uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteWrite = 1u << 1,
  kAccessRemoteRead = 1u << 2,
  kAccessRemoteAtomic = 1u << 3,
  kAccessMwBind = 1u << 4,
  kAccessZeroBased = 1u << 5,
};

// ibv_mw_type (IBA 10.6.7): type 1 is bound by the Bind Memory Window verb and belongs to
// its PD; type 2 (2B: associated with the QP that bound it) by a BIND_MW work request.
enum MwType : uint8_t {
  kMwType1 = 1,
  kMwType2 = 2,
};

// ibv_rereg_mr_flags: what Engine::rereg_mr changes.
enum ReregFlags : uint32_t {
  kReregTranslation = 1u << 0,
  kReregPd = 1u << 1,
  kReregAccess = 1u << 2,
};

// ibv_qp_attr_mask
enum QpAttrMask : uint32_t {
  kQpState = 1u << 0,
  kQpCurState = 1u << 1,
  kQpEnSqdAsyncNotify = 1u << 2,
  kQpAccessFlags = 1u << 3,
  kQpPkeyIndex = 1u << 4,
  kQpPort = 1u << 5,
  kQpQkey = 1u << 6,
  kQpAv = 1u << 7,
  kQpPathMtu = 1u << 8,
  kQpTimeout = 1u << 9,
  kQpRetryCnt = 1u << 10,
  kQpRnrRetry = 1u << 11,
  kQpRqPsn = 1u << 12,
  kQpMaxQpRdAtomic = 1u << 13,
  kQpAltPath = 1u << 14,
  kQpMinRnrTimer = 1u << 15,
  kQpSqPsn = 1u << 16,
  kQpMaxDestRdAtomic = 1u << 17,
  kQpPathMigState = 1u << 18,
  kQpCap = 1u << 19,
  kQpDestQpn = 1u << 20,
};

// ibv_wr_opcode
enum class WrOpcode : uint8_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpSwp = 5,
  kAtomicFetchAdd = 6,
  kLocalInv = 7,
  kBindMw = 8,
  kSendWithInv = 9,
};

// ibv_send_flags
enum SendFlags : uint32_t {
  kSendFence = 1u << 0,
  kSendSignaled = 1u << 1,
  kSendSolicited = 1u << 2,
  kSendInline = 1u << 3,
};

// ibv_wc_status
enum class WcStatus : uint8_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
};
const char* to_string(WcStatus s);

// ibv_wc_opcode
enum class WcOpcode : uint8_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kBindMw = 5,
  kLocalInv = 6,
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

// ibv_wc_flags
enum WcFlags : uint32_t {
  kWcGrh = 1u << 0,
  kWcWithImm = 1u << 1,
  kWcWithInv = 1u << 3,
};

// ibv_event_type (the subset the engine raises)
enum class AsyncEventType : uint8_t {
  kCqErr = 0,
  kQpFatal = 1,
  kQpReqErr = 2,
  kQpAccessErr = 3,
  kCommEst = 4,
  kSqDrained = 5,
  kSrqLimitReached = 15,
  kLastWqeReached = 16,
};

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

struct AhAttr {
  Gid dgid;
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;  // DSCP << 2 | ECN is set by the engine
  uint32_t flow_label = 0;
  uint8_t sl = 0;
  uint8_t port_num = 1;
};

struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;
  std::span<const Sge> sgl;
  uint32_t imm_data = 0;         // host order; the wire carries it big-endian
  uint32_t invalidate_rkey = 0;  // kSendWithInv
  struct {
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
  } rdma;
  struct {
    uint64_t remote_addr = 0;
    uint64_t compare_add = 0;
    uint64_t swap = 0;
    uint32_t rkey = 0;
  } atomic;
  struct {
    Handle ah = kNoHandle;
    Qpn remote_qpn = 0;
    uint32_t remote_qkey = 0;
  } ud;
  // kBindMw (IBA 10.6.7.2, ibv_mw_bind_info): bind window `mw` to [addr, addr + length) of
  // the MR named by mr_lkey with `access`, its R_Key becoming `rkey` (same index, new key
  // byte). length 0 unbinds. kLocalInv names its R_Key in invalidate_rkey.
  struct {
    Handle mw = kNoHandle;
    uint32_t rkey = 0;
    uint32_t mr_lkey = 0;
    uint32_t access = 0;
    uint64_t addr = 0;
    uint64_t length = 0;
  } bind;
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::span<const Sge> sgl;
};

struct Wc {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t vendor_err = 0;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;  // host order; also the invalidated rkey with kWcWithInv
  Qpn qp_num = 0;
  Qpn src_qp = 0;
  uint32_t wc_flags = 0;
  uint16_t pkey_index = 0;
  uint8_t sl = 0;
  // When the engine completed the work: the time of the entry point that made the completion
  // (the engine reads no clock). The daemon's CQE carries it for ibv_wc_read_completion_ts.
  Time timestamp{};
};

struct QpCap {
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t max_send_sge = 0;
  uint32_t max_recv_sge = 0;
  uint32_t max_inline_data = 0;
};

struct QpInitAttr {
  QpType qp_type = QpType::kRc;
  Handle send_cq = kNoHandle;
  Handle recv_cq = kNoHandle;
  Handle srq = kNoHandle;  // kNoHandle: the QP has its own receive queue
  QpCap cap;
  bool sq_sig_all = false;
};

// ibv_qp_attr, restricted to what RoCE uses.
struct QpAttr {
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  Mtu path_mtu = Mtu::k1024;
  uint32_t qkey = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  Qpn dest_qp_num = 0;
  uint32_t qp_access_flags = 0;
  QpCap cap;
  AhAttr ah_attr;
  uint16_t pkey_index = 0;
  bool en_sqd_async_notify = false;
  bool sq_draining = false;
  uint8_t max_rd_atomic = 0;
  uint8_t max_dest_rd_atomic = 0;
  uint8_t min_rnr_timer = 0;  // IBTA encoded (table 45), 0 = 655.36 ms
  uint8_t port_num = 1;
  uint8_t timeout = 0;        // local ACK timeout 4.096 us * 2^timeout; 0 = infinite
  uint8_t retry_cnt = 0;      // 0..7
  uint8_t rnr_retry = 0;      // 0..7, 7 = infinite
};

struct SrqAttr {
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  uint32_t srq_limit = 0;
};

struct AsyncEvent {
  AsyncEventType type = AsyncEventType::kQpFatal;
  uint32_t element = 0;  // QPN, CQ or SRQ handle
};

}  // namespace sroce
