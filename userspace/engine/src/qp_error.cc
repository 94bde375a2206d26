// Completions, and the ways a QP stops: entering ERR (IBA 10.3: every
// outstanding WQE completes with WR_FLUSH_ERR), a fatal requester error
// (the failing WQE completes with its status first, IBA 10.8 / 11.4),
// reset (the QP's own WQEs vanish without completions; SRQ WQEs it held go
// back to the SRQ), and SQD drain notification.
#include <algorithm>

#include "impl.h"

namespace sroce {

using namespace eng;

namespace {

WcOpcode wc_opcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead:
      return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpSwp:
      return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAdd:
      return WcOpcode::kFetchAdd;
    case WrOpcode::kLocalInv:
      return WcOpcode::kLocalInv;
    case WrOpcode::kBindMw:
      return WcOpcode::kBindMw;
    default:
      return WcOpcode::kSend;
  }
}

}  // namespace

// IBA 10.8 / 11.4: a completion is generated for a signaled WR, and for
// every WR that completes in error, signaled or not.
void Engine::Impl::complete_send(Qp& qp, SendWqe& w, WcStatus status) {
  ++qp.stats.send_wqes_completed;
  if (status == WcStatus::kSuccess && !(w.flags & kWqeSignaled)) return;
  Wc wc;
  wc.wr_id = w.wr_id;
  wc.status = status;
  wc.opcode = wc_opcode(w.opcode);
  wc.byte_len = w.length;
  wc.qp_num = qp.qpn;
  cq_push(qp.send_cq, wc, false);
}

void Engine::Impl::complete_recv(Qp& qp, const Wc& wc, bool solicited) {
  ++qp.stats.recv_wqes_completed;
  cq_push(qp.recv_cq, wc, solicited);
}

void Engine::Impl::flush_sq(Qp& qp) {
  for (uint32_t i = qp.sq_head; i != qp.sq_tail; ++i)
    complete_send(qp, qp.wqe(i), WcStatus::kWrFlushErr);
  qp.sq_head = qp.sq_next = qp.sq_tail;
  qp.req_off = qp.req_sge = qp.req_sge_off = 0;
  qp.rd_atomic_inflight = 0;
}

void Engine::Impl::complete_recv_flushed(Qp& qp, uint64_t wr_id) {
  Wc wc;
  wc.wr_id = wr_id;
  wc.status = WcStatus::kWrFlushErr;
  wc.opcode = WcOpcode::kRecv;
  wc.qp_num = qp.qpn;
  complete_recv(qp, wc, false);
}

void Engine::Impl::flush_rq(Qp& qp) {
  if (qp.rwqe_active) {  // taken from the RQ/SRQ, not completed yet
    complete_recv_flushed(qp, qp.rwqe_id);
    qp.rwqe_active = false;
  }
  // With an SRQ, the RQ holds only the WQEs this QP took off the SRQ for
  // messages still incomplete (lossy mode): flushed here as the one in
  // progress is; the SRQ's own WQEs stay (IBA 10.2).
  while (!qp.rq.empty()) {
    complete_recv_flushed(qp, qp.rq.front().wr_id);
    qp.rq.pop();
  }
}

// A QP on an SRQ that leaves RTS for RESET, or is destroyed, without passing
// through ERR has used none of the SRQ WQEs it holds (the one in progress, and
// in lossy mode those taken for early SENDs, lossy_rx.cc): they go back to the
// front of the SRQ for the QPs that share it, as if never taken. Without this a
// reset lost up to kLossyWindow of the application's receive buffers, with no
// completion to say so. A WQE that no longer fits (the SRQ was refilled
// meanwhile) is appended to `lost` for the caller to flush.
void Engine::Impl::return_srq_wqes(Qp& qp, std::vector<uint64_t>* lost) {
  if (qp.srq == kNone) return;
  RecvQueue& srq = srqs_[qp.srq].rq;
  const size_t first_lost = lost ? lost->size() : 0;
  for (uint32_t k = qp.rq.count(); k-- > 0;)
    if (!srq.push_front(qp.rq.at(k), qp.rq.sges_at(k)) && lost) lost->push_back(qp.rq.at(k).wr_id);
  qp.rq.clear();
  if (qp.rwqe_active) {
    const RecvWqe w{qp.rwqe_id, qp.rwqe_nsge, qp.rwqe_len};
    if (!srq.push_front(w, qp.rwqe_sge.data()) && lost) lost->push_back(w.wr_id);
    qp.rwqe_active = false;
  }
  if (lost) std::reverse(lost->begin() + static_cast<std::ptrdiff_t>(first_lost), lost->end());  // oldest first
}

void Engine::Impl::qp_to_error(Qp& qp) {
  if (qp.state == QpState::kErr) return;
  qp.state = QpState::kErr;
  qp.attr.qp_state = QpState::kErr;
  cc_qp_stop(*this, qp);
  flush_sq(qp);
  flush_rq(qp);
  qp.in_msg = InMsg::kNone;
  qp.rnr_wait = false;
  qp.rnr_deadline = qp.retx_deadline = Time::never();
  if (!qp.ack_final) {
    qp.ack_pending = false;
    qp.res_tx = qp.res_alloc;
  }
  timer_remove(qp);
  // IBA 10.2 / 11.6: a QP on an SRQ that enters ERR reports
  // LAST_WQE_REACHED so that the consumer knows no more SRQ WQEs will be used.
  if (qp.srq != kNone) raise(AsyncEventType::kLastWqeReached, qp.qpn);
}

// A send WQE failed: it completes with `status`, then RC goes to ERR (IBA
// 10.3) while UC/UD go to SQE (IBA 10.3: the send queue is in error,
// the receive queue keeps working, SQE -> RTS resumes). Either way the rest of
// the send queue is flushed.
void Engine::Impl::req_fatal(Qp& qp, WcStatus status) {
  if (qp.state == QpState::kErr || qp.state == QpState::kSqe) return;
  if (qp.sq_head != qp.sq_tail) {
    SendWqe& w = qp.wqe(qp.sq_head);
    complete_send(qp, w, status);
    ++qp.sq_head;
    if (qp.sq_next - qp.sq_head > qp.sq_tail - qp.sq_head) qp.sq_next = qp.sq_head;
  }
  if (qp.is_rc()) return qp_to_error(qp);
  qp.state = qp.attr.qp_state = QpState::kSqe;
  flush_sq(qp);
  unsched(qp);
  if (qp.resp_has_output()) sched_resp(qp);
}

void Engine::Impl::reset_qp_state(Qp& qp) {
  unsched(qp);
  timer_remove(qp);
  qp.sq_head = qp.sq_next = qp.sq_tail = 0;
  qp.req_off = qp.req_sge = qp.req_sge_off = 0;
  qp.rd_atomic_inflight = 0;
  qp.pkts_since_ackreq = 0;
  qp.rq.clear();
  qp.rwqe_active = false;
  qp.in_msg = InMsg::kNone;
  qp.uc_drop = false;
  qp.nak_seq_sent = false;
  qp.ack_pending = qp.ack_final = false;
  qp.pkts_since_ack = 0;
  qp.res_alloc = qp.res_tx = 0;
  for (Resource& r : qp.res) r = Resource{};
  qp.rnr_wait = false;
  qp.rnr_deadline = qp.retx_deadline = Time::never();
  qp.implied_valid = false;
  qp.timeout_probe = false;
  qp.sqd_drained_sent = false;
  qp.comm_est_sent = false;
  lossy_reset_tx(qp);
  lossy_reset_rx(qp);
  cc_qp_stop(*this, qp);
  qp.stats.mode = QpMode::kCompatible;
}

// IBA 10.3 / 11.6: in SQD, once every WQE in progress has completed,
// raise SQ_DRAINED if the consumer asked for it.
void Engine::Impl::check_sq_drained(Qp& qp) {
  if (qp.state != QpState::kSqd || qp.sqd_drained_sent) return;
  if (qp.sq_head != qp.sq_next) return;
  if (qp.sq_next != qp.sq_tail && qp.wqe(qp.sq_next).started) return;
  qp.sqd_drained_sent = true;
  if (qp.sqd_notify) raise(AsyncEventType::kSqDrained, qp.qpn);
}

}  // namespace sroce
