// Lossy mode, the receiving side (docs/lossy.md): accepts request packets
// out of order inside a window of kLossyWindow PSNs, places WRITE data by
// address and SEND data by offset into the receive WQE the packet's receive
// sequence number names (IRN), completes in order when the expected PSN
// passes, and decides what is lost: a gap inside one lane's sequence at once
// (PSN-PATH), a gap across lanes after later arrivals (single lane) or the
// reorder timer, every gap at once with gap_is_loss (the IRN-style baseline),
// a trimmed packet at once (DCP). Losses go back to the sender as a bitmap in
// the ACK trailer beside the SACK bitmap.
#include <algorithm>
#include <bit>
#include <cstring>

#include "impl.h"

namespace sroce {

using namespace eng;

namespace {

using Impl = Engine::Impl;

uint32_t ring(uint32_t psn) { return psn & (kLossyWindow - 1); }
// The reorder window (docs/lossy.md; RACK, RFC 8985 section 6.2): reo_mult
// quarters of the minimum RTT once the receiver has measured one, never
// below kReoFloor nor above reorder_timeout (the configured backstop, also
// the window before any sample). At least 1 ns: a zero timeout would re-arm
// at `now` inside on_timer forever.
constexpr Duration kReoFloor = Duration::micros(1);
constexpr uint8_t kReoMultMax = 16;  // 4 min RTTs
constexpr uint8_t kReoCleanRounds = 16;
constexpr uint32_t kRttWindow = 64;  // samples per window of the minimum RTT (and of the skew maximum)

Duration reorder_timeout(const EngineConfig& c) {
  return std::max(c.lossy.reorder_timeout, Duration::nanos(1));
}
// Path skew the receiver measured (an original arriving this long after a
// later PSN) with a margin of a quarter: the window never goes below it,
// and it lifts the cap from reorder_timeout up to reorder_timeout_max. RACK
// (RFC 8985 6.2) bounds reo_wnd by the srtt; our receiver has no RTT
// without loss, so the skew it saw is the evidence instead.
Duration skew_window(const EngineConfig& c, const Lossy& l) {
  if (l.reo_skew_ps <= 0) return Duration::picos(0);
  const Duration hard = std::max(reorder_timeout(c), c.lossy.reorder_timeout_max);
  return std::min(Duration::picos(l.reo_skew_ps + l.reo_skew_ps / 4) + kReoFloor, hard);
}
Duration reorder_window(const EngineConfig& c, const Lossy& l) {
  const Duration skew = skew_window(c, l);
  const Duration cap = std::max(reorder_timeout(c), skew);
  if (l.rx_rtt_min_ps <= 0) return cap;
  const Duration w = Duration::picos(l.rx_rtt_min_ps * l.reo_mult / 4);
  return std::min(std::max({w, kReoFloor, skew}), cap);
}
uint32_t ns32(Time t) { return static_cast<uint32_t>(t.ps / 1000); }

void count_drop(Impl& e, Qp& qp, RxDropReason r) {
  ++e.stats_.rx_dropped;
  ++e.stats_.rx_drop_reason[r];
  ++qp.stats.rx_dropped;
}

// A QP on an SRQ in lossy mode: its next `need` messages' receive WQEs
// come off the SRQ into the QP's own (otherwise unused) receive queue, in
// SRQ order, so that an early SEND can be placed in the WQE its receive
// sequence number names while the earlier messages are still missing, and
// commit completes them in PSN order. A shared queue cannot be indexed
// ahead in place: another QP may take its front at any time. False: the SRQ
// ran out (RNR), or the QP holds as many as it can (a window's worth).
bool hold_srq_wqes(Impl& e, Qp& qp, uint32_t need) {
  if (qp.srq == kNone) return qp.rq.count() >= need;
  Srq& srq = e.srqs_[qp.srq];
  if (qp.rq.max_wr() == 0) qp.rq.init(std::min(srq.rq.max_wr(), kLossyWindow), srq.rq.max_sge());
  bool took = false;
  while (qp.rq.count() < need && !srq.rq.empty() && !qp.rq.full()) {
    qp.rq.take_front(srq.rq);
    took = true;
  }
  if (took) e.srq_check_limit(srq, qp.srq);
  return qp.rq.count() >= need;
}

// SEND payload into a receive WQE's SGEs at byte offset `off` (each SGE
// checked as scatter_recv does: IBA 10.8 lets the check wait until use).
MemStatus place_sgl(Impl& e, Qp& qp, const Sge* sges, uint32_t n, uint32_t total, uint32_t off,
                    const std::byte* src, uint32_t len) {
  if (off > total || len > total - off) return MemStatus::kLen;
  uint32_t i, in;
  e.seek_cursor(sges, n, off, &i, &in);
  while (len > 0) {
    if (i >= n) return MemStatus::kLen;
    const Sge& s = sges[i];
    const uint32_t chunk = std::min(len, s.length - in);
    if (chunk > 0) {
      const Mr* mr = e.mr_by_lkey(s.lkey);
      if (!mr || mr->pd != qp.pd || mr->invalidated || !(mr->access & kAccessLocalWrite) ||
          !covers(*mr, s.addr, s.length))
        return MemStatus::kProt;
      if (!e.mem_.write_mr(mr->lkey, mr->addr + (s.addr - mr->iova) + in, {src, chunk}))
        return MemStatus::kAccess;
      src += chunk;
      len -= chunk;
    }
    ++i;
    in = 0;
  }
  return MemStatus::kOk;
}

// Declares `q` lost (once until it arrives or the reorder timer re-asks):
// the next ACK asks for exactly it.
// Path skew (docs/lossy.md, reorder window): an original arrived
// `now - hole_ns` after a later PSN; the maximum over the last window of
// kRttWindow such samples. hole_ns is nonzero from when a later PSN first
// passed this one until the original came (0: nothing to measure).
void skew_sample(const EngineConfig& c, Lossy& l, uint32_t psn, Time now) {
  RxSlot& r = l.rxs[ring(psn)];
  if (r.hole_ns == 0) return;
  const int64_t skew = int64_t{static_cast<uint32_t>(ns32(now) - r.hole_ns)} * 1000;
  r.hole_ns = 0;
  if (skew > std::max(reorder_timeout(c), c.lossy.reorder_timeout_max).ps) return;
  l.reo_skew_ps = std::max(l.reo_skew_ps, skew);
  if (l.reo_skew_n == 0 || skew > l.reo_skew_win_ps) l.reo_skew_win_ps = skew;
  if (++l.reo_skew_n >= kRttWindow) {
    l.reo_skew_ps = l.reo_skew_win_ps;
    l.reo_skew_n = 0;
  }
}

bool declare_lost(Qp& qp, uint32_t q, uint64_t* lost_words, Time now) {
  Lossy& l = qp.lossy;
  const int32_t d = psn_diff(q, qp.resp_psn);
  if (d < 0 || d >= static_cast<int32_t>(kLossyWindow) || psn_bit(l.have, q) || psn_bit(lost_words, q))
    return false;
  if (l.rx_mixed && psn_diff(q, l.rx_floor) < 0) return false;  // compatible: go-back-N
  set_psn_bit(lost_words, q);
  set_psn_bit(l.report, q);
  l.rxs[ring(q)].asked_ns = ns32(now);
  if (!l.rtt_probe_on) {
    // RTT sample: from this request to its retransmission.
    l.rtt_probe_on = true;
    l.rtt_probe_psn = q;
    l.rtt_probe_at = now;
  }
  ++qp.stats.losses_detected;
  return true;
}

}  // namespace

void Engine::Impl::lossy_reset_rx(Qp& qp) {
  Lossy& l = qp.lossy;
  l.rx = false;
  std::memset(l.have, 0, sizeof l.have);
  std::memset(l.report, 0, sizeof l.report);
  std::memset(l.lost, 0, sizeof l.lost);
  std::memset(l.stale, 0, sizeof l.stale);
  for (RxSlot& r : l.rxs) r = RxSlot{};
  for (Deferred& d : l.deferred) d = Deferred{};
  l.rx_high = qp.resp_psn;
  l.rx_floor = qp.resp_psn;
  l.rx_mixed = false;
  l.rsn_commit = 0;
  l.dup_total = 0;
  l.lanes_seen = 0;
  l.peer_port = 0;
  l.peer_lanes = 1;
  l.peer_retired = 0;
  l.retired_seen = 0;
  l.echo_lane = 0;
  l.ack_lane = 0;
  l.ack_hop_at = Time::zero();
  l.echo_psn = 0;
  l.gap_mark = 0;
  l.gap_fires = 0;
  l.gap_deadline = Time::never();
  l.rx_rtt_min_ps = l.rx_rtt_win_ps = 0;
  l.rx_srtt_ps = l.rx_rttvar_ps = 0;
  l.rx_rtt_n = 0;
  l.rtt_probe_on = false;
  l.reo_mult = 1;
  l.reo_clean = 0;
  l.reo_skew_ps = l.reo_skew_win_ps = 0;
  l.reo_skew_n = 0;
  for (LaneRx& r : l.lanes_rx) r = LaneRx{};
  lossy_read_reset(qp, false);
}

namespace {

void passed(Qp& qp, uint32_t from);

// Forgets what the window holds for PSN p: its bits, its slot and the
// deferred request the slot held. The hole time outlives the slot (skew).
void clear_psn(Lossy& l, uint32_t p) {
  clr_psn_bit(l.have, p);
  clr_psn_bit(l.lost, p);
  clr_psn_bit(l.stale, p);
  clr_psn_bit(l.report, p);
  RxSlot& r = l.rxs[ring(p)];
  if (r.action == RxSlot::kDeferred) l.deferred[r.deferred].used = false;
  r = RxSlot{.hole_ns = r.hole_ns};
}

// A deferred READ request or atomic, now in order: the compatible executor
// runs it from its saved headers (IBA 9.4 order of execution is kept).
void run_deferred(Impl& e, Qp& qp, uint32_t p, const Deferred& d) {
  sroce_pkt pk{};
  pk.bth.opcode = d.opcode;
  pk.bth.psn = p;
  pk.op = sroce_opinfo(d.opcode);
  if (pk.op->flags & SROCE_HAS_RETH) pk.reth = {d.va, d.rkey, d.dma_len};
  if (pk.op->flags & SROCE_HAS_ATMETH) pk.atmeth = {d.va, d.rkey, d.swap_add, d.compare};
  const PacketMeta none;
  e.resp_execute(qp, pk, none);
  if (qp.state != QpState::kErr) passed(qp, p);
}

// The expected PSN passes every received PSN in order: receive completions
// and MSN happen here, so completions stay in order (IBA 10.8).
void commit(Impl& e, Qp& qp) {
  Lossy& l = qp.lossy;
  while (psn_bit(l.have, qp.resp_psn)) {
    const uint32_t p = qp.resp_psn;
    RxSlot& r = l.rxs[ring(p)];
    if (r.action == RxSlot::kDeferred) {
      const Deferred d = l.deferred[r.deferred];
      clear_psn(l, p);
      run_deferred(e, qp, p, d);
      if (qp.state == QpState::kErr) return;
      l.gap_fires = 0;
      continue;
    }
    if (r.action == RxSlot::kSendLast || r.action == RxSlot::kWriteImmLast) {
      RecvQueue& rq = qp.rq;  // with an SRQ, the WQEs this QP holds
      if (!hold_srq_wqes(e, qp, 1)) {
        // WRITE with immediate and no receive WQE: IBA 9.7 RNR NAK; the data
        // already placed is written again by the retransmission.
        clr_psn_bit(l.have, p);
        e.resp_nak(qp, sroce_aeth_syndrome(SROCE_AETH_RNR_NAK, qp.attr.min_rnr_timer), p, false);
        return;
      }
      Wc wc;
      wc.wr_id = rq.front().wr_id;
      wc.status = WcStatus::kSuccess;
      wc.opcode = r.action == RxSlot::kSendLast ? WcOpcode::kRecv : WcOpcode::kRecvRdmaWithImm;
      wc.byte_len = r.byte_len;
      wc.qp_num = qp.qpn;
      wc.src_qp = qp.attr.dest_qp_num;
      wc.imm_data = r.imm;
      wc.wc_flags = r.wc_flags;
      rq.pop();
      e.complete_recv(qp, wc, r.se);
      l.rsn_commit = (l.rsn_commit + 1) & kPsnMask;
      qp.msn = psn_add(qp.msn, 1);
    } else if (r.action == RxSlot::kMsgLast) {
      qp.msn = psn_add(qp.msn, 1);
    }
    clear_psn(l, p);
    qp.resp_psn = psn_add(p, 1);
    l.gap_fires = 0;
  }
  if (psn_diff(l.rx_high, qp.resp_psn) < 0) l.rx_high = qp.resp_psn;
  if (l.rx_high == qp.resp_psn) l.gap_deadline = Time::never();
  if (l.rx_mixed && psn_diff(qp.resp_psn, l.rx_floor) >= 0) l.rx_mixed = false;
}

// Clears the window state of PSNs the expected PSN jumped over (a READ
// reserves its response PSNs; executed in order by the compatible code).
void passed(Qp& qp, uint32_t from) {
  Lossy& l = qp.lossy;
  for (uint32_t p = from; p != qp.resp_psn && psn_diff(qp.resp_psn, p) > 0; p = psn_add(p, 1)) {
    clear_psn(l, p);  // a deferred request there: a peer's overlap
    if (psn_diff(p, from) >= static_cast<int32_t>(kLossyWindow)) break;
  }
}

// Places a SEND or WRITE packet out of order. False: not placed (dropped,
// or an error that ended the QP when the packet was the expected one).
bool place(Impl& e, Qp& qp, const sroce_pkt& pkt, const sroce_leh_req& leh, bool in_order) {
  const uint32_t f = pkt.op->flags;
  const uint32_t psn = pkt.bth.psn;
  const uint32_t len = pkt.payload_len;
  Lossy& l = qp.lossy;
  RxSlot& r = l.rxs[ring(psn)];
  // Length rules as in compatible mode (IBA 9.7, 9.9).
  const bool first = f & SROCE_IS_FIRST, last = f & SROCE_IS_LAST;
  const bool len_ok = (first && last)    ? len <= qp.mtu
                      : (first || !last) ? len == qp.mtu
                                         : (len >= 1 && len <= qp.mtu);
  // An error on the expected PSN ends the QP as in compatible mode (IBA
  // 9.9); out of order it is only dropped (it comes back in order).
  auto fail = [&](uint8_t nak, AsyncEventType ev, WcStatus recv_status = WcStatus::kSuccess) {
    if (!in_order) {
      count_drop(e, qp, kRxDropInvalid);
      return false;
    }
    if (recv_status != WcStatus::kSuccess && !qp.rq.empty()) {
      // Every earlier message completed, so the front WQE is this SEND's.
      Wc wc;
      wc.wr_id = qp.rq.front().wr_id;
      wc.status = recv_status;
      wc.opcode = WcOpcode::kRecv;
      wc.qp_num = qp.qpn;
      wc.src_qp = qp.attr.dest_qp_num;
      qp.rq.pop();
      e.complete_recv(qp, wc, false);
    }
    e.resp_nak(qp, sroce_aeth_syndrome(SROCE_AETH_NAK, nak), psn, true);
    e.qp_to_error(qp);
    e.raise(ev, qp.qpn);
    return false;
  };
  if (!len_ok) return fail(SROCE_NAK_INVALID_REQ, AsyncEventType::kQpReqErr);

  if (f & SROCE_IS_SEND) {
    uint32_t k = (leh.rsn - l.rsn_commit) & kPsnMask;
    // A compatible SEND in progress (a mid-stream switch) took its receive
    // WQE off the queue already but counts in rsn_commit only when it ends.
    if (qp.rwqe_active && k > 0) --k;
    // Every message takes at least one PSN, so the k-th one after the
    // expected PSN's cannot come before PSN resp_psn + k: a larger RSN is
    // forged or broken, and takes nothing off a shared queue.
    if (qp.srq != kNone && k > static_cast<uint32_t>(psn_diff(psn, qp.resp_psn))) {
      count_drop(e, qp, kRxDropInvalid);
      return false;
    }
    if (!hold_srq_wqes(e, qp, k + 1)) {
      if (in_order)
        e.resp_nak(qp, sroce_aeth_syndrome(SROCE_AETH_RNR_NAK, qp.attr.min_rnr_timer), psn, false);
      else
        count_drop(e, qp, kRxDropNoRecvWqe);
      return false;
    }
    const RecvWqe& w = qp.rq.at(k);
    const MemStatus ms = place_sgl(e, qp, qp.rq.sges_at(k), w.num_sge, w.length, leh.offset,
                                   reinterpret_cast<const std::byte*>(pkt.payload), len);
    if (ms == MemStatus::kLen)
      return fail(SROCE_NAK_INVALID_REQ, AsyncEventType::kQpReqErr, WcStatus::kLocLenErr);
    if (ms != MemStatus::kOk)
      return fail(SROCE_NAK_REMOTE_OP, AsyncEventType::kQpFatal,
                  ms == MemStatus::kAccess ? WcStatus::kLocAccessErr : WcStatus::kLocProtErr);
    if (last) {
      r.action = RxSlot::kSendLast;
      r.byte_len = leh.offset + len;
      r.se = pkt.bth.se;
      r.wc_flags = 0;
      if (f & SROCE_HAS_IMMDT) {
        r.imm = pkt.imm;
        r.wc_flags = kWcWithImm;
      }
      if (f & SROCE_HAS_IETH) {
        // IBA 10.6 (remote invalidate), at placement: the named R_Key goes.
        if (!e.remote_invalidate(qp, pkt.ieth_rkey))  // mw.cc: windows and MRs
          return fail(SROCE_NAK_INVALID_REQ, AsyncEventType::kQpReqErr);
        r.imm = pkt.ieth_rkey;
        r.wc_flags = kWcWithInv;
      }
    }
    return true;
  }
  // WRITE: FIRST/ONLY carry the RETH; the others the trailer's VA and R_Key.
  if (!(qp.attr.qp_access_flags & kAccessRemoteWrite))
    return fail(SROCE_NAK_REMOTE_ACCESS, AsyncEventType::kQpAccessErr);
  const uint64_t va = first ? pkt.reth.va : leh.va;
  const uint32_t rkey = first ? pkt.reth.rkey : leh.rkey;
  // Every packet checks its R_Key (no host address is kept across packets: no fence needed).
  uint64_t host = 0, ref = 0;
  if (len && !e.check_rkey(qp, rkey, va, len, kAccessRemoteWrite, &host, &ref))
    return fail(SROCE_NAK_REMOTE_ACCESS, AsyncEventType::kQpAccessErr);
  if (first && pkt.reth.dma_len > 0 &&
      !e.check_rkey(qp, rkey, va, pkt.reth.dma_len, kAccessRemoteWrite, &host, &ref))
    return fail(SROCE_NAK_REMOTE_ACCESS, AsyncEventType::kQpAccessErr);
  if (len && !e.mem_.write_mr(e.mem_lkey(ref), host,
                              {reinterpret_cast<const std::byte*>(pkt.payload), len}))
    return fail(SROCE_NAK_REMOTE_ACCESS, AsyncEventType::kQpAccessErr);
  if (last) {
    r.action = (f & SROCE_HAS_IMMDT) ? RxSlot::kWriteImmLast : RxSlot::kMsgLast;
    r.byte_len = leh.offset + len;
    r.imm = pkt.imm;
    r.wc_flags = (f & SROCE_HAS_IMMDT) ? static_cast<uint8_t>(kWcWithImm) : uint8_t{0};
    r.se = pkt.bth.se;
  }
  return true;
}

}  // namespace

void Engine::Impl::lossy_rx_request(Qp& qp, const sroce_pkt& pkt, const sroce_leh_req& leh,
                                    const PacketMeta& meta, Time now) {
  Lossy& l = qp.lossy;
  const int32_t d0 = psn_diff(pkt.bth.psn, qp.resp_psn);
  if (!l.rx) {
    // The requester switched at S (lossy_tx_gate), possibly with compatible
    // packets before S still on their way; the window starts at our
    // expected PSN. Compatible packets still to come are executed in order
    // by the compatible code (lossy_rx_compat); PSNs below the lowest one
    // known to carry a trailer (rx_floor) are theirs, and go-back-N (a NAK
    // sequence error, the sender's RTO) recovers them, not SACK.
    if (d0 < 0) return resp_on_request(qp, pkt, meta, now);  // a stale duplicate
    if (d0 >= static_cast<int32_t>(kLossyWindow))
      return count_drop(*this, qp, kRxDropOutOfSequence);
    l.rx_floor = pkt.bth.psn;
    l.rx_mixed = d0 > 0;
    l.rx = true;
    // A retransmission (a go-back-N across S): the lanes' sequences moved
    // on already, so each lane adopts the first sequence it shows.
    const bool resync = (leh.flags & SROCE_LEH_F_RETX) != 0;
    for (LaneRx& x : l.lanes_rx) x.resync = resync;
    std::memset(l.have, 0, sizeof l.have);
    std::memset(l.report, 0, sizeof l.report);
    std::memset(l.lost, 0, sizeof l.lost);
    std::memset(l.stale, 0, sizeof l.stale);
    l.rx_high = qp.resp_psn;
    qp.stats.mode = QpMode::kLossy;
  }
  const uint32_t f = pkt.op->flags;
  const uint32_t psn = pkt.bth.psn;
  const uint8_t op = pkt.bth.opcode & 0x1f;
  const bool rd_atomic = op == SROCE_OP_READ_REQUEST || (f & SROCE_IS_ATOMIC);
  const uint8_t lane = static_cast<uint8_t>(leh.lane % kMaxLanes);
  l.lanes_seen = std::max<uint16_t>(l.lanes_seen, static_cast<uint16_t>(lane + 1));
  l.echo_lane = lane;
  l.echo_psn = psn | SROCE_LEH_PSN_VALID;
  if (l.rx_mixed) {
    // The lowest PSN known to be lossy: this one, or the previous packet of
    // its lane (lane 0's second packet names S itself).
    if (psn_diff(psn, l.rx_floor) < 0) l.rx_floor = psn;
    const uint32_t pp = leh.prev_psn & kPsnMask;
    if ((leh.prev_psn & SROCE_LEH_PSN_VALID) && psn_diff(pp, qp.resp_psn) >= 0 &&
        psn_diff(pp, l.rx_floor) < 0)
      l.rx_floor = pp;
    if (psn_diff(qp.resp_psn, l.rx_floor) >= 0) l.rx_mixed = false;
    // Lane 0 shares the compatible packets' path, in order: a trailer on it
    // beyond a compatible PSN still missing means that PSN was lost. IBA 9.7
    // NAK sequence error, once per gap: the requester goes back N.
    if (l.rx_mixed && lane == 0 && psn_diff(psn, qp.resp_psn) > 0 && !qp.nak_seq_sent) {
      qp.nak_seq_sent = true;
      resp_nak(qp, sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_PSN_SEQ_ERR), qp.resp_psn, false);
    }
  }

  // PSN-PATH: packets of one lane follow one path in order, so a jump in the
  // lane's sequence means the packets between were lost; the trailer names
  // the PSN of the one just before this one on the lane.
  bool declared = false;
  // Every lane's sequence starts at 0 at the switch, on both sides.
  LaneRx& lr = l.lanes_rx[lane];
  // CE marks per lane, echoed in the ACK trailer (lane weights at the sender).
  if ((meta.traffic_class & 3) == 3 && lr.ce_pending < UINT16_MAX) ++lr.ce_pending;
  if (lr.resync) {
    lr.exp_seq = leh.lane_seq;
    lr.resync = false;
  }
  const auto g = static_cast<int16_t>(leh.lane_seq - lr.exp_seq);
  if (g > 0) {
    lr.losses += static_cast<uint64_t>(g);
    if (leh.prev_psn & SROCE_LEH_PSN_VALID)
      declared |= declare_lost(qp, leh.prev_psn & kPsnMask, l.lost, now);
  }
  if (g >= 0) lr.exp_seq = static_cast<uint16_t>(leh.lane_seq + 1);
  l.peer_lanes = std::min<uint16_t>(sroce_leh_flags_lanes(leh.flags), kMaxLanes);
  // Which lanes the sender retired (eight per trailer): from first
  // transmissions only, and only newer than the last word for those lanes.
  if (!(leh.flags & SROCE_LEH_F_RETX)) {
    const uint32_t c = leh.retired_chunk & 7u;
    if (!((l.retired_seen >> c) & 1) || psn_diff(psn, l.retired_psn[c]) > 0) {
      l.retired_seen = static_cast<uint8_t>(l.retired_seen | (1u << c));
      l.retired_psn[c] = psn;
      l.peer_retired = (l.peer_retired & ~(uint64_t{0xff} << (8 * c))) |
                       (uint64_t{leh.retired} << (8 * c));
    }
  }
  if (!(leh.flags & SROCE_LEH_F_RETX) && (!lr.used || psn_diff(psn, lr.hi_new) > 0)) {
    lr.hi_new = psn;
    lr.used = true;
  }

  const int32_t d = psn_diff(psn, qp.resp_psn);
  if (d < 0 || (d < static_cast<int32_t>(kLossyWindow) && psn_bit(l.have, psn))) {
    // Already had it: a spurious retransmission (echoed to the sender).
    // Resent by the sender's timer although we have it: our ACKs are not
    // getting through (a path that drops them). The ACKs move to the next
    // lane, once per such burst (PLB-style repathing, for the ACK path).
    if ((leh.prev_psn & SROCE_LEH_PREV_RTO) && now - l.ack_hop_at >= reorder_timeout(cfg_)) {
      l.ack_hop_at = now;
      l.ack_lane = static_cast<uint8_t>((l.ack_lane + 1) % std::max<uint16_t>(l.peer_lanes, 1));
    }
    // An original after its retransmission (the declaration was spurious):
    // its lateness is skew too, while its slot is not reused (rx_high has
    // not passed psn + window).
    if (!(leh.flags & SROCE_LEH_F_RETX) && d > -static_cast<int32_t>(kLossyWindow) &&
        psn_diff(psn_add(psn, static_cast<int32_t>(kLossyWindow)), l.rx_high) >= 0)
      skew_sample(cfg_, l, psn, now);
    // A READ request below ePSN is the requester asking for response PSNs
    // it misses (lossy_read.cc), not a spurious retransmission.
    if (!(d < 0 && op == SROCE_OP_READ_REQUEST)) {
      ++l.dup_total;
      ++qp.stats.duplicates_lossy;
    }
    if (d < 0 && rd_atomic) return resp_on_request(qp, pkt, meta, now);  // replay (IBA 9.7)
    ++qp.stats.duplicates;
    ++stats_.duplicates;
    resp_ack(qp, psn_add(qp.resp_psn, -1), true);
    return;
  }
  if (d >= static_cast<int32_t>(kLossyWindow)) return count_drop(*this, qp, kRxDropOutOfSequence);
  // An early READ or atomic waits in the table of deferred requests; with the
  // table full (a peer beyond the device's max_rd_atomic) it is dropped as if
  // lost, and asked for again once the PSNs before it are in.
  uint32_t di = 0;
  if (rd_atomic && d != 0) {
    while (di < l.deferred.size() && l.deferred[di].used) ++di;
    if (di == l.deferred.size()) return count_drop(*this, qp, kRxDropOutOfSequence);
  }
  if (psn_bit(l.lost, psn) && !(leh.flags & SROCE_LEH_F_RETX)) {
    // The original of a PSN we declared lost: the reorder window was too
    // short (RACK widens it on a DSACK; RFC 8985 6.2).
    if (l.reo_mult < kReoMultMax) ++l.reo_mult;
    l.reo_clean = 0;
  }
  if (l.rtt_probe_on && psn == l.rtt_probe_psn) {
    l.rtt_probe_on = false;
    if ((leh.flags & SROCE_LEH_F_RETX) && now > l.rtt_probe_at) {
      const int64_t r = (now - l.rtt_probe_at).ps;
      rtt_sample(l.rx_srtt_ps, l.rx_rttvar_ps, r);
      if (l.rx_rtt_min_ps == 0 || r < l.rx_rtt_min_ps) l.rx_rtt_min_ps = r;
      if (l.rx_rtt_n == 0 || r < l.rx_rtt_win_ps) l.rx_rtt_win_ps = r;
      if (++l.rx_rtt_n >= kRttWindow) {  // a windowed minimum: paths change
        l.rx_rtt_min_ps = l.rx_rtt_win_ps;
        l.rx_rtt_n = 0;
      }
    }
  }
  if (static_cast<uint64_t>(d) > qp.stats.max_reorder_depth)
    qp.stats.max_reorder_depth = static_cast<uint64_t>(d);
  if (psn_diff(psn, l.rx_high) < 0) {
    if (!(leh.flags & SROCE_LEH_F_RETX)) skew_sample(cfg_, l, psn, now);  // a late original
  } else {
    for (uint32_t q = l.rx_high; psn_diff(q, psn) < 0; q = psn_add(q, 1))
      l.rxs[ring(q)].hole_ns = ns32(now) | 1;
    l.rxs[ring(psn)].hole_ns = 0;  // in order: no hole
    l.rx_high = psn_add(psn, 1);
  }

  // READ and atomics run in order, by the compatible code: early ones wait
  // in their slot (deferred). SENDs, through an SRQ too, are placed at once.
  if (rd_atomic) {
    if (d != 0) {
      RxSlot& r = l.rxs[ring(psn)];
      r = RxSlot{.hole_ns = r.hole_ns};  // the hole time outlives the slot (skew)
      r.action = RxSlot::kDeferred;
      r.deferred = static_cast<uint8_t>(di);
      Deferred& x = l.deferred[di];
      x = Deferred{.opcode = pkt.bth.opcode, .used = true};
      if (f & SROCE_HAS_RETH) {
        x.va = pkt.reth.va;
        x.rkey = pkt.reth.rkey;
        x.dma_len = pkt.reth.dma_len;
      } else {
        x.va = pkt.atmeth.va;
        x.rkey = pkt.atmeth.rkey;
        x.swap_add = pkt.atmeth.swap_add;
        x.compare = pkt.atmeth.compare;
      }
      set_psn_bit(l.have, psn);
      clr_psn_bit(l.lost, psn);
      clr_psn_bit(l.report, psn);
    } else {
      const uint32_t from = qp.resp_psn;
      resp_execute(qp, pkt, meta);
      if (qp.state == QpState::kErr) return;
      passed(qp, from);
      if (psn_diff(l.rx_high, qp.resp_psn) < 0) l.rx_high = qp.resp_psn;
      commit(*this, qp);
    }
  } else {
    if (!place(*this, qp, pkt, leh, d == 0)) {
      if (qp.state == QpState::kErr) return;
    } else {
      set_psn_bit(l.have, psn);
      clr_psn_bit(l.lost, psn);
      clr_psn_bit(l.report, psn);
      commit(*this, qp);
    }
  }

  // Gaps across lanes (docs/lossy.md).
  if (l.rx_high != qp.resp_psn) {
    if (cfg_.lossy.gap_is_loss) {
      // IRN-style baseline: every PSN gap below this arrival is a loss.
      for (uint32_t q = qp.resp_psn; psn_diff(q, psn) < 0; q = psn_add(q, 1))
        declared |= declare_lost(qp, q, l.lost, now);
    } else if (l.peer_lanes > 1) {
      // Several lanes: each lane is one path, in order, and carries new PSNs
      // in increasing order. Once every lane of the sender delivered a first
      // transmission above q, q's lane did too, so q is lost (this names the
      // earlier losses of a burst on one lane, which the lane's sequence
      // cannot). A lane that delivered nothing yet, or was retired, stops
      // this rule; the reorder timer remains.
      // Lanes the sender retired are left out: they carry at most a probe,
      // which is then lost like any other packet once the others passed it.
      bool all = true, any = false;
      uint32_t low = 0;
      for (uint16_t i = 0; i < l.peer_lanes && all; ++i) {
        if ((l.peer_retired >> i) & 1) continue;
        const LaneRx& x = l.lanes_rx[i];
        if (!x.used) {
          all = false;
        } else if (!any || psn_diff(x.hi_new, low) < 0) {
          low = x.hi_new;
          any = true;
        }
      }
      if (all && any)
        for (uint32_t q = qp.resp_psn; psn_diff(q, low) < 0; q = psn_add(q, 1))
          declared |= declare_lost(qp, q, l.lost, now);
    } else {
      // One lane: a missing PSN with ooo_threshold later arrivals is lost
      // (Falcon's out-of-order threshold, TCP's dupthresh).
      uint32_t later = 0;
      for (uint32_t q = psn_add(l.rx_high, -1); psn_diff(q, qp.resp_psn) >= 0;
           q = psn_add(q, -1)) {
        if (psn_bit(l.have, q))
          ++later;
        else if (later >= cfg_.lossy.ooo_threshold)
          declared |= declare_lost(qp, q, l.lost, now);
      }
    }
    if (l.gap_deadline == Time::never()) {
      l.gap_mark = l.rx_high;
      l.gap_deadline = now + reorder_window(cfg_, l);
      timer_update(qp);
    }
  }
  // ACK now on AckReq, on a loss, and when this packet filled a hole (the
  // cumulative point jumped); out-of-order arrivals alone coalesce like
  // in-order ones (ack_every): the receiver, not the SACK bitmap, decides
  // what is lost, and under trimming an ACK per packet would fill the
  // priority queue that trimmed headers share.
  const bool jumped = psn_diff(qp.resp_psn, psn_add(psn, 1)) > 0;
  resp_ack(qp, psn_add(qp.resp_psn, -1), pkt.bth.ack_req || declared || jumped);
}

// A request without a trailer after the switch: a compatible packet sent
// before S (docs/lossy.md, mid-stream switch). The compatible code runs it
// (in order; a duplicate is answered, a gap NAKed as IBA 9.7 says); then the
// lossy window moves on over whatever was placed behind it.
void Engine::Impl::lossy_rx_compat(Qp& qp, const sroce_pkt& pkt, const PacketMeta& meta,
                                   Time now) {
  const uint32_t from = qp.resp_psn;
  resp_on_request(qp, pkt, meta, now);
  if (qp.state == QpState::kErr || qp.resp_psn == from) return;
  passed(qp, from);
  const uint32_t next = qp.resp_psn;
  commit(*this, qp);
  // It filled a hole: the PSNs placed behind it are acknowledged at once.
  if (qp.resp_psn != next) resp_ack(qp, psn_add(qp.resp_psn, -1), true);
}

// DCP: a trimmed request is a loss we know at once and exactly.
void Engine::Impl::lossy_rx_trimmed(Qp& qp, uint32_t psn, Time now) {
  Lossy& l = qp.lossy;
  const int32_t d = psn_diff(psn, qp.resp_psn);
  if (d < 0 || d >= static_cast<int32_t>(kLossyWindow) || psn_bit(l.have, psn)) return;
  clr_psn_bit(l.lost, psn);  // ask even if asked before: this copy was cut too
  declare_lost(qp, psn, l.lost, now);
  if (psn_diff(psn_add(psn, 1), l.rx_high) > 0) {
    for (uint32_t q = l.rx_high; psn_diff(q, psn) < 0; q = psn_add(q, 1))
      l.rxs[ring(q)].hole_ns = ns32(now) | 1;
    l.rx_high = psn_add(psn, 1);
  }
  if (l.gap_deadline == Time::never()) {
    l.gap_mark = l.rx_high;
    l.gap_deadline = now + reorder_window(cfg_, l);
    timer_update(qp);
  }
  resp_ack(qp, psn_add(qp.resp_psn, -1), true);
}

// Reorder timer backstop: a PSN still missing reorder_timeout after a later
// one arrived is lost (also re-asks PSNs whose retransmission was lost). The
// timer backs off while nothing moves.
void Engine::Impl::lossy_rx_timer(Qp& qp, Time now) {
  Lossy& l = qp.lossy;
  l.gap_deadline = Time::never();
  if (!l.rx || l.rx_high == qp.resp_psn || qp.state == QpState::kErr) return;
  // A PSN asked for before is asked again only if it was already asked at
  // the previous fire (its retransmission had a whole period to arrive) and,
  // once the RTT is known, at least srtt + 4 rttvar (RFC 6298's timeout for
  // the request; at most reorder_timeout, so that a noisy RTT does not leave
  // it to the sender's RTO) plus the reorder window ago.
  const Duration win = reorder_window(cfg_, l);
  auto reask_due = [&](uint32_t q) {
    if (l.rx_rtt_min_ps <= 0) return true;
    const uint32_t since_ns = ns32(now) - l.rxs[ring(q)].asked_ns;
    const int64_t rto = std::min(l.rx_srtt_ps + 4 * l.rx_rttvar_ps, reorder_timeout(cfg_).ps);
    return int64_t{since_ns} * 1000 >= rto + win.ps;
  };
  bool any = false, fresh = false;
  for (uint32_t q = qp.resp_psn; psn_diff(q, l.gap_mark) < 0; q = psn_add(q, 1)) {
    if (psn_bit(l.have, q)) continue;
    if (!psn_bit(l.lost, q)) {
      fresh |= declare_lost(qp, q, l.lost, now);
    } else if (psn_bit(l.stale, q) && reask_due(q)) {
      set_psn_bit(l.report, q);
      l.rxs[ring(q)].asked_ns = ns32(now);
      any = true;
    } else {
      set_psn_bit(l.stale, q);
    }
  }
  if (fresh && ++l.reo_clean >= kReoCleanRounds) {
    l.reo_mult = 1;  // RFC 8985 6.2: back to the base window after 16 clean rounds
    l.reo_clean = 0;
  }
  if (any || fresh) resp_ack(qp, psn_add(qp.resp_psn, -1), true);
  if (l.gap_fires < 6) ++l.gap_fires;
  l.gap_mark = l.rx_high;
  l.gap_deadline = now + reorder_window(cfg_, l) * (int64_t{1} << l.gap_fires);
  timer_update(qp);
}

void Engine::Impl::lossy_ack_trailer(Qp& qp, uint8_t* out, PacketMeta& meta) {
  Lossy& l = qp.lossy;
  // ACKs go on one lane (our source port), lane 0 unless the sender's
  // timeout recovery showed they stopped arriving (lossy_rx_request).
  meta.src_port = lane_port(qp, l.ack_lane);
  sroce_leh_ack a{};
  a.echo_lane = l.echo_lane;
  a.echo_psn = l.echo_psn;
  a.dup_total = l.dup_total;
  // CE echo: the lane with the most CE marks not yet reported (one per ACK;
  // the others follow on the next ACKs).
  uint16_t ce_best = 0;
  for (uint16_t i = 0; i < l.lanes_seen && i < kMaxLanes; ++i)
    if (l.lanes_rx[i].ce_pending > l.lanes_rx[ce_best].ce_pending) ce_best = i;
  if (const uint16_t n = l.lanes_rx[ce_best].ce_pending; n > 0) {
    a.flags = static_cast<uint8_t>(a.flags | SROCE_LEH_AF_CE);
    a.ce_lane = static_cast<uint8_t>(ce_best);
    a.ce_count = static_cast<uint8_t>(std::min<uint16_t>(n, 255));
    l.lanes_rx[ce_best].ce_pending = static_cast<uint16_t>(n - a.ce_count);
  }
  // Bitmaps only on an ACK: a NAK's BTH PSN is not the cumulative point.
  const bool is_ack = sroce_aeth_type(qp.ack_syndrome) == SROCE_AETH_ACK;
  for (uint32_t i = 0; is_ack && i < kSackBits; ++i) {
    const uint32_t q = psn_add(qp.resp_psn, static_cast<int32_t>(i));  // ack_psn + 1 + i
    if (psn_bit(l.have, q)) a.sack |= uint64_t{1} << i;
    if (psn_bit(l.report, q)) {
      a.rtx |= uint64_t{1} << i;
      clr_psn_bit(l.report, q);
    }
  }
  l.echo_psn = 0;
  sroce_leh_ack_write(out, &a);
}

}  // namespace sroce
