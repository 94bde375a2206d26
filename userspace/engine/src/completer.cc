// Completer (IBA 9.7, requester side of the responses): ACKs retire WQEs
// in order, NAKs and timeouts rewind the requester (go-back-N), READ
// responses and atomic ACKs deliver data, errors end the QP.
#include <cstring>

#include "impl.h"

namespace sroce {

using namespace eng;

namespace {

bool outstanding(Qp& qp) {
  return qp.sq_head != qp.sq_next || (qp.sq_next != qp.sq_tail && qp.wqe(qp.sq_next).started);
}

}  // namespace

void Engine::Impl::comp_arm_retx(Qp& qp, Time now) {
  if (qp.retx_deadline != Time::never() || qp.ack_timeout.ps == 0 || qp.rnr_wait) return;
  qp.retx_deadline = now + qp.ack_timeout;
  timer_update(qp);
}

// Forward progress: the retry counters start over (IBA 9.7: the
// counts apply to retries of the same request) and the ACK timer restarts.
void Engine::Impl::comp_progress(Qp& qp, Time now) {
  qp.retry_left = qp.attr.retry_cnt;
  qp.rnr_left = qp.attr.rnr_retry;
  qp.lossy.rto_backoff = 0;
  qp.timeout_probe = false;  // the responder answers: the window opens again
  qp.retx_deadline = Time::never();
  if (outstanding(qp)) comp_arm_retx(qp, now);
  check_sq_drained(qp);
  sched_req(qp);
}

// Completes the head WQE successfully. If the requester had been rewound to
// it (or before it), the acknowledgement proves the responder has it all:
// move the requester past it instead of sending it again.
static void retire_head(Engine::Impl& e, Qp& qp) {
  SendWqe& w = qp.wqe(qp.sq_head);
  if (w.counted && qp.rd_atomic_inflight > 0) --qp.rd_atomic_inflight;
  const bool passed_next = qp.sq_head == qp.sq_next;
  ++qp.sq_head;
  if (passed_next) {
    qp.sq_next = qp.sq_head;
    const uint32_t after = psn_add(w.last_psn, 1);
    if (psn_diff(after, qp.req_psn) > 0) qp.req_psn = after;
    qp.req_off = qp.req_sge = qp.req_sge_off = 0;
  }
  e.complete_send(qp, w, WcStatus::kSuccess);
}

// Everything up to and including `psn` is acknowledged (an ACK, or implied by
// a NAK or a response at psn + 1). Completes WQEs in order (IBA 10.8).
void Engine::Impl::comp_retire(Qp& qp, uint32_t psn, Time now) {
  bool progress = false;
  const uint32_t acked_before = qp.acked_psn;
  if (psn_diff(psn, qp.acked_psn) > 0 && psn_diff(psn, qp.high_psn) < 0) {
    qp.acked_psn = psn;
    progress = true;
  }
  if (!qp.lossy.rd_evidence && psn_diff(psn, qp.lossy.ack_seen) > 0 &&
      psn_diff(psn, qp.high_psn) < 0)
    qp.lossy.ack_seen = psn;
  while (qp.sq_head != qp.sq_tail && qp.state != QpState::kErr) {
    SendWqe& w = qp.wqe(qp.sq_head);
    if (!w.started) break;
    if (w.err != WcStatus::kSuccess) {
      req_fatal(qp, w.err);
      return;
    }
    if (is_rd_atomic(w.opcode)) {
      if (w.done) {
        retire_head(*this, qp);
        progress = true;
        continue;
      }
      // IBA 9.7 (implied NAK): an acknowledgement beyond an unanswered READ/atomic
      // (for a later request) means its response was lost (implied NAK):
      // request it again. Responses within the READ move acked_psn inside it.
      // Only an acknowledgement that is news counts (duplicate ACKs follow
      // every go-back-N), and only once per WQE until a timeout.
      // Lossy READs (lossy_read.cc): the responses come over several lanes,
      // so an acknowledgement may overtake them; their own loss rules and
      // the response timer decide, and ask for exactly what is missing.
      if (lossy_read_sel(qp, w)) {
        if (progress && qp.lossy.rd_deadline == Time::never()) lossy_read_arm(qp, now);
        break;
      }
      // In lossy mode only what came on lane 0 (ACKs, atomic ACKs, compatible
      // responses) counts: a lossy READ response may overtake them.
      const uint32_t seen = qp.lossy.tx ? qp.lossy.ack_seen : qp.acked_psn;
      if (progress && qp.lossy.tx && qp.lossy.rd_deadline == Time::never() &&
          psn_diff(qp.acked_psn, w.last_psn) >= 0)
        lossy_read_arm(qp, now);  // lossy_read.cc: maybe overtaken, wait a window
      if (progress && psn_diff(seen, w.last_psn) >= 0 && !qp.lossy.rd_evidence &&
          !(qp.implied_valid && qp.implied_idx == qp.sq_head)) {
        qp.implied_valid = true;
        qp.implied_idx = qp.sq_head;
        comp_retry(qp, req_resume_psn(qp), now, true);
      }
      break;
    }
    if (psn_diff(w.last_psn, qp.acked_psn) > 0) break;
    retire_head(*this, qp);
    progress = true;
  }
  if (progress && qp.state != QpState::kErr) {
    cc_on_acked(*this, qp, acked_before, now);  // congestion.h
    comp_progress(qp, now);
  }
}

// Retransmit from `psn` (NAK sequence error, implied NAK, timeout), counted
// against retry_cnt (IBA 9.7 / 11.2; 7 is not infinite for retry_cnt).
void Engine::Impl::comp_retry(Qp& qp, uint32_t psn, Time now, bool count) {
  if (count) {
    if (qp.retry_left == 0) {
      req_fatal(qp, WcStatus::kRetryExcErr);
      return;
    }
    --qp.retry_left;
  }
  // docs/lossy.md: after a mid-stream switch only the compatible PSNs go back.
  if (!lossy_resend_compat(qp, psn)) req_rewind(qp, psn);
  qp.retx_deadline = Time::never();
  if (outstanding(qp) || qp.sq_next != qp.sq_tail) {
    if (qp.ack_timeout.ps != 0) {
      qp.retx_deadline = now + qp.ack_timeout;
      timer_update(qp);
    }
  }
  sched_req(qp);
}

void Engine::Impl::comp_on_timer(Qp& qp, Time now) {
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return;
  if (qp.rnr_wait && qp.rnr_deadline <= now) {
    // IBA 9.7 (RNR): after the RNR timer, resend from the RNR NAKed PSN.
    qp.rnr_wait = false;
    qp.rnr_deadline = Time::never();
    // Lossy mode resends only what the receiver has not SACKed from there
    // (packets after the RNR PSN were placed); compatible mode goes back N.
    if (!qp.lossy.tx || lossy_mark_unsacked(qp, qp.rnr_psn) == 0) req_rewind(qp, qp.rnr_psn);
    qp.retx_deadline = Time::never();
    comp_arm_retx(qp, now);
    sched_req(qp);
  }
  if (qp.retx_deadline <= now) {
    qp.retx_deadline = Time::never();
    if (!outstanding(qp)) return;
    if (cc_nothing_in_flight(*this, qp)) return;  // congestion.h: paced, not lost
    // IBA 9.7 (local ACK timeout): go back to the oldest unacknowledged PSN.
    ++qp.stats.timeouts;
    ++stats_.timeouts;
    cc_on_loss(*this, qp, cc::LossKind::kTimeout, now);
    // Lossy mode resends only what the receiver has not SACKed, with
    // exponential backoff (docs/lossy.md); compatible mode goes back N.
    if (qp.lossy.tx) return lossy_on_rto(qp, now);
    lossy_rehash(qp);  // docs/lossy.md: a new path after a timeout
    qp.implied_valid = false;
    // Go back N, one packet first (qp.h, timeout_probe): a timeout says no response
    // came, not that the window was lost. The responder ACKs the probe (AckReq) or
    // answers it as a duplicate with the PSN it has reached; the rest follows once it
    // did. Resending the whole window instead drew one ACK per duplicate from rxe into
    // a receive queue already too long to drain before the next timeout, until
    // retry_cnt ran out (docs/interop.md).
    qp.timeout_probe = true;
    comp_retry(qp, req_resume_psn(qp), now, true);
  }
}

void Engine::Impl::comp_on_response(Qp& qp, const sroce_pkt& pkt, Time now) {
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd) {
    ++qp.stats.rx_dropped;
    ++stats_.rx_dropped;
    ++stats_.rx_drop_reason[kRxDropQpState];
    return;
  }
  const uint32_t psn = pkt.bth.psn;
  const uint8_t op = pkt.bth.opcode & 0x1f;
  auto drop = [&] {
    ++qp.stats.rx_dropped;
    ++stats_.rx_dropped;
    ++stats_.rx_drop_reason[kRxDropUnexpectedResponse];
  };
  // A response must answer something sent: psn < high_psn.
  if (psn_diff(psn, qp.high_psn) >= 0) return drop();

  if (op == SROCE_OP_ACK) {
    const uint8_t syn = pkt.aeth.syndrome;
    // A NAK (or RNR NAK) names the PSN that failed; one at or before acked_psn is about a
    // request already acknowledged, answered late or for a duplicate (a resent READ the
    // responder could no longer serve, say): stale, it must not rewind or end the QP
    // (IBA 9.7.5.1.1: a response for a PSN already completed is a duplicate, dropped).
    if (sroce_aeth_type(syn) != SROCE_AETH_ACK && psn_diff(psn, qp.acked_psn) <= 0) {
      ++stats_.stale_naks;
      return drop();
    }
    switch (sroce_aeth_type(syn)) {
      case SROCE_AETH_ACK:
        ++qp.stats.acks_received;
        comp_retire(qp, psn, now);
        return;
      case SROCE_AETH_RNR_NAK: {
        ++qp.stats.rnr_naks_received;
        ++stats_.rnr_naks_received;
        comp_retire(qp, psn_add(psn, -1), now);
        if (qp.state == QpState::kErr || qp.rnr_wait) return;
        // IBA 11.2: rnr_retry 7 retries forever.
        if (qp.rnr_left == 0) {
          req_fatal(qp, WcStatus::kRnrRetryExcErr);
          return;
        }
        if (qp.rnr_left != 7) --qp.rnr_left;
        qp.rnr_wait = true;
        qp.rnr_psn = psn;
        qp.rnr_deadline = now + rnr_timer_duration(sroce_aeth_value(syn));
        qp.retx_deadline = Time::never();
        timer_update(qp);
        return;
      }
      case SROCE_AETH_NAK: {
        ++qp.stats.naks_received;
        ++stats_.naks_received;
        if (const uint8_t code = sroce_aeth_value(syn); code < kNakCodes)
          ++stats_.naks_received_by_code[code];
        comp_retire(qp, psn_add(psn, -1), now);
        if (qp.state == QpState::kErr) return;
        switch (sroce_aeth_value(syn)) {
          case SROCE_NAK_PSN_SEQ_ERR:
            // IBA 9.7: go back to the PSN the responder expects.
            ++qp.stats.seq_naks_received;
            if (qp.rnr_wait) {
              // IBA 9.7.5: while the RNR timer runs, a sequence NAK for the RNR NAKed PSN
              // (rxe sends one for the rest of each resent window, docs/interop.md "RNR")
              // says nothing new: the resend after the timer starts there. No retry, no
              // rewind. One beyond it means the responder has moved past the RNR PSN.
              if (psn_diff(psn, qp.rnr_psn) <= 0) return;
              qp.rnr_wait = false;
              qp.rnr_deadline = Time::never();
            }
            qp.timeout_probe = false;  // the responder said where to resume
            cc_on_loss(*this, qp, cc::LossKind::kNak, now);
            comp_retry(qp, psn, now, true);
            return;
          case SROCE_NAK_INVALID_REQ:
            req_fatal(qp, WcStatus::kRemInvReqErr);
            return;
          case SROCE_NAK_REMOTE_ACCESS:
            req_fatal(qp, WcStatus::kRemAccessErr);
            return;
          case SROCE_NAK_REMOTE_OP:
            req_fatal(qp, WcStatus::kRemOpErr);
            return;
          case SROCE_NAK_INVALID_RD_REQ:
            req_fatal(qp, WcStatus::kRemInvRdReqErr);
            return;
          default:
            return drop();  // reserved NAK code (IBA table 43)
        }
      }
      default:
        return drop();
    }
  }

  // READ response or atomic ACK: it answers the READ/atomic WQE whose PSNs
  // contain it, and implies ACKs for every request before that WQE (IBA
  // 9.7: responses are in PSN order). Not for PSNs inside the READ itself:
  // those count only when the data arrives in order.
  uint32_t idx = qp.sq_head;
  for (; idx != qp.sq_tail && qp.wqe(idx).started; ++idx) {
    const SendWqe& c = qp.wqe(idx);
    if (psn_diff(psn, c.first_psn) >= 0 && psn_diff(psn, c.last_psn) <= 0) break;
  }
  if (idx == qp.sq_tail || !qp.wqe(idx).started || !is_rd_atomic(qp.wqe(idx).opcode)) return drop();
  SendWqe& w = qp.wqe(idx);
  comp_retire(qp, psn_add(w.first_psn, -1), now);
  // An atomic ACK may overtake the sprayed responses of an earlier lossy
  // READ (lossy_read.cc): it is taken; completion still waits in order.
  const bool ahead_ok = op == SROCE_OP_ATOMIC_ACK && qp.lossy.tx && w.lossy;
  if (qp.state == QpState::kErr || (qp.sq_head != idx && !ahead_ok) || w.done) return drop();
  if (w.opcode == WrOpcode::kRdmaRead && lossy_read_sel(qp, w)) return drop();  // needs a trailer

  if (op == SROCE_OP_ATOMIC_ACK) {
    if (!is_atomic(w.opcode)) return drop();
    ++qp.stats.acks_received;
    // The original value lands in the local buffer in host order (verbs).
    std::byte v[8];
    std::memcpy(v, &pkt.atmack, 8);
    const MemStatus ms = scatter_wqe(qp, idx, 0, v, 8);
    if (ms != MemStatus::kOk) {
      req_fatal(qp, ms == MemStatus::kAccess ? WcStatus::kLocAccessErr : WcStatus::kLocProtErr);
      return;
    }
    w.done = true;
    comp_retire(qp, qp.sq_head == idx ? psn : psn_add(w.first_psn, -1), now);
    return;
  }

  // READ response (IBA 9.7: responses come in PSN order).
  if (w.opcode != WrOpcode::kRdmaRead) return drop();
  const uint32_t expect = psn_add(w.first_psn, static_cast<int32_t>(w.resp_bytes / qp.mtu));
  if (psn != expect) {
    // Out of order: a response was lost or is late. Drop it (as rxe does);
    // the ACK timer asks again for what is missing. Asking at once on every
    // gap would, under reordering, restart the response stream again and
    // again, each restart making new gaps out of the previous stream.
    ++stats_.rx_drop_reason[kRxDropOutOfSequence];
    ++stats_.rx_dropped;
    ++qp.stats.rx_dropped;
    return;
  }
  const uint32_t left = w.length - w.resp_bytes;
  const bool last = psn == w.last_psn;
  const uint32_t want = last ? left : qp.mtu;
  const uint8_t* payload = pkt.payload;
  if (pkt.payload_len != want) {
    req_fatal(qp, WcStatus::kBadRespErr);  // IBA 9.9: malformed response
    return;
  }
  if (want) {
    const MemStatus ms =
        scatter_wqe(qp, idx, w.resp_bytes, reinterpret_cast<const std::byte*>(payload), want);
    if (ms != MemStatus::kOk) {
      req_fatal(qp, ms == MemStatus::kAccess ? WcStatus::kLocAccessErr : WcStatus::kLocProtErr);
      return;
    }
  }
  w.resp_bytes += want;
  if (last) {
    w.done = true;
    comp_retire(qp, psn, now);
  } else {
    // In-order data is progress (even when an ACK for a later request has
    // already moved acked_psn past this READ): retry counts start over and
    // the timer restarts.
    if (psn_diff(psn, qp.acked_psn) > 0) qp.acked_psn = psn;
    comp_progress(qp, now);
  }
}

}  // namespace sroce
