// Responder (IBA 9.7 for RC, 9.8 for UC and UD): PSN and
// opcode-sequence checks, execution of SEND / RDMA WRITE / READ / atomic
// requests, duplicate handling, and the error classes that NAK and end the
// QP. The packets it answers with are built in resp_tx.cc.
#include <cstring>

#include "impl.h"
#include "proto/icrc.h"

namespace sroce {

using namespace eng;

namespace {

using Impl = Engine::Impl;

void count_drop(Impl& e, Qp& qp, RxDropReason r) {
  ++e.stats_.rx_dropped;
  ++e.stats_.rx_drop_reason[r];
  ++qp.stats.rx_dropped;
}

// Takes the next receive WQE from the QP's RQ or its SRQ (IBA 10.2); on an
// SRQ, first the ones the QP holds already (lossy mode, lossy_rx.cc).
bool take_rwqe(Impl& e, Qp& qp) {
  Srq* srq = qp.srq != kNone && qp.rq.empty() ? &e.srqs_[qp.srq] : nullptr;
  RecvQueue& rq = srq ? srq->rq : qp.rq;
  if (rq.empty()) return false;
  const RecvWqe& w = rq.front();
  qp.rwqe_id = w.wr_id;
  qp.rwqe_nsge = w.num_sge;
  qp.rwqe_len = w.length;
  std::memcpy(qp.rwqe_sge.data(), rq.front_sges(), sizeof(Sge) * w.num_sge);
  rq.pop();
  qp.rwqe_active = true;
  qp.recv_off = qp.recv_sge = qp.recv_sge_off = 0;
  if (srq) e.srq_check_limit(*srq, qp.srq);
  return true;
}

Wc recv_wc(const Qp& qp, WcStatus st) {
  Wc wc;
  wc.wr_id = qp.rwqe_id;
  wc.status = st;
  wc.opcode = WcOpcode::kRecv;
  wc.byte_len = qp.recv_off;
  wc.qp_num = qp.qpn;
  wc.src_qp = qp.attr.dest_qp_num;
  return wc;
}

// RC responder errors of IBA 9.9 classes B-D: NAK the request, complete
// the receive WQE in use with `recv_status` (if any), QP -> ERR, and raise
// the affiliated asynchronous error (IBA 11.6).
void rc_fatal(Impl& e, Qp& qp, uint8_t nak_code, uint32_t psn, AsyncEventType ev,
              WcStatus recv_status) {
  if (qp.rwqe_active && recv_status != WcStatus::kSuccess) {
    e.complete_recv(qp, recv_wc(qp, recv_status), false);
    qp.rwqe_active = false;
  }
  e.resp_nak(qp, sroce_aeth_syndrome(SROCE_AETH_NAK, nak_code), psn, true);
  e.qp_to_error(qp);
  e.raise(ev, qp.qpn);
}

// UC (IBA 9.8): errors are silent; drop the rest of the message. A receive
// WQE that was being filled is reused for the next message.
void uc_abort(Qp& qp) {
  qp.in_msg = InMsg::kNone;
  qp.uc_drop = true;
  qp.recv_off = qp.recv_sge = qp.recv_sge_off = 0;
}

void access_error(Impl& e, Qp& qp, uint32_t psn) {
  if (qp.is_rc())
    rc_fatal(e, qp, SROCE_NAK_REMOTE_ACCESS, psn, AsyncEventType::kQpAccessErr, WcStatus::kSuccess);
  else {
    count_drop(e, qp, kRxDropAccess);
    uc_abort(qp);
  }
}

void invalid_request(Impl& e, Qp& qp, uint32_t psn) {
  if (qp.is_rc())
    rc_fatal(e, qp, SROCE_NAK_INVALID_REQ, psn, AsyncEventType::kQpReqErr, WcStatus::kSuccess);
  else {
    count_drop(e, qp, kRxDropInvalid);
    uc_abort(qp);
  }
}

// The request was executed: move ePSN on and acknowledge (coalesced).
void accept(Impl& e, Qp& qp, const sroce_pkt& pkt) {
  qp.nak_seq_sent = false;
  if (qp.is_rc()) {
    qp.resp_psn = psn_add(pkt.bth.psn, 1);
    e.resp_ack(qp, pkt.bth.psn, pkt.bth.ack_req);
  }
}

// No receive WQE for a SEND or WRITE with immediate.
void no_rwqe(Impl& e, Qp& qp, uint32_t psn) {
  if (qp.is_rc()) {
    // IBA 9.7 (RNR NAK, timer encoding of table 45): RNR NAK carrying our min_rnr_timer; ePSN
    // stays, the requester resends this very packet after the timer.
    e.resp_nak(qp, sroce_aeth_syndrome(SROCE_AETH_RNR_NAK, qp.attr.min_rnr_timer), psn, false);
  } else {
    count_drop(e, qp, kRxDropNoRecvWqe);
    uc_abort(qp);
  }
}

void do_send(Impl& e, Qp& qp, const sroce_pkt& pkt, uint32_t f) {
  const uint32_t psn = pkt.bth.psn;
  if ((f & SROCE_IS_FIRST) && !qp.rwqe_active && !take_rwqe(e, qp)) return no_rwqe(e, qp, psn);
  if (f & SROCE_IS_FIRST) qp.recv_off = qp.recv_sge = qp.recv_sge_off = 0;
  const MemStatus ms =
      e.scatter_recv(qp, reinterpret_cast<const std::byte*>(pkt.payload), pkt.payload_len);
  if (ms != MemStatus::kOk) {
    const WcStatus st = ms == MemStatus::kLen      ? WcStatus::kLocLenErr
                        : ms == MemStatus::kAccess ? WcStatus::kLocAccessErr
                                                   : WcStatus::kLocProtErr;
    if (qp.is_rc()) {
      // Message longer than the receive buffer: LOC_LEN_ERR here, NAK
      // invalid request there (IBA 9.9, responder errors); a bad receive buffer is a
      // remote operational error for the requester.
      if (ms == MemStatus::kLen)
        rc_fatal(e, qp, SROCE_NAK_INVALID_REQ, psn, AsyncEventType::kQpReqErr, st);
      else
        rc_fatal(e, qp, SROCE_NAK_REMOTE_OP, psn, AsyncEventType::kQpFatal, st);
    } else {
      e.complete_recv(qp, recv_wc(qp, st), false);
      qp.rwqe_active = false;
      uc_abort(qp);
    }
    return;
  }
  if (f & SROCE_IS_LAST) {
    Wc wc = recv_wc(qp, WcStatus::kSuccess);
    if (f & SROCE_HAS_IMMDT) {
      wc.imm_data = pkt.imm;
      wc.wc_flags |= kWcWithImm;
    }
    if (f & SROCE_HAS_IETH) {
      // IBA 10.6 (remote invalidate): SEND with Invalidate invalidates the named R_Key.
      if (!e.remote_invalidate(qp, pkt.ieth_rkey))  // mw.cc: windows and MRs
        return rc_fatal(e, qp, SROCE_NAK_INVALID_REQ, psn, AsyncEventType::kQpReqErr,
                        WcStatus::kRemInvReqErr);
      wc.imm_data = pkt.ieth_rkey;
      wc.wc_flags |= kWcWithInv;
    }
    e.complete_recv(qp, wc, pkt.bth.se);
    qp.rwqe_active = false;
    qp.in_msg = InMsg::kNone;
    qp.msn = psn_add(qp.msn, 1);
    qp.lossy.rsn_commit = (qp.lossy.rsn_commit + 1) & kPsnMask;  // docs/lossy.md: RSN
  } else {
    qp.in_msg = InMsg::kSend;
  }
  accept(e, qp, pkt);
}

void do_write(Impl& e, Qp& qp, const sroce_pkt& pkt, uint32_t f) {
  const uint32_t psn = pkt.bth.psn;
  const uint32_t len = pkt.payload_len;
  uint64_t host = 0, ref = 0;
  if (f & SROCE_IS_FIRST) {
    const sroce_reth& r = pkt.reth;
    // IBA 10.2 / 10.6: the QP and the MR must both allow remote
    // writes, and the R_Key must cover the whole DMA range. A zero-length
    // write checks no R_Key (IBA 9.4: zero-length RDMA).
    if (!(qp.attr.qp_access_flags & kAccessRemoteWrite)) return access_error(e, qp, psn);
    if (r.dma_len > 0 && !e.check_rkey(qp, r.rkey, r.va, r.dma_len, kAccessRemoteWrite, &host, &ref))
      return access_error(e, qp, psn);
    qp.wr_va = r.va;
    qp.wr_host = host;
    qp.wr_ref = ref;
    qp.wr_rkey = r.rkey;
    qp.wr_left = qp.wr_total = r.dma_len;
  }
  // The packets must add up to exactly the DMA length (IBA 9.4, 9.9).
  if (len > qp.wr_left || ((f & SROCE_IS_LAST) && len != qp.wr_left))
    return invalid_request(e, qp, psn);
  const bool imm = (f & SROCE_HAS_IMMDT) != 0;
  if (imm && !qp.rwqe_active && !take_rwqe(e, qp)) return no_rwqe(e, qp, psn);
  // The R_Key covered the whole DMA range at the first packet; the MR must still be the one
  // it named (a DEREG_MR or REREG_MR since fences the rest of the message out: mr_live).
  if (len && (!e.mr_live(qp.wr_ref) ||
              !e.mem_.write_mr(e.mem_lkey(qp.wr_ref), qp.wr_host,
                               {reinterpret_cast<const std::byte*>(pkt.payload), len})))
    return access_error(e, qp, psn);
  qp.wr_va += len;
  qp.wr_host += len;
  qp.wr_left -= len;
  if (f & SROCE_IS_LAST) {
    qp.in_msg = InMsg::kNone;
    qp.msn = psn_add(qp.msn, 1);
    if (imm) {
      // RDMA WRITE with immediate consumes a receive WQE but places no data
      // in it (IBA 9.4); byte_len is the DMA length.
      Wc wc = recv_wc(qp, WcStatus::kSuccess);
      wc.opcode = WcOpcode::kRecvRdmaWithImm;
      wc.byte_len = qp.wr_total;
      wc.imm_data = pkt.imm;
      wc.wc_flags |= kWcWithImm;
      e.complete_recv(qp, wc, pkt.bth.se);
      qp.rwqe_active = false;
      qp.lossy.rsn_commit = (qp.lossy.rsn_commit + 1) & kPsnMask;
    }
  } else {
    qp.in_msg = InMsg::kWrite;
  }
  accept(e, qp, pkt);
}

// A free responder resource (IBA 9.7), or nullptr when the requester
// has more READ/atomic requests outstanding than max_dest_rd_atomic allows.
// The table keeps the last cfg.max_rd_atomic entries (for duplicates); an
// entry is outstanding while its original response has not been sent in
// full. A replay for a duplicate request does not count (IBA 9.7.5,
// C9-150..: a duplicate reuses the resource of its original request): after a
// go-back-N the duplicate of an answered READ can arrive after the requester
// got the response and sent a new READ within max_rd_atomic; counting the
// replay NAKed that valid request (found by the simulator, seed 2891).
Resource* alloc_res(Qp& qp) {
  if (qp.max_dest_rd_atomic == 0) return nullptr;
  // A lossy READ (docs/lossy.md, READ responses) may be complete at the
  // requester, through repairs, before its original responses all went out:
  // it does not count, and its entry may be reused (responses are
  // completed in order and the requester keeps at most max_rd_atomic
  // unfinished, so the oldest entry's READ is finished when a new one comes).
  auto owing = [](const Resource& o) {
    return o.kind != Resource::kFree && o.tx_pending && !o.answered && !o.lossy;
  };
  uint32_t pending = 0;
  for (const Resource& o : qp.res) pending += owing(o) ? 1 : 0;
  if (pending >= qp.max_dest_rd_atomic) return nullptr;
  Resource& r = qp.res[qp.res_alloc % qp.res.size()];
  // An entry still owing its original response is never reused; one that is
  // only replaying for a duplicate is (the requester asks again if needed).
  if (owing(r)) return nullptr;
  r = Resource{};
  r.seq = qp.res_alloc++;
  return &r;
}

void do_read(Impl& e, Qp& qp, const sroce_pkt& pkt) {
  const uint32_t psn = pkt.bth.psn;
  const sroce_reth& r = pkt.reth;
  uint64_t host = 0, ref = 0;
  if (!(qp.attr.qp_access_flags & kAccessRemoteRead)) return access_error(e, qp, psn);
  if (r.dma_len > 0 && !e.check_rkey(qp, r.rkey, r.va, r.dma_len, kAccessRemoteRead, &host, &ref))
    return access_error(e, qp, psn);
  if (r.dma_len > e.cfg_.max_msg_size) return invalid_request(e, qp, psn);
  Resource* res = alloc_res(qp);
  if (!res)
    return invalid_request(e, qp, psn);  // IBA 9.9: more than max_dest_rd_atomic outstanding
  const uint32_t n = npackets(r.dma_len, qp.mtu);
  res->kind = Resource::kRead;
  res->tx_pending = true;
  res->first_psn = res->cur_psn = psn;
  res->last_psn = psn_add(psn, static_cast<int32_t>(n - 1));
  res->rkey = r.rkey;
  res->cur_va = r.va;
  res->cur_host = host;
  res->cur_ref = ref;
  res->cur_left = r.dma_len;
  res->cur_first = true;
  // Lossy mode: a READ request that came with a trailer gets sprayed
  // responses with trailers (docs/lossy.md, READ responses); a compatible
  // one (a plain peer, or before a mid-stream switch, below rx_floor) not.
  res->lossy = qp.is_rc() && qp.lossy.rx &&
               (!qp.lossy.rx_mixed || psn_diff(psn, qp.lossy.rx_floor) >= 0);
  qp.msn = psn_add(qp.msn, 1);
  res->msn = qp.msn;
  qp.resp_psn = psn_add(res->last_psn, 1);
  qp.nak_seq_sent = false;
  qp.pkts_since_ack = 0;
  e.sched_resp(qp);
}

void do_atomic(Impl& e, Qp& qp, const sroce_pkt& pkt) {
  const uint32_t psn = pkt.bth.psn;
  const sroce_atmeth& a = pkt.atmeth;
  if (!(qp.attr.qp_access_flags & kAccessRemoteAtomic)) return access_error(e, qp, psn);
  if (a.va & 7) return invalid_request(e, qp, psn);  // IBA 9.4: 8-byte aligned
  uint64_t host = 0, ref = 0;
  if (!e.check_rkey(qp, a.rkey, a.va, 8, kAccessRemoteAtomic, &host, &ref))
    return access_error(e, qp, psn);
  Resource* res = alloc_res(qp);
  if (!res) return invalid_request(e, qp, psn);
  uint64_t v = 0;
  if (!e.mem_.read_mr(e.mem_lkey(ref), host, {reinterpret_cast<std::byte*>(&v), 8}))
    return access_error(e, qp, psn);
  const uint64_t orig = v;
  if ((pkt.bth.opcode & 0x1f) == SROCE_OP_CMP_SWAP) {
    if (v == a.compare) v = a.swap_add;
  } else {
    v += a.swap_add;
  }
  if (!e.mem_.write_mr(e.mem_lkey(ref), host, {reinterpret_cast<const std::byte*>(&v), 8}))
    return access_error(e, qp, psn);
  res->kind = Resource::kAtomic;
  res->tx_pending = true;
  res->first_psn = res->last_psn = res->cur_psn = psn;
  res->rkey = a.rkey;
  res->atomic_orig = orig;
  qp.msn = psn_add(qp.msn, 1);
  res->msn = qp.msn;
  qp.resp_psn = psn_add(psn, 1);
  qp.nak_seq_sent = false;
  qp.pkts_since_ack = 0;
  e.sched_resp(qp);
}

bool seq_after(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; }

// Send the resource's response again; later resources wait for their own
// duplicate requests (the requester goes back N, so they follow).
void replay(Impl& e, Qp& qp, Resource& r) {
  r.tx_pending = true;
  // Lossy READs (docs/lossy.md, READ responses) are not asked for again by
  // going back N: their responses still owed go on after this one.
  for (Resource& o : qp.res)
    if (o.kind != Resource::kFree && seq_after(o.seq, r.seq) && !o.lossy) o.tx_pending = false;
  if (seq_after(qp.res_tx, r.seq)) qp.res_tx = r.seq;
  e.sched_resp(qp);
}

// IBA 9.7 (duplicate requests, C9-105 in rxe's words): PSN before ePSN.
void do_duplicate(Impl& e, Qp& qp, const sroce_pkt& pkt, uint32_t f) {
  ++qp.stats.duplicates;
  ++e.stats_.duplicates;
  const uint32_t psn = pkt.bth.psn;
  const uint8_t op = pkt.bth.opcode & 0x1f;
  if (op == SROCE_OP_READ_REQUEST) {
    // Re-execute from the resource table, from the duplicate's PSN, VA and
    // length (a requester resumes a partly answered READ that way).
    for (Resource& r : qp.res) {
      if (r.kind != Resource::kRead || psn_diff(psn, r.first_psn) < 0 ||
          psn_diff(psn, r.last_psn) > 0)
        continue;
      uint64_t host = 0, ref = 0;
      const uint32_t left = static_cast<uint32_t>(psn_diff(r.last_psn, psn)) + 1;
      if (r.lossy) {
        // Lossy mode (lossy_read.cc): the requester asks for exactly the
        // response PSNs it misses, [psn, psn + packets); a repair of just
        // those, the responses still being sent go on.
        const uint32_t k = npackets(pkt.reth.dma_len, qp.mtu);
        if (k > left || (pkt.reth.dma_len > 0 &&
                         !e.check_rkey(qp, pkt.reth.rkey, pkt.reth.va, pkt.reth.dma_len,
                                       kAccessRemoteRead, &host, &ref)))
          break;
        if (!e.lossy_read_repair(qp, r, psn, host, ref, pkt.reth.dma_len))
          return count_drop(e, qp, kRxDropDuplicate);
        return;
      }
      if (npackets(pkt.reth.dma_len, qp.mtu) != left ||
          (pkt.reth.dma_len > 0 && !e.check_rkey(qp, pkt.reth.rkey, pkt.reth.va, pkt.reth.dma_len,
                                                 kAccessRemoteRead, &host, &ref)))
        break;
      r.rkey = pkt.reth.rkey;
      r.cur_psn = psn;
      r.cur_va = pkt.reth.va;
      r.cur_host = host;
      r.cur_ref = ref;
      r.cur_left = pkt.reth.dma_len;
      r.cur_first = true;
      return replay(e, qp, r);
    }
    return count_drop(e, qp, kRxDropDuplicate);
  }
  if (f & SROCE_IS_ATOMIC) {
    // Never execute an atomic twice: answer with the saved original value.
    for (Resource& r : qp.res)
      if (r.kind == Resource::kAtomic && r.first_psn == psn) return replay(e, qp, r);
    return count_drop(e, qp, kRxDropDuplicate);
  }
  // SEND / WRITE: acknowledge again, with the latest PSN (C9-105 in rxe's words).
  e.resp_ack(qp, psn_add(qp.resp_psn, -1), true);
}

// Wc::sl of a UD receive: the RoCE packet type, encoded as ConnectX's CQE does (below).
constexpr uint8_t kWcSlRoceV2Ipv6 = 0x8 | 0x1;
constexpr uint8_t kWcSlRoceV2Ipv4 = 0x8 | 0x2;

void do_ud(Impl& e, Qp& qp, const sroce_pkt& pkt, const PacketMeta& meta) {
  if (!take_rwqe(e, qp)) return count_drop(e, qp, kRxDropNoRecvWqe);
  const uint32_t len = pkt.payload_len;
  constexpr uint32_t kGrh = 40;
  if (qp.rwqe_len < kGrh + len || qp.rwqe_len - kGrh < len) {
    // IBA 9.9 / 10.8: message larger than the buffer -> LOC_LEN_ERR on this WQE.
    e.complete_recv(qp, recv_wc(qp, WcStatus::kLocLenErr), false);
    qp.rwqe_active = false;
    return count_drop(e, qp, kRxDropLength);
  }
  // The first 40 bytes of a UD receive buffer hold the GRH (IBA 11.4);
  // on RoCEv2 over IPv4 its last 20 bytes are the IPv4 header.
  uint8_t grh[kGrh] = {};
  const uint16_t udp_len =
      static_cast<uint16_t>(8 + pkt.op->hdr_len + len + pkt.bth.pad + SROCE_ICRC_LEN);
  if (meta.src.is_ipv4() && meta.dst.is_ipv4())
    sroce_build_ipv4(grh + 20, meta.src.ipv4(), meta.dst.ipv4(), meta.traffic_class, meta.hop_limit,
                     udp_len);
  else
    sroce_build_ipv6(grh, meta.src.raw, meta.dst.raw, meta.traffic_class, meta.flow_label,
                     meta.hop_limit, udp_len);
  MemStatus ms = e.scatter_recv(qp, reinterpret_cast<const std::byte*>(grh), kGrh);
  if (ms == MemStatus::kOk && len)
    ms = e.scatter_recv(qp, reinterpret_cast<const std::byte*>(pkt.payload), len);
  if (ms != MemStatus::kOk) {
    e.complete_recv(
        qp, recv_wc(qp, ms == MemStatus::kAccess ? WcStatus::kLocAccessErr : WcStatus::kLocProtErr),
        false);
    qp.rwqe_active = false;
    return;
  }
  Wc wc = recv_wc(qp, WcStatus::kSuccess);
  wc.src_qp = pkt.deth.sqpn;
  wc.wc_flags = kWcGrh;
  // RoCEv2 has no SL on the wire; A17.4.5.1 wants the UD CQE to say whether the frame was
  // IPv4 or IPv6, and verbs have no field for it but sl. We fill it as ConnectX does (its
  // CQE's sl: bit 3 = UDP-encapsulated, bits 2:0 = L3 type, 1 IPv6, 2 IPv4), which is what
  // UCX's ud_verbs reads to find the destination address in the buffer's first 40 bytes.
  wc.sl = meta.src.is_ipv4() && meta.dst.is_ipv4() ? kWcSlRoceV2Ipv4 : kWcSlRoceV2Ipv6;
  if (pkt.op->flags & SROCE_HAS_IMMDT) {
    wc.imm_data = pkt.imm;
    wc.wc_flags |= kWcWithImm;
  }
  e.complete_recv(qp, wc, pkt.bth.se);
  qp.rwqe_active = false;
}

}  // namespace

void Engine::Impl::resp_on_request(Qp& qp, const sroce_pkt& pkt, const PacketMeta& meta,
                                   Time /*now*/) {
  if (qp.is_ud()) return do_ud(*this, qp, pkt, meta);
  const uint32_t f = pkt.op->flags;
  const uint32_t psn = pkt.bth.psn;

  if (qp.is_rc()) {
    const int32_t d = psn_diff(psn, qp.resp_psn);
    if (d > 0) {
      // IBA 9.7 / 9.9: PSN sequence error. NAK once per gap with the
      // PSN we expect; the requester goes back to it.
      count_drop(*this, qp, kRxDropOutOfSequence);
      if (!qp.nak_seq_sent) {
        qp.nak_seq_sent = true;
        resp_nak(qp, sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_PSN_SEQ_ERR), qp.resp_psn,
                 false);
      }
      return;
    }
    if (d < 0) return do_duplicate(*this, qp, pkt, f);
  } else {
    // UC (IBA 9.8): no retransmission. A PSN gap loses the message in
    // progress; resynchronise on the next FIRST/ONLY.
    if (psn != qp.resp_psn && (qp.in_msg != InMsg::kNone || !(f & SROCE_IS_FIRST))) uc_abort(qp);
    qp.resp_psn = psn_add(psn, 1);
    if (qp.uc_drop) {
      if (!(f & SROCE_IS_FIRST)) return count_drop(*this, qp, kRxDropOutOfSequence);
      qp.uc_drop = false;
      qp.in_msg = InMsg::kNone;
    }
  }

  resp_execute(qp, pkt, meta);
}

void Engine::Impl::resp_execute(Qp& qp, const sroce_pkt& pkt, const PacketMeta& /*meta*/) {
  const uint32_t f = pkt.op->flags;
  const uint32_t psn = pkt.bth.psn;
  const uint8_t op = pkt.bth.opcode & 0x1f;
  const bool rd_atomic = op == SROCE_OP_READ_REQUEST || (f & SROCE_IS_ATOMIC);
  // Opcode sequence (IBA 9.7, 9.9): inside a message only its
  // MIDDLE/LAST packets may come; outside one only FIRST/ONLY or READ/atomic.
  bool seq_ok;
  if (qp.in_msg == InMsg::kSend)
    seq_ok = (f & SROCE_IS_SEND) && !(f & SROCE_IS_FIRST);
  else if (qp.in_msg == InMsg::kWrite)
    seq_ok = (f & SROCE_IS_WRITE) && !(f & SROCE_IS_FIRST);
  else
    seq_ok = (f & SROCE_IS_FIRST) || rd_atomic;
  if (!seq_ok) {
    if (qp.is_rc()) return invalid_request(*this, qp, psn);
    uc_abort(qp);
    if (!(f & SROCE_IS_FIRST)) return count_drop(*this, qp, kRxDropOutOfSequence);
    qp.uc_drop = false;
  }

  // Payload length (IBA 9.7, 9.9): FIRST and MIDDLE carry exactly one path
  // MTU, LAST 1..MTU, ONLY 0..MTU.
  const uint32_t len = pkt.payload_len;
  if (!rd_atomic) {
    const bool first = f & SROCE_IS_FIRST, last = f & SROCE_IS_LAST;
    const bool ok = (first && last)    ? len <= qp.mtu
                    : (first || !last) ? len == qp.mtu
                                       : (len >= 1 && len <= qp.mtu);
    if (!ok) return invalid_request(*this, qp, psn);
  }

  if (f & SROCE_IS_SEND) return do_send(*this, qp, pkt, f);
  if (f & SROCE_IS_WRITE) return do_write(*this, qp, pkt, f);
  if (!qp.is_rc()) return count_drop(*this, qp, kRxDropWrongTransport);
  if (op == SROCE_OP_READ_REQUEST) return do_read(*this, qp, pkt);
  if (f & SROCE_IS_ATOMIC) return do_atomic(*this, qp, pkt);
  invalid_request(*this, qp, psn);
}

}  // namespace sroce
