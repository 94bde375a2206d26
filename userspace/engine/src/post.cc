// post_send / post_recv / post_srq_recv: the checks ibv_post_* callers get
// as an errno (nothing is queued on error), then the WQE is copied into the
// preallocated ring. Inline data is copied here, at post time (IBA 10.8:
// the buffer may be reused as soon as the post returns), without an L_Key.
#include <cerrno>

#include "impl.h"

namespace sroce {

using namespace eng;

namespace {

bool opcode_allowed(QpType t, WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      return true;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return t != QpType::kUd;
    case WrOpcode::kRdmaRead:
    case WrOpcode::kAtomicCmpSwp:
    case WrOpcode::kAtomicFetchAdd:
    case WrOpcode::kSendWithInv:
      return t == QpType::kRc;  // IBA table 38: RC only
    case WrOpcode::kBindMw:
    case WrOpcode::kLocalInv:
      return t != QpType::kUd;  // IBA table 38: memory windows on connected QPs (mw.cc)
    default:
      return false;
  }
}

}  // namespace

int Engine::Impl::post_send(Qpn qpn, const SendWr& wr, Time now) {
  const uint32_t s = qp_slot(qpn);
  if (s == kNone) return EINVAL;
  Qp& qp = qps_[s];
  last_now_ = now;
  // IBA 10.3: the send queue accepts WRs from RTS on (libibverbs on rxe: EINVAL before).
  if (qp.state == QpState::kReset || qp.state == QpState::kInit || qp.state == QpState::kRtr)
    return EINVAL;
  if (!opcode_allowed(qp.type, wr.opcode)) return EINVAL;
  if (wr.sgl.size() > qp.cap.max_send_sge) return EINVAL;
  uint64_t total = 0;
  for (const Sge& g : wr.sgl) total += g.length;
  if (total > cfg_.max_msg_size) return EINVAL;
  const bool inl = (wr.send_flags & kSendInline) != 0;
  const bool local_op = wr.opcode == WrOpcode::kBindMw || wr.opcode == WrOpcode::kLocalInv;
  if (local_op && (!wr.sgl.empty() || (wr.send_flags & kSendInline))) return EINVAL;
  if (inl) {
    if (eng::is_rd_atomic(wr.opcode)) return EINVAL;
    if (total > qp.cap.max_inline_data) return EINVAL;
  }
  if (eng::is_atomic(wr.opcode)) {
    // An atomic moves exactly 8 bytes to/from an 8-byte aligned address (IBA 9.4).
    if (wr.sgl.size() != 1 || wr.sgl[0].length != 8 || (wr.atomic.remote_addr & 7)) return EINVAL;
  }
  if (qp.is_ud() && total > mtu_max_) return EINVAL;  // UD messages are one packet
  uint32_t ah = kNone;
  if (qp.is_ud()) {
    ah = ah_slot(wr.ud.ah);
    if (ah == kNone || ahs_[ah].pd != qp.pd) return EINVAL;
  }
  if (qp.sq_tail - qp.sq_head >= qp.cap.max_send_wr) return ENOMEM;

  const uint32_t idx = qp.sq_tail;
  SendWqe& w = qp.wqe(idx);
  // Every field the requester reads is set here (no full clear: hot path).
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.length = static_cast<uint32_t>(total);
  w.flags = 0;
  w.started = w.done = w.counted = false;
  w.err = WcStatus::kSuccess;
  w.resp_bytes = 0;
  w.num_sge = 0;
  if ((wr.send_flags & kSendSignaled) || qp.sq_sig_all) w.flags |= kWqeSignaled;
  if (wr.send_flags & kSendFence) w.flags |= kWqeFence;
  if (wr.send_flags & kSendSolicited) w.flags |= kWqeSolicited;
  w.imm = wr.opcode == WrOpcode::kSendWithInv || wr.opcode == WrOpcode::kLocalInv
              ? wr.invalidate_rkey
              : wr.imm_data;
  if (wr.opcode == WrOpcode::kBindMw) {
    // mw.cc reads the bind back from these fields (no room added to every WQE).
    w.remote_addr = wr.bind.addr;
    w.compare_add = wr.bind.length;
    w.rkey = wr.bind.rkey;
    w.swap = (static_cast<uint64_t>(wr.bind.mr_lkey) << 32) | wr.bind.mw;
    w.imm = wr.bind.access;
  } else if (eng::is_atomic(wr.opcode)) {
    w.remote_addr = wr.atomic.remote_addr;
    w.rkey = wr.atomic.rkey;
    w.compare_add = wr.atomic.compare_add;
    w.swap = wr.atomic.swap;
  } else {
    w.remote_addr = wr.rdma.remote_addr;
    w.rkey = wr.rdma.rkey;
  }
  if (qp.is_ud()) {
    const AhAttr& a = ahs_[ah].attr;
    w.remote_qpn = wr.ud.remote_qpn & kPsnMask;
    // IBA 10.2: a Q_Key with the high bit set means "use the QP's Q_Key".
    w.remote_qkey = (wr.ud.remote_qkey & 0x80000000u) ? qp.attr.qkey : wr.ud.remote_qkey;
    w.ud.dgid = a.dgid;
    w.ud.flow_label = a.flow_label;
    w.ud.sgid_index = a.sgid_index;
    w.ud.traffic_class = a.traffic_class;
    w.ud.hop_limit = a.hop_limit;
  }
  if (inl) {
    w.flags |= kWqeInline;
    std::byte* dst = qp.wqe_inline(idx);
    for (const Sge& g : wr.sgl) {
      if (g.length && !mem_.read(g.addr, {dst, g.length})) w.err = WcStatus::kLocProtErr;
      dst += g.length;
    }
  } else {
    w.num_sge = static_cast<uint32_t>(wr.sgl.size());
    Sge* dst = qp.wqe_sges(idx);
    for (size_t k = 0; k < wr.sgl.size(); ++k) dst[k] = wr.sgl[k];
  }
  ++qp.sq_tail;

  if (qp.state == QpState::kErr || qp.state == QpState::kSqe) {
    // IBA 10.3 / 10.3: WRs posted to a QP in error complete with flush.
    flush_sq(qp);
    return 0;
  }
  sched_req(qp);
  return 0;
}

int Engine::Impl::post_recv(Qpn qpn, const RecvWr& wr) {
  const uint32_t s = qp_slot(qpn);
  if (s == kNone) return EINVAL;
  Qp& qp = qps_[s];
  if (qp.srq != kNone) return EINVAL;              // receives go to the SRQ
  if (qp.state == QpState::kReset) return EINVAL;  // IBA 10.3: RESET accepts no WRs
  if (wr.sgl.size() > qp.rq.max_sge() || wr.sgl.size() > qp.cap.max_recv_sge) return EINVAL;
  if (qp.rq.full()) return ENOMEM;
  qp.rq.push(wr);
  if (qp.state == QpState::kErr) flush_rq(qp);
  return 0;
}

int Engine::Impl::post_srq_recv(Handle h, const RecvWr& wr) {
  const uint32_t s = srq_slot(h);
  if (s == kNone) return EINVAL;
  Srq& srq = srqs_[s];
  if (wr.sgl.size() > srq.rq.max_sge()) return EINVAL;
  if (srq.rq.full()) return ENOMEM;
  srq.rq.push(wr);
  return 0;
}

}  // namespace sroce
