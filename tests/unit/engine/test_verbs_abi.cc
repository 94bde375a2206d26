// verbs.h promises that every enum value equals its libibverbs counterpart,
// so the provider passes them through untranslated. Checked at compile time
// when <infiniband/verbs.h> (Debian: libibverbs-dev) is installed.
#include "harness.h"

#if __has_include(<infiniband/verbs.h>)
#include <infiniband/verbs.h>
#define SROCE_HAVE_IBVERBS 1

#define SAME(ours, theirs) \
  static_assert(static_cast<long>(ours) == static_cast<long>(theirs), #ours)

namespace sroce {
SAME(QpType::kRc, IBV_QPT_RC);
SAME(QpType::kUc, IBV_QPT_UC);
SAME(QpType::kUd, IBV_QPT_UD);
SAME(QpState::kReset, IBV_QPS_RESET);
SAME(QpState::kInit, IBV_QPS_INIT);
SAME(QpState::kRtr, IBV_QPS_RTR);
SAME(QpState::kRts, IBV_QPS_RTS);
SAME(QpState::kSqd, IBV_QPS_SQD);
SAME(QpState::kSqe, IBV_QPS_SQE);
SAME(QpState::kErr, IBV_QPS_ERR);
SAME(Mtu::k256, IBV_MTU_256);
SAME(Mtu::k512, IBV_MTU_512);
SAME(Mtu::k1024, IBV_MTU_1024);
SAME(Mtu::k2048, IBV_MTU_2048);
SAME(Mtu::k4096, IBV_MTU_4096);
SAME(kAccessLocalWrite, IBV_ACCESS_LOCAL_WRITE);
SAME(kAccessRemoteWrite, IBV_ACCESS_REMOTE_WRITE);
SAME(kAccessRemoteRead, IBV_ACCESS_REMOTE_READ);
SAME(kAccessRemoteAtomic, IBV_ACCESS_REMOTE_ATOMIC);
SAME(kAccessMwBind, IBV_ACCESS_MW_BIND);
SAME(kAccessZeroBased, IBV_ACCESS_ZERO_BASED);
SAME(kQpState, IBV_QP_STATE);
SAME(kQpCurState, IBV_QP_CUR_STATE);
SAME(kQpEnSqdAsyncNotify, IBV_QP_EN_SQD_ASYNC_NOTIFY);
SAME(kQpAccessFlags, IBV_QP_ACCESS_FLAGS);
SAME(kQpPkeyIndex, IBV_QP_PKEY_INDEX);
SAME(kQpPort, IBV_QP_PORT);
SAME(kQpQkey, IBV_QP_QKEY);
SAME(kQpAv, IBV_QP_AV);
SAME(kQpPathMtu, IBV_QP_PATH_MTU);
SAME(kQpTimeout, IBV_QP_TIMEOUT);
SAME(kQpRetryCnt, IBV_QP_RETRY_CNT);
SAME(kQpRnrRetry, IBV_QP_RNR_RETRY);
SAME(kQpRqPsn, IBV_QP_RQ_PSN);
SAME(kQpMaxQpRdAtomic, IBV_QP_MAX_QP_RD_ATOMIC);
SAME(kQpAltPath, IBV_QP_ALT_PATH);
SAME(kQpMinRnrTimer, IBV_QP_MIN_RNR_TIMER);
SAME(kQpSqPsn, IBV_QP_SQ_PSN);
SAME(kQpMaxDestRdAtomic, IBV_QP_MAX_DEST_RD_ATOMIC);
SAME(kQpPathMigState, IBV_QP_PATH_MIG_STATE);
SAME(kQpCap, IBV_QP_CAP);
SAME(kQpDestQpn, IBV_QP_DEST_QPN);
SAME(WrOpcode::kRdmaWrite, IBV_WR_RDMA_WRITE);
SAME(WrOpcode::kRdmaWriteWithImm, IBV_WR_RDMA_WRITE_WITH_IMM);
SAME(WrOpcode::kSend, IBV_WR_SEND);
SAME(WrOpcode::kSendWithImm, IBV_WR_SEND_WITH_IMM);
SAME(WrOpcode::kRdmaRead, IBV_WR_RDMA_READ);
SAME(WrOpcode::kAtomicCmpSwp, IBV_WR_ATOMIC_CMP_AND_SWP);
SAME(WrOpcode::kAtomicFetchAdd, IBV_WR_ATOMIC_FETCH_AND_ADD);
SAME(WrOpcode::kLocalInv, IBV_WR_LOCAL_INV);
SAME(WrOpcode::kBindMw, IBV_WR_BIND_MW);
SAME(WrOpcode::kSendWithInv, IBV_WR_SEND_WITH_INV);
SAME(kSendFence, IBV_SEND_FENCE);
SAME(kSendSignaled, IBV_SEND_SIGNALED);
SAME(kSendSolicited, IBV_SEND_SOLICITED);
SAME(kSendInline, IBV_SEND_INLINE);
SAME(WcStatus::kSuccess, IBV_WC_SUCCESS);
SAME(WcStatus::kLocLenErr, IBV_WC_LOC_LEN_ERR);
SAME(WcStatus::kLocQpOpErr, IBV_WC_LOC_QP_OP_ERR);
SAME(WcStatus::kLocEecOpErr, IBV_WC_LOC_EEC_OP_ERR);
SAME(WcStatus::kLocProtErr, IBV_WC_LOC_PROT_ERR);
SAME(WcStatus::kWrFlushErr, IBV_WC_WR_FLUSH_ERR);
SAME(WcStatus::kMwBindErr, IBV_WC_MW_BIND_ERR);
SAME(WcStatus::kBadRespErr, IBV_WC_BAD_RESP_ERR);
SAME(WcStatus::kLocAccessErr, IBV_WC_LOC_ACCESS_ERR);
SAME(WcStatus::kRemInvReqErr, IBV_WC_REM_INV_REQ_ERR);
SAME(WcStatus::kRemAccessErr, IBV_WC_REM_ACCESS_ERR);
SAME(WcStatus::kRemOpErr, IBV_WC_REM_OP_ERR);
SAME(WcStatus::kRetryExcErr, IBV_WC_RETRY_EXC_ERR);
SAME(WcStatus::kRnrRetryExcErr, IBV_WC_RNR_RETRY_EXC_ERR);
SAME(WcStatus::kLocRddViolErr, IBV_WC_LOC_RDD_VIOL_ERR);
SAME(WcStatus::kRemInvRdReqErr, IBV_WC_REM_INV_RD_REQ_ERR);
SAME(WcStatus::kRemAbortErr, IBV_WC_REM_ABORT_ERR);
SAME(WcStatus::kInvEecnErr, IBV_WC_INV_EECN_ERR);
SAME(WcStatus::kInvEecStateErr, IBV_WC_INV_EEC_STATE_ERR);
SAME(WcStatus::kFatalErr, IBV_WC_FATAL_ERR);
SAME(WcStatus::kRespTimeoutErr, IBV_WC_RESP_TIMEOUT_ERR);
SAME(WcStatus::kGeneralErr, IBV_WC_GENERAL_ERR);
SAME(WcOpcode::kSend, IBV_WC_SEND);
SAME(WcOpcode::kRdmaWrite, IBV_WC_RDMA_WRITE);
SAME(WcOpcode::kRdmaRead, IBV_WC_RDMA_READ);
SAME(WcOpcode::kCompSwap, IBV_WC_COMP_SWAP);
SAME(WcOpcode::kFetchAdd, IBV_WC_FETCH_ADD);
SAME(WcOpcode::kBindMw, IBV_WC_BIND_MW);
SAME(WcOpcode::kLocalInv, IBV_WC_LOCAL_INV);
SAME(WcOpcode::kRecv, IBV_WC_RECV);
SAME(WcOpcode::kRecvRdmaWithImm, IBV_WC_RECV_RDMA_WITH_IMM);
SAME(kWcGrh, IBV_WC_GRH);
SAME(kWcWithImm, IBV_WC_WITH_IMM);
SAME(kWcWithInv, IBV_WC_WITH_INV);
SAME(AsyncEventType::kCqErr, IBV_EVENT_CQ_ERR);
SAME(AsyncEventType::kQpFatal, IBV_EVENT_QP_FATAL);
SAME(AsyncEventType::kQpReqErr, IBV_EVENT_QP_REQ_ERR);
SAME(AsyncEventType::kQpAccessErr, IBV_EVENT_QP_ACCESS_ERR);
SAME(AsyncEventType::kCommEst, IBV_EVENT_COMM_EST);
SAME(AsyncEventType::kSqDrained, IBV_EVENT_SQ_DRAINED);
SAME(AsyncEventType::kLastWqeReached, IBV_EVENT_QP_LAST_WQE_REACHED);
SAME(AsyncEventType::kSrqLimitReached, IBV_EVENT_SRQ_LIMIT_REACHED);
}  // namespace sroce
#else
#define SROCE_HAVE_IBVERBS 0
#endif

using namespace sroce;

TEST_CASE("verbs.h enum values equal libibverbs' (when <infiniband/verbs.h> exists)", "[abi]") {
  if (!SROCE_HAVE_IBVERBS)
    WARN("libibverbs-dev not installed: the static_asserts above were skipped");
  // Values that the rest of the stack relies on even without the header
  // (from rdma-core's verbs.h, kept here as the reference).
  CHECK(static_cast<int>(WcStatus::kWrFlushErr) == 5);
  CHECK(static_cast<int>(WcStatus::kRetryExcErr) == 12);
  CHECK(static_cast<int>(WcOpcode::kRecvRdmaWithImm) == 129);
  CHECK(kQpDestQpn == (1u << 20));
  CHECK(mtu_bytes(Mtu::k4096) == 4096);
  CHECK(mtu_bytes(Mtu::k256) == 256);
}
