// Requester (IBA 9.7 for RC, 9.8 for UC and UD): turns send WQEs into
// request packets, one per poll, and rewinds for go-back-N retransmission.
//
// A WQE gets its PSNs when its first packet is built (first_psn..last_psn;
// a READ reserves one PSN per expected response packet, IBA 9.7). The
// PSNs of the queue are consecutive, so after a rewind the same WQEs get the
// same PSNs again.
#include <cstring>

#include "impl.h"

namespace sroce {

using namespace eng;

namespace {

uint8_t send_opcode(const SendWqe& w, bool first, bool last) {
  const bool imm = w.opcode == WrOpcode::kSendWithImm;
  const bool inv = w.opcode == WrOpcode::kSendWithInv;
  if (first && last)
    return imm ? SROCE_OP_SEND_ONLY_IMM : inv ? SROCE_OP_SEND_ONLY_INV : SROCE_OP_SEND_ONLY;
  if (first) return SROCE_OP_SEND_FIRST;
  if (last) return imm ? SROCE_OP_SEND_LAST_IMM : inv ? SROCE_OP_SEND_LAST_INV : SROCE_OP_SEND_LAST;
  return SROCE_OP_SEND_MIDDLE;
}

uint8_t write_opcode(const SendWqe& w, bool first, bool last) {
  const bool imm = w.opcode == WrOpcode::kRdmaWriteWithImm;
  if (first && last) return imm ? SROCE_OP_WRITE_ONLY_IMM : SROCE_OP_WRITE_ONLY;
  if (first) return SROCE_OP_WRITE_FIRST;
  if (last) return imm ? SROCE_OP_WRITE_LAST_IMM : SROCE_OP_WRITE_LAST;
  return SROCE_OP_WRITE_MIDDLE;
}

uint8_t transport_bits(QpType t) {
  switch (t) {
    case QpType::kUc:
      return SROCE_TRANSPORT_UC;
    case QpType::kUd:
      return SROCE_TRANSPORT_UD;
    default:
      return SROCE_TRANSPORT_RC;
  }
}

// The UDP source port of a UD send. RoCEv2 NICs derive it from the address vector's flow
// label when that is set (Linux's rdma_flow_label_to_udp_sport: the low 14 bits XOR the high
// 6, in 0xC000..0xFFFF, the range of A17.5.1.1), so a UD program chooses the ECMP path of each
// datagram by its AH, as pingmesh does (docs/pingmesh.md); label 0 keeps the QP's own port.
uint16_t ud_src_port(uint16_t qp_port, uint32_t flow_label) {
  if ((flow_label & 0xfffff) == 0) return qp_port;
  const uint32_t low = (flow_label & 0x3fff) ^ ((flow_label & 0xfc000) >> 14);
  return static_cast<uint16_t>(0xc000 | low);
}

}  // namespace

// PSN the requester must go back to for the oldest incomplete WQE.
uint32_t Engine::Impl::req_resume_psn(Qp& qp) {
  if (qp.sq_head == qp.sq_tail || !qp.wqe(qp.sq_head).started) return qp.req_psn;
  const SendWqe& w = qp.wqe(qp.sq_head);
  if (w.opcode == WrOpcode::kRdmaRead)
    return psn_add(w.first_psn, static_cast<int32_t>(w.resp_bytes / qp.mtu));
  if (is_atomic(w.opcode)) return w.first_psn;
  const uint32_t next_unacked = psn_add(qp.acked_psn, 1);
  return psn_diff(next_unacked, w.first_psn) > 0 ? next_unacked : w.first_psn;
}

// Go back (or forward) to `psn` (IBA 9.7: go-back-N from
// the NAKed, RNR NAKed or timed-out PSN). WQEs keep the PSNs they were given,
// so only the cursor moves.
void Engine::Impl::req_rewind(Qp& qp, uint32_t psn) {
  uint32_t i = qp.sq_head;
  for (; i != qp.sq_tail && qp.wqe(i).started; ++i) {
    const SendWqe& w = qp.wqe(i);
    if (psn_diff(psn, w.first_psn) >= 0 && psn_diff(psn, w.last_psn) <= 0) break;
  }
  if (i == qp.sq_tail || !qp.wqe(i).started) return;  // nothing sent at psn
  SendWqe& w = qp.wqe(i);
  qp.sq_next = i;
  qp.pkts_since_ackreq = 0;
  qp.req_off = qp.req_sge = qp.req_sge_off = 0;
  if (w.err != WcStatus::kSuccess) {
    qp.req_psn = psn_add(w.last_psn, 1);
  } else if (w.opcode == WrOpcode::kRdmaRead) {
    qp.req_psn = psn_add(w.first_psn, static_cast<int32_t>(w.resp_bytes / qp.mtu));
  } else if (is_atomic(w.opcode)) {
    qp.req_psn = w.first_psn;
  } else {
    qp.req_psn = psn;
    qp.req_off = static_cast<uint32_t>(psn_diff(psn, w.first_psn)) * qp.mtu;
    if (!(w.flags & kWqeInline))
      seek_cursor(qp.wqe_sges(i), w.num_sge, qp.req_off, &qp.req_sge, &qp.req_sge_off);
  }
}

// Lossy mode first resends the PSNs the receiver asked for (or an RTO
// marked), one per call, then continues with new packets.
size_t Engine::Impl::req_build(Qp& qp, uint8_t* out, PacketMeta& meta, Time now) {
  // Lossy READs: requests for exactly the missing response PSNs (lossy_read.cc).
  if (qp.lossy.tx && qp.lossy.rd_ask_n > 0 && qp.state == QpState::kRts) {
    if (const size_t n = lossy_read_rerequest(qp, out, meta, now)) return n;
  }
  if (qp.lossy.tx && qp.lossy.rtx_count > 0) {
    if (const size_t n = lossy_retransmit(qp, out, meta, now)) return n;
  }
  if (qp.lossy.compat_rewind) lossy_rewind_stop(qp);  // docs/lossy.md: mid-stream switch
  // Going back N passes READs and atomics answered already (lossy READs
  // complete out of order), and asks for just the missing responses of an
  // unfinished lossy READ instead of sending its request again (lossy_read.cc).
  while (qp.sq_next != qp.sq_tail && qp.wqe(qp.sq_next).started &&
         is_rd_atomic(qp.wqe(qp.sq_next).opcode) && psn_diff(qp.req_psn, qp.high_psn) < 0) {
    SendWqe& w = qp.wqe(qp.sq_next);
    if (!w.done && !lossy_read_sel(qp, w)) break;
    if (!w.done) lossy_read_ask_range(qp, w.first_psn, psn_add(w.last_psn, 1), true);
    qp.req_psn = psn_add(w.last_psn, 1);
    qp.req_off = qp.req_sge = qp.req_sge_off = 0;
    ++qp.sq_next;
    if (qp.lossy.rd_ask_n > 0 && qp.state == QpState::kRts)
      if (const size_t n = lossy_read_rerequest(qp, out, meta, now)) return n;
  }
  return req_build_one(qp, out, meta, now);
}

size_t Engine::Impl::req_build_one(Qp& qp, uint8_t* out, PacketMeta& meta, Time now) {
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return 0;
  if (qp.rnr_wait || qp.sq_next == qp.sq_tail) return 0;
  // BIND_MW / LOCAL_INV move no packet: run them here, in order (mw.cc).
  if (!req_local_ops(qp) || qp.sq_next == qp.sq_tail) return 0;
  const uint32_t idx = qp.sq_next;
  SendWqe& w = qp.wqe(idx);
  const bool rc = qp.is_rc();

  if (!w.started) {
    // IBA 10.3: in SQD no new WQE is started; the one in progress finishes.
    if (qp.state == QpState::kSqd) return 0;
    if (rc) {
      // Fence (IBA 10.8): wait until every earlier READ/atomic completed.
      if ((w.flags & kWqeFence) && qp.rd_atomic_inflight > 0) return 0;
      // IBA 9.4 / 11.2 max_rd_atomic: outstanding READ/atomic limit.
      if (is_rd_atomic(w.opcode) && qp.rd_atomic_inflight >= qp.max_rd_atomic) return 0;
      // Lossy READs (lossy_read.cc): the responses in flight stay inside the
      // requester's 256-PSN response ring (IRN bounds its window likewise);
      // beyond it they would be dropped and asked for again.
      uint32_t base;
      if (w.opcode == WrOpcode::kRdmaRead && qp.lossy.tx && lossy_read_base(qp, &base) &&
          psn_diff(psn_add(qp.req_psn, static_cast<int32_t>(npackets(w.length, qp.mtu))), base) >
              static_cast<int32_t>(kLossyWindow))
        return 0;
    }
    if (w.err == WcStatus::kSuccess && !(w.flags & kWqeInline)) {
      // IBA 10.6: local buffers need a valid L_Key of the QP's PD; READ
      // and atomic results are written locally, so those need LOCAL_WRITE.
      const uint32_t need = is_rd_atomic(w.opcode) ? uint32_t{kAccessLocalWrite} : 0u;
      if (check_local_sgl(qp, qp.wqe_sges(idx), w.num_sge, need, qp.wqe_hosts(idx),
                          qp.wqe_refs(idx)) !=
          MemStatus::kOk)
        w.err = WcStatus::kLocProtErr;
    }
    // Lossy mode switches at a message boundary (docs/lossy.md, negotiation).
    if (rc && qp.lossy.offer && !qp.lossy.tx && !lossy_tx_gate(qp)) return 0;
    w.started = true;
    w.done = false;
    const bool takes_rwqe = w.opcode == WrOpcode::kSend || w.opcode == WrOpcode::kSendWithImm ||
                            w.opcode == WrOpcode::kSendWithInv ||
                            w.opcode == WrOpcode::kRdmaWriteWithImm;
    if (rc && takes_rwqe && w.err == WcStatus::kSuccess) {
      w.rsn = qp.lossy.rsn_next;
      qp.lossy.rsn_next = (qp.lossy.rsn_next + 1) & kPsnMask;
    }
    w.counted = false;
    w.resp_bytes = 0;
    w.first_psn = qp.req_psn;
    w.lossy = rc && lossy_psn(qp, w.first_psn);
    const uint32_t n = w.err != WcStatus::kSuccess         ? 0
                       : is_atomic(w.opcode) || qp.is_ud() ? 1
                                                           : npackets(w.length, qp.mtu);
    w.last_psn = psn_add(w.first_psn, static_cast<int32_t>(n) - 1);
    qp.req_off = qp.req_sge = qp.req_sge_off = 0;
  }
  if (w.err != WcStatus::kSuccess) {
    // The requester stops at a failed WQE; it completes with the error once
    // everything before it has completed (completions stay in order).
    if (qp.sq_head == idx) req_fatal(qp, w.err);
    return 0;
  }
  // Go-back-N window (compatible mode): bounded unacknowledged PSNs; lossy
  // mode also stays inside the receiver's window, and so does a QP that may
  // still switch (docs/lossy.md, negotiation: the compatible PSNs in flight at
  // the switch are resent through the lossy ring) until the peer shows it
  // never will (a packet without CAP).
  uint32_t window = cfg_.max_unacked_psns;
  if (qp.lossy.tx || (qp.lossy.offer && !qp.lossy.peer_nocap))
    window = std::min(cfg_.max_unacked_psns, kLossyWindow);
  if (!qp.lossy.tx && qp.timeout_probe)
    window = 1;  // qp.h: one packet after a local ACK timeout
  if (rc && psn_diff(qp.req_psn, psn_add(qp.acked_psn, 1)) >= static_cast<int32_t>(window))
    return 0;

  const uint32_t psn = qp.req_psn;
  const bool first = psn == w.first_psn && qp.req_off == 0;
  bool last = true;
  uint32_t payload = 0;
  sroce_bth bth{};
  bth.pkey = qp.pkey;
  bth.dqpn = qp.is_ud() ? w.remote_qpn : qp.attr.dest_qp_num;
  bth.psn = psn;
  uint8_t* h = out + SROCE_BTH_LEN;
  uint32_t next_psn = psn_add(psn, 1);
  bool wqe_sent = false;
  uint32_t crc_reg;
  uint32_t* const data_crc = fused_crc(crc_reg);  // the payload's CRC while gathering it

  switch (w.opcode) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
    case WrOpcode::kSendWithInv:
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm: {
      const bool is_send = w.opcode == WrOpcode::kSend || w.opcode == WrOpcode::kSendWithImm ||
                           w.opcode == WrOpcode::kSendWithInv;
      payload = std::min(qp.mtu, w.length - qp.req_off);
      last = psn == w.last_psn;
      bth.opcode = is_send ? send_opcode(w, first, last) : write_opcode(w, first, last);
      if (qp.is_ud()) {
        sroce_deth d{w.remote_qkey, qp.qpn};
        sroce_deth_write(h, &d);
        h += SROCE_DETH_LEN;
      }
      if (!is_send && first) {
        sroce_reth r{w.remote_addr, w.rkey, w.length};
        sroce_reth_write(h, &r);
        h += SROCE_RETH_LEN;
      }
      if (last && (w.opcode == WrOpcode::kSendWithImm || w.opcode == WrOpcode::kRdmaWriteWithImm ||
                   w.opcode == WrOpcode::kSendWithInv)) {
        sroce_put_be32(h, w.imm);  // ImmDt or IETH: both one 32-bit field
        h += 4;
      }
      bth.se =
          last && (w.flags & kWqeSolicited) && (is_send || w.opcode == WrOpcode::kRdmaWriteWithImm);
      const size_t hdr = static_cast<size_t>(h - out);
      if (payload) {
        const MemStatus ms = gather(qp, idx, reinterpret_cast<std::byte*>(out + hdr), payload, data_crc);
        if (ms != MemStatus::kOk) {
          // Local protection/access failure while reading the buffer.
          w.err = ms == MemStatus::kAccess ? WcStatus::kLocAccessErr : WcStatus::kLocProtErr;
          if (qp.sq_head == idx) req_fatal(qp, w.err);
          return 0;
        }
      }
      qp.req_off += payload;
      wqe_sent = last;
      break;
    }
    case WrOpcode::kRdmaRead: {
      // A READ resent after a rewind asks only for what has not arrived; its
      // PSN and RETH both come from resp_bytes now (responses may have come
      // in since the rewind).
      bth.opcode = SROCE_OP_READ_REQUEST;
      const uint32_t done = w.resp_bytes;
      bth.psn = psn_add(w.first_psn, static_cast<int32_t>(done / qp.mtu));
      sroce_reth r{w.remote_addr + done, w.rkey, w.length - done};
      sroce_reth_write(h, &r);
      h += SROCE_RETH_LEN;
      next_psn = psn_add(w.last_psn, 1);
      wqe_sent = true;
      break;
    }
    case WrOpcode::kAtomicCmpSwp:
    case WrOpcode::kAtomicFetchAdd: {
      const bool cas = w.opcode == WrOpcode::kAtomicCmpSwp;
      bth.opcode = cas ? SROCE_OP_CMP_SWAP : SROCE_OP_FETCH_ADD;
      sroce_atmeth a{w.remote_addr, w.rkey, cas ? w.swap : w.compare_add, cas ? w.compare_add : 0};
      sroce_atmeth_write(h, &a);
      h += SROCE_ATMETH_LEN;
      wqe_sent = true;
      break;
    }
    default:
      return 0;
  }
  bth.opcode = static_cast<uint8_t>(bth.opcode | transport_bits(qp.type));
  if (rc) {
    // IBA 9.2 / 9.7: AckReq on the last packet of a message, and periodically
    // so that a responder that only answers AckReq keeps the window moving.
    // qp.h: the probe after a local ACK timeout asks for its ACK.
    const bool probe = qp.timeout_probe && !qp.lossy.tx;
    bth.ack_req = wqe_sent || ++qp.pkts_since_ackreq >= cfg_.ack_every ||
                  cc_want_ack(*this, qp) ||  // congestion.h: feedback per packet
                  probe;
    if (bth.ack_req) qp.pkts_since_ackreq = 0;
  }
  bth.pad = static_cast<uint8_t>((4 - (payload & 3)) & 3);
  sroce_bth_write(out, &bth);
  const size_t hdr = static_cast<size_t>(h - out);
  if (rc && qp.lossy.offer) out[8] |= SROCE_BTH8_SROCE_CAP;  // docs/wire.md: lossy offer
  out[8] |= cc_bth_bits(*this, qp);                          // docs/wire.md: INT offer

  if (qp.is_ud()) {
    meta.src = gids_[w.ud.sgid_index < gids_.size() ? w.ud.sgid_index : 0];
    meta.dst = w.ud.dgid;
    meta.src_port = ud_src_port(qp.src_port, w.ud.flow_label);
    meta.dst_port = SROCE_UDP_PORT;
    meta.traffic_class = w.ud.traffic_class;
    meta.hop_limit = w.ud.hop_limit;
    meta.flow_label = w.ud.flow_label;
  } else {
    fill_meta(qp, meta);
  }
  const bool lossy = rc && lossy_psn(qp, bth.psn);  // docs/lossy.md: mid-stream switch
  const bool resend = psn_diff(bth.psn, qp.high_psn) < 0;
  uint8_t lane = 0;
  uint8_t trailer[SROCE_LEH_LEN];
  if (lossy) {
    // Lossy trailer (docs/wire.md): lane and per-lane sequence, and what a
    // packet needs to be placed out of order (IRN).
    lane = lossy_pick_lane(qp, now, resend);
    LaneTx& lt = qp.lossy.lanes[lane];
    sroce_leh_req l{};
    l.lane = lane;
    l.flags = static_cast<uint8_t>((resend ? SROCE_LEH_F_RETX : 0) |
                                   ((qp.lossy.nlanes - 1) << SROCE_LEH_LANES_SHIFT));
    l.lane_seq = lt.seq++;
    l.prev_psn = lt.has_prev ? (lt.prev_psn | SROCE_LEH_PSN_VALID) : 0;
    l.rsn = w.rsn;
    const uint32_t off =
        psn_diff(bth.psn, w.first_psn) >= 0 ? static_cast<uint32_t>(psn_diff(bth.psn, w.first_psn)) * qp.mtu : 0;
    l.offset = off;
    l.va = w.remote_addr + off;
    l.rkey = w.rkey;
    lossy_trailer_lanes(qp, lane, l);
    sroce_leh_req_write(trailer, &l);
    lt.prev_psn = bth.psn;
    lt.has_prev = true;
    out[8] |= SROCE_BTH8_SROCE_EXT;
    meta.src_port = lane_port(qp, lane);
    // Lane weights read CE marks per lane: ECT(0) (RFC 3168; docs/lossy.md).
    if (cfg_.lossy.lane_weights)
      meta.traffic_class = static_cast<uint8_t>((meta.traffic_class & ~3u) | 2u);
  }
  const size_t len = finish_packet(out, hdr, payload, meta, lossy ? trailer : nullptr, data_crc);
  if (lossy) {
    lossy_on_sent(qp, bth.psn, lane, resend, now);
    cc_lane_sent(*this, qp, lane, bth.psn, payload, len, resend, now);  // per-lane controller
  }
  if (rc) cc_on_sent(*this, qp, bth.psn, payload, len, resend, meta, now);

  if (rc) {
    if (psn_diff(psn, qp.high_psn) < 0) {
      ++qp.stats.retransmits;
      ++stats_.retransmits;
    }
    if (psn_diff(next_psn, qp.high_psn) > 0) qp.high_psn = next_psn;
  }
  qp.req_psn = next_psn;
  if (wqe_sent) {
    ++qp.sq_next;
    if (rc && qp.sq_next == qp.sq_tail) cc_on_drained(*this, qp, now);
    qp.req_off = qp.req_sge = qp.req_sge_off = 0;
    if (rc && is_rd_atomic(w.opcode) && !w.counted) {
      w.counted = true;
      ++qp.rd_atomic_inflight;
    }
    if (!rc) {
      // UC/UD: no acknowledgement; the WQE is complete once sent (IBA 9.8).
      ++qp.sq_head;
      complete_send(qp, w, WcStatus::kSuccess);
      check_sq_drained(qp);
    }
  }
  if (rc) {
    // IBA 9.7: the local ACK timer times a sent request. When this packet is
    // the oldest unacknowledged one (the first after the pacer held the QP,
    // or the resend after a rewind), the timer starts now: armed at the ACK
    // before it, it would give the packet only the timeout less the pacing
    // gap (issue 17: retry exceeded at low rates). Lossy mode times its
    // resends with backoff (lossy_on_rto).
    if (!qp.lossy.tx && qp.ack_timeout.ps != 0 && !qp.rnr_wait && psn == psn_add(qp.acked_psn, 1))
      qp.retx_deadline = Time::never();
    comp_arm_retx(qp, now);
  }
  return len;
}

}  // namespace sroce
