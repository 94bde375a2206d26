// Lossy mode, the sending side (docs/lossy.md): negotiation, lanes and
// their health, the window of transmitted PSNs, SACK and precise
// retransmission requests from the receiver, RTT, and the RTO with
// exponential backoff as the last resort. The receiver is lossy_rx.cc.
#include <algorithm>
#include <cstring>
#include <new>

#include "impl.h"

namespace sroce {

using namespace eng;

namespace {

// Lane health (docs/lossy.md): each retransmission request for a packet sent
// on a lane adds kLossPenalty to its score; the score halves every
// kDecayPackets packets the lane sends. A lane whose score reaches
// kRetireScore is retired (no new packets) while another lane is active.
// After a hold-down (kRetireHold, doubled per failed probe up to 2^3) one new
// packet goes on it as a probe; the lane comes back only when that packet is
// acknowledged, with half the retire score, so a lane that still loses is
// retired again within a few packets.
constexpr uint32_t kLossPenalty = 4;
constexpr uint32_t kDecayPackets = 16;
constexpr uint32_t kRetireScore = 24;
constexpr Duration kRetireHold = Duration::micros(500);
constexpr uint32_t kMaxProbeBackoff = 3;
constexpr uint32_t kMaxBackoff = 6;  // RTO doubles at most 2^6 times
// ... and never beyond kRtoCap, unless the QP's own IBA timeout (4.096 us ·
// 2^timeout) is longer: then that. A peer stalled for seconds (a starved
// daemon) is served again within kRtoCap of resuming, instead of up to
// 64 timeouts later (4.3 s at the common timeout 14).
constexpr Duration kRtoCap = Duration::millis(500);
// Adaptive lane trains (lossy_pick_lane): one-packet trains for this many QP
// srtts (at least kTrainLossHoldMin each) after a loss.
constexpr int64_t kTrainLossHold = 16;
constexpr Duration kTrainLossHoldMin = Duration::micros(10);

TxSlot& slot(Qp& qp, uint32_t psn) { return qp.lossy.txw[psn & (kLossyWindow - 1)]; }

// Lane weights (docs/lossy.md "Lane weights"; MP-RDMA, NSDI 2018: per-path
// congestion state from ECN steers which path the next packet takes). A
// congestion signal for a lane (a CE echo, a retransmission request, or its
// windowed-minimum RTT above the QP's lowest lane RTT by the delay target)
// cuts its weight by a quarter, at most once per QP srtt, never below
// kWeightMin (the lane keeps a trickle, so it is still measured). Weights
// come back linearly with time: from kWeightMin to full in kRestoreRtts srtts.
// Spraying is smooth weighted round robin: deterministic, no allocation, and
// with equal weights exactly round robin.
constexpr uint32_t kWeightMin = kLaneWeightFull / 16;
constexpr uint32_t kRestoreRtts = 32;
constexpr uint32_t kDelayWindow = 8;  // RTT samples per windowed minimum

void weight_cut(Lossy& l, LaneTx& t, Time now) {
  const Duration gap = Duration::picos(l.srtt_ps);
  if (t.cuts > 0 && now - t.cut_at < gap) return;  // once per RTT
  t.cut_at = now;
  ++t.cuts;
  t.weight = std::max(kWeightMin, t.weight - t.weight / 4);
}

// Linear restore of every lane's weight up to now (called per ACK).
void weight_restore(Lossy& l, Time now) {
  if (l.srtt_ps <= 0 || now < l.weight_at) {
    l.weight_at = now;
    return;
  }
  const int64_t span = l.srtt_ps * kRestoreRtts;
  const int64_t dt = std::min((now - l.weight_at).ps, span);  // no overflow below
  const int64_t inc = dt * int64_t{kLaneWeightFull} / span;
  if (inc <= 0) return;  // keep weight_at: the time accumulates
  l.weight_at = now;
  for (uint16_t i = 0; i < l.nlanes; ++i) {
    LaneTx& t = l.lanes[i];
    t.weight = static_cast<uint32_t>(std::min<int64_t>(kLaneWeightFull, t.weight + inc));
  }
}

// One RTT sample of a lane (first transmissions only, Karn): a windowed
// minimum over kDelayWindow samples filters out the samples inflated by a
// hole on another lane (the cumulative point waited for it); a standing
// queue on the lane's path raises every sample.
void weight_delay_sample(const EngineConfig& c, Lossy& l, LaneTx& t, int64_t r, Time now) {
  if (l.lane_base_ps == 0 || r < l.lane_base_ps) l.lane_base_ps = r;
  if (t.win_n == 0 || r < t.win_min_ps) t.win_min_ps = r;
  if (++t.win_n < kDelayWindow) return;
  t.win_n = 0;
  if (t.win_min_ps > l.lane_base_ps + c.lossy.lane_delay_target.ps) weight_cut(l, t, now);
}

}  // namespace

bool Engine::Impl::lossy_alloc(Qp& qp) {
  Lossy& l = qp.lossy;
  const auto n = static_cast<uint16_t>(std::clamp<uint32_t>(cfg_.lossy.lanes, 1, kMaxLanes));
  if (!l.rx_mem) {
    const uint32_t nd = std::clamp<uint32_t>(cfg_.max_rd_atomic, 1, kDeferredMax);
    std::unique_ptr<LossyRxMem> m(new (std::nothrow) LossyRxMem);
    std::unique_ptr<RdLaneTx[]> rd(new (std::nothrow) RdLaneTx[n]);
    if (!m || !rd) return false;
    l.rxs = m->rxs;
    l.lanes_rx = m->lanes_rx;
    l.rd_rep = m->rd_rep;
    l.deferred = std::span<Deferred>(m->deferred, nd);
    l.rd_tx = std::span<RdLaneTx>(rd.get(), n);
    l.rx_mem = std::move(m);
    l.rd_lane_mem = std::move(rd);
  }
  // A QP without a send queue never sends a request: no send window. (Its
  // `tx` never becomes true, and the ACKs and READ responses a peer could
  // send it are dropped before they reach these arrays: recv.cc.)
  if (!l.tx_mem && qp.cap.max_send_wr > 0) {
    std::unique_ptr<LossyTxMem> m(new (std::nothrow) LossyTxMem);
    std::unique_ptr<LaneTx[]> lanes(new (std::nothrow) LaneTx[n]);
    if (!m || !lanes) return false;
    l.txw = m->txw;
    l.rd_rx = m->rd_rx;
    l.lanes = std::span<LaneTx>(lanes.get(), n);
    l.tx_mem = std::move(m);
    l.lane_mem = std::move(lanes);
  }
  return true;
}

void Engine::Impl::lossy_reset_tx(Qp& qp) {
  Lossy& l = qp.lossy;
  l.tx = false;
  l.peer_cap = false;
  l.peer_nocap = false;
  l.mixed = false;
  l.compat_rewind = false;
  l.tx_start = 0;
  l.next_lane = 0;
  l.train_lane = 0;
  l.train_left = 0;
  l.loss_seen = false;
  l.rsn_next = 0;
  l.rtx_count = 0;
  l.rto_backoff = 0;
  l.peer_dups = 0;
  l.srtt_ps = l.rttvar_ps = 0;
  l.lane_base_ps = 0;
  l.weight_at = Time{};
  for (TxSlot& t : l.txw) t = TxSlot{};
  for (LaneTx& t : l.lanes) t = LaneTx{};
  lossy_read_reset(qp, true);
}

// Called when the requester is about to start a new WQE. Before the peer's
// capability is known the QP is compatible; once it is, the requester
// switches at the next message boundary, even with older messages still
// outstanding (a QP that is never idle must switch too). The first lossy PSN
// S is the first PSN of this WQE. PSNs before S stay compatible packets (no
// trailer, go-back-N on a NAK or timeout) until they are acknowledged; the
// responder switches when a trailer arrives at its expected PSN, which is
// then S or a later PSN (it received everything before in order), so both
// sides agree where the lossy window starts without carrying S.
// False: wait before starting this WQE (a rewind is being resent).
bool Engine::Impl::lossy_tx_gate(Qp& qp) {
  Lossy& l = qp.lossy;
  if (!l.peer_cap || l.tx || l.txw.empty()) return true;
  if (qp.req_psn != qp.high_psn) return false;
  // The compatible PSNs still in flight are resent through the lossy ring
  // (lossy_resend_compat): no more of them than it holds. (The window keeps
  // to that before the switch; this holds even if a forged packet without
  // CAP opened it.)
  if (psn_diff(qp.high_psn, psn_add(qp.acked_psn, 1)) > static_cast<int32_t>(kLossyWindow))
    return false;
  l.tx = true;
  l.tx_start = qp.req_psn;
  l.ack_seen = qp.acked_psn;
  l.mixed = psn_diff(qp.high_psn, psn_add(qp.acked_psn, 1)) > 0;
  l.nlanes = static_cast<uint16_t>(std::clamp<uint32_t>(cfg_.lossy.lanes, 1, kMaxLanes));
  for (uint16_t i = 0; i < l.nlanes; ++i) l.lanes[i].active = true;
  qp.stats.mode = QpMode::kLossy;
  return true;
}

// Whether the packet with this PSN goes out in lossy form (trailer, lanes).
// After a mid-stream switch the PSNs before S stay compatible until all of
// them are acknowledged (then `mixed` ends, before the 24-bit PSN space
// could wrap back to S).
bool Engine::Impl::lossy_psn(Qp& qp, uint32_t psn) {
  Lossy& l = qp.lossy;
  if (!l.tx) return false;
  if (l.mixed && psn_diff(psn_add(qp.acked_psn, 1), l.tx_start) >= 0) l.mixed = false;
  return !l.mixed || psn_diff(psn, l.tx_start) >= 0;
}

// Go-back-N from `from` while compatible PSNs before S are outstanding
// (mixed): only [from, S) goes back, as compatible packets through the
// pending list (lowest first, so in order on lane 0); the lossy PSNs after S
// are the receiver's to ask for, it may have them already. With a
// READ/atomic among them (a READ's response PSNs are not its packets, so
// the pending list cannot name them) the cursor goes back to `from` as in
// compatible mode, but only until S: there it jumps forward to where new
// packets stopped (lossy_rewind_stop). False: `from` is not a compatible
// PSN (the caller goes back N, or it is lossy).
bool Engine::Impl::lossy_resend_compat(Qp& qp, uint32_t from) {
  Lossy& l = qp.lossy;
  if (!qp.is_rc() || !l.tx || lossy_psn(qp, from)) return false;
  for (uint32_t i = qp.sq_head; i != qp.sq_tail && qp.wqe(i).started; ++i) {
    const SendWqe& w = qp.wqe(i);
    if (psn_diff(w.first_psn, l.tx_start) >= 0) break;
    if (is_rd_atomic(w.opcode) && psn_diff(w.last_psn, from) >= 0) {
      req_rewind(qp, from);
      l.compat_rewind = true;
      sched_req(qp);
      return true;
    }
  }
  for (uint32_t q = from; psn_diff(q, l.tx_start) < 0; q = psn_add(q, 1)) {
    if (psn_diff(q, qp.acked_psn) <= 0) continue;
    TxSlot& t = slot(qp, q);
    if (t.valid && t.psn == q && t.pending) continue;
    t = TxSlot{};
    t.psn = q;
    t.valid = true;
    t.retx = true;
    t.pending = true;
    ++l.rtx_count;
  }
  sched_req(qp);
  return true;
}

// The bounded go-back-N of lossy_resend_compat reached S (or passed it):
// the cursor jumps forward to high_psn, the first PSN never sent, in the
// WQE that holds it (or the first one not started).
void Engine::Impl::lossy_rewind_stop(Qp& qp) {
  Lossy& l = qp.lossy;
  if (psn_diff(qp.req_psn, l.tx_start) < 0 && qp.sq_next != qp.sq_tail &&
      psn_diff(qp.wqe(qp.sq_next).first_psn, l.tx_start) < 0)
    return;  // still among the compatible PSNs
  l.compat_rewind = false;
  uint32_t i = qp.sq_head;
  for (; i != qp.sq_tail && qp.wqe(i).started; ++i)
    if (psn_diff(qp.high_psn, qp.wqe(i).last_psn) <= 0) break;
  if (i != qp.sq_tail && qp.wqe(i).started) return req_rewind(qp, qp.high_psn);
  if (qp.sq_next == i) return;  // already there (nothing was rewound past it)
  qp.sq_next = i;
  qp.req_psn = qp.high_psn;
  qp.req_off = qp.req_sge = qp.req_sge_off = 0;
  qp.pkts_since_ackreq = 0;
}

// Lane port: the QP's base source port plus the lane, kept in the dynamic
// range 49152..65535 (Annex A17.2.2 leaves the source port to the sender).
uint16_t Engine::Impl::lane_port(const Qp& qp, uint8_t lane) const {
  return static_cast<uint16_t>(0xc000 | ((qp.src_port - 0xc000u + lane) & 0x3fff));
}

// A retransmission timeout in compatible mode on a QP that offers lossy
// mode: the QP's source port (its ECMP path, and lane 0's) moves to the next
// one, as Linux TCP picks a new flow hash on an RTO (and PLB repaths on
// congestion): before the switch to lossy mode a QP has one path, and if
// that path is a blackhole (a dead spine that routing did not withdraw) its
// first message would never arrive, so the peer's CAP would never be seen.
// Any source port is valid RoCEv2 (Annex A17.2.2: entropy); the peer reads
// none of it.
void Engine::Impl::lossy_rehash(Qp& qp) {
  if (!qp.is_rc() || !qp.lossy.offer || qp.lossy.tx) return;
  qp.src_port = lane_port(qp, 1);
}

// The responder's side of the same: a compatible request from a new source
// port means the peer's requester timed out and repathed, maybe because our
// ACKs went into the blackhole; our ACKs take a new path too.
void Engine::Impl::lossy_peer_port(Qp& qp, uint16_t port) {
  Lossy& l = qp.lossy;
  if (!qp.is_rc() || !l.offer) return;
  // (Also when our own requester is lossy already: the compatible ACKs go
  // from qp.src_port, and its lanes only shift by one port.)
  if (l.peer_port != 0 && port != l.peer_port) qp.src_port = lane_port(qp, 1);
  l.peer_port = port;
}

namespace {

Duration probe_hold(const LaneTx& t) {
  return kRetireHold * (int64_t{1} << std::min<uint32_t>(t.probe_fails, kMaxProbeBackoff));
}

// A probe that failed (its packet was asked for again, resent, or never
// answered): the lane stays retired for a longer hold-down.
void probe_failed(LaneTx& t, Time now) {
  t.probe_out = false;
  t.retired_at = now;
  if (t.probe_fails < 255) ++t.probe_fails;
}

}  // namespace

// Round-robin over the active lanes (spraying). A retired lane whose
// hold-down ended carries exactly one new packet, its probe (never a
// retransmission: a lost probe then costs one packet, sent again elsewhere).
// New packets go in trains (LossyConfig::train_bytes): the lane chosen for a
// train's first packet takes the next ones too while it stays active and its
// controller allows it; the choice below (weights, round robin) is made once
// per train. Each packet still takes the lane's next sequence number, so the
// receiver's per-lane gap detection does not change.
// Adaptive: for kTrainLossHold QP srtts after a loss (a retransmission
// request or an RTO) trains are one packet long. A loss at a train's tail is
// found only when its lane passes it again, which in trains is after
// (lanes - 1) other trains instead of (lanes - 1) packets; under loss the
// batching is worth less than finding losses early (docs/lossy.md, Lane trains).
// With lane weights a train is as much shorter as its lane's weight is cut.
uint8_t Engine::Impl::lossy_pick_lane(Qp& qp, Time now, bool resend) {
  const uint8_t lane = lossy_pick_lane_one(qp, now, resend);
  Lossy& l = qp.lossy;
  if (!resend && lane < l.nlanes && l.lanes[lane].active) {  // a probe (retired lane) is no train
    if (lane != l.train_lane || l.train_left == 0) {
      const uint32_t mtu = qp.mtu ? qp.mtu : 1;
      const int64_t hold_ps = std::max<int64_t>(l.srtt_ps, kTrainLossHoldMin.ps) * kTrainLossHold;
      const bool lossy_now = l.loss_seen && (now - l.loss_at).ps < hold_ps;
      uint32_t n = lossy_now ? 1 : std::max<uint32_t>(cfg_.lossy.train_bytes / mtu, 1);
      // A lane whose weight was cut (a congested path) carries shorter trains,
      // in proportion: a full train landing on a slow link is a burst its
      // queue has to absorb, and the weights steer finely only in small units.
      // In proportion to the heaviest active lane, not to full weight: when
      // every lane is cut alike (one path, or a queue in the hosts that every
      // lane's RTT sees) the shares do not change, and shortening every train
      // only split the GSO sends (issue 21: 8 QPs on the veth pair, where the
      // hosts' jitter cuts every lane, went from 2.3 to 3.3 packets per send).
      if (cfg_.lossy.lane_weights) {
        uint32_t heaviest = 0;
        for (uint16_t i = 0; i < l.nlanes; ++i)
          if (l.lanes[i].active) heaviest = std::max(heaviest, l.lanes[i].weight);
        if (heaviest > 0)
          n = std::max<uint32_t>(static_cast<uint32_t>(uint64_t{n} * l.lanes[lane].weight / heaviest), 1);
      }
      l.train_left = n;
      l.train_lane = lane;
    }
    --l.train_left;
  }
  return lane;
}

uint8_t Engine::Impl::lossy_pick_lane_one(Qp& qp, Time now, bool resend) {
  Lossy& l = qp.lossy;
  for (uint16_t i = 0; i < l.nlanes; ++i) {
    LaneTx& t = l.lanes[i];
    if (t.active) continue;
    if (t.probe_out && now - t.probe_at >= probe_hold(t)) probe_failed(t, now);  // no answer
    if (!resend && !t.probe_out && now - t.retired_at >= probe_hold(t)) {
      t.probe_out = true;  // lossy_on_sent records its PSN
      t.probe_at = now;
      return static_cast<uint8_t>(i);
    }
  }
  if (!resend && l.train_left > 0 && l.train_lane < l.nlanes) {
    const auto i = static_cast<uint8_t>(l.train_lane);
    if (l.lanes[i].active && cc_lane_allows(*this, qp, i, now)) return i;
    l.train_left = 0;  // the lane was retired or is held: a new train elsewhere
  }
  if (cfg_.lossy.lane_weights) {
    // Smooth weighted round robin over the active lanes.
    int32_t total = 0;
    int best = -1;
    for (uint16_t i = 0; i < l.nlanes; ++i) {
      LaneTx& t = l.lanes[i];
      // A lane whose own controller holds it sits this round out.
      if (!t.active || (!resend && !cc_lane_allows(*this, qp, static_cast<uint8_t>(i), now))) continue;
      t.swrr += static_cast<int32_t>(t.weight);
      total += static_cast<int32_t>(t.weight);
      if (best < 0 || t.swrr > l.lanes[best].swrr) best = i;
    }
    if (best >= 0) {
      l.lanes[best].swrr -= total;
      return static_cast<uint8_t>(best);
    }
  }
  for (uint16_t k = 0; k < l.nlanes; ++k) {
    const uint16_t i = static_cast<uint16_t>((l.next_lane + k) % l.nlanes);
    if (l.lanes[i].active && (resend || cc_lane_allows(*this, qp, static_cast<uint8_t>(i), now))) {
      l.next_lane = static_cast<uint16_t>((i + 1) % l.nlanes);
      return static_cast<uint8_t>(i);
    }
  }
  for (uint16_t k = 0; k < l.nlanes; ++k) {
    const uint16_t i = static_cast<uint16_t>((l.next_lane + k) % l.nlanes);
    if (l.lanes[i].active) {
      l.next_lane = static_cast<uint16_t>((i + 1) % l.nlanes);
      return static_cast<uint8_t>(i);
    }
  }
  l.next_lane = static_cast<uint16_t>((l.next_lane + 1) % l.nlanes);
  return 0;
}

// The trailer's lane-state fields: the PROBE flag, and which lanes are
// retired, eight lanes per packet in turn, so that the receiver does not wait
// for a retired lane to pass a missing PSN (docs/wire.md).
void Engine::Impl::lossy_trailer_lanes(Qp& qp, uint8_t lane, sroce_leh_req& leh) {
  Lossy& l = qp.lossy;
  if (!l.lanes[lane].active) leh.flags = static_cast<uint8_t>(leh.flags | SROCE_LEH_F_PROBE);
  const uint32_t chunks = (l.nlanes + 7u) / 8u;
  const uint32_t c = l.retired_chunk % chunks;
  l.retired_chunk = static_cast<uint8_t>((c + 1) % chunks);
  uint8_t bits = 0;
  for (uint32_t i = 0; i < 8 && 8 * c + i < l.nlanes; ++i)
    if (!l.lanes[8 * c + i].active) bits = static_cast<uint8_t>(bits | (1u << i));
  leh.retired = bits;
  leh.retired_chunk = static_cast<uint8_t>(c);
  // In timeout recovery (backed off, no progress since): tell the receiver,
  // whose ACKs may be what is lost (docs/wire.md, PREV_RTO).
  if (l.rto_backoff > 0 && (leh.flags & SROCE_LEH_F_RETX)) leh.prev_psn |= SROCE_LEH_PREV_RTO;
}

void Engine::Impl::lossy_on_sent(Qp& qp, uint32_t psn, uint8_t lane, bool retx, Time now) {
  TxSlot& t = slot(qp, psn);
  if (!retx || t.psn != psn || !t.valid) {
    t = TxSlot{};
    t.psn = psn;
    t.valid = true;
  }
  t.retx = t.retx || retx;
  t.sent = now;
  t.rtt_armed = !t.retx;
  // A probe's PSN sent again (asked for, or an RTO): the probe failed.
  LaneTx& old = qp.lossy.lanes[t.lane % kMaxLanes];
  if (retx && old.probe_out && old.probe_psn == psn) probe_failed(old, now);
  t.lane = lane;
  LaneTx& lt = qp.lossy.lanes[lane];
  if (!lt.active && lt.probe_out && !retx) lt.probe_psn = psn;
  ++lt.tx;
  if (retx) ++lt.retx;
  if (++lt.since_decay >= kDecayPackets) {
    lt.since_decay = 0;
    lt.score /= 2;
  }
}

// One pending selective retransmission: the lowest pending PSN still
// unacknowledged and not SACKed. The requester's cursor moves to it for one
// packet and back (WQEs keep their PSNs, so the packet is the same).
size_t Engine::Impl::lossy_retransmit(Qp& qp, uint8_t* out, PacketMeta& meta, Time now) {
  Lossy& l = qp.lossy;
  while (l.rtx_count > 0) {
    TxSlot* best = nullptr;
    for (TxSlot& t : l.txw) {
      if (!t.pending) continue;
      if (!best || psn_diff(t.psn, best->psn) < 0) best = &t;
    }
    if (!best) {
      l.rtx_count = 0;
      break;
    }
    best->pending = false;
    --l.rtx_count;
    const uint32_t psn = best->psn;
    if (best->sacked || psn_diff(psn, qp.acked_psn) <= 0 || psn_diff(psn, qp.high_psn) >= 0)
      continue;
    // The WQE that owns psn.
    uint32_t i = qp.sq_head;
    for (; i != qp.sq_tail && qp.wqe(i).started; ++i)
      if (psn_diff(psn, qp.wqe(i).first_psn) >= 0 && psn_diff(psn, qp.wqe(i).last_psn) <= 0) break;
    if (i == qp.sq_tail || !qp.wqe(i).started) continue;
    if (is_rd_atomic(qp.wqe(i).opcode) && qp.wqe(i).done) continue;  // answered already
    if (lossy_read_sel(qp, qp.wqe(i))) {
      // A lossy READ (lossy_read.cc): its request again is a request for
      // all of its responses; ask for just the ones not placed (all of them
      // if it was never executed: the same as its request).
      lossy_read_ask_range(qp, qp.wqe(i).first_psn, psn_add(qp.wqe(i).last_psn, 1), true);
      continue;
    }
    const uint32_t s_next = qp.sq_next, s_psn = qp.req_psn, s_off = qp.req_off,
                   s_sge = qp.req_sge, s_sge_off = qp.req_sge_off, s_ack = qp.pkts_since_ackreq;
    req_rewind(qp, psn);
    const size_t n = qp.sq_next == i ? req_build_one(qp, out, meta, now) : 0;
    qp.sq_next = s_next;
    qp.req_psn = s_psn;
    qp.req_off = s_off;
    qp.req_sge = s_sge;
    qp.req_sge_off = s_sge_off;
    qp.pkts_since_ackreq = s_ack;
    if (n) {
      ++qp.stats.selective_retransmits;
      return n;
    }
  }
  return 0;
}

// A lossy ACK's trailer (before the AETH's cumulative acknowledgement is
// applied by the completer): RTT sample, SACKed PSNs, retransmission
// requests, the peer's duplicate count.
void Engine::Impl::lossy_on_ack(Qp& qp, const sroce_pkt& pkt, const sroce_leh_ack& leh, Time now) {
  Lossy& l = qp.lossy;
  ++qp.stats.sacks_received;
  const bool weights = cfg_.lossy.lane_weights;
  if (weights) weight_restore(l, now);
  if ((leh.flags & SROCE_LEH_AF_CE) && leh.ce_count > 0 && leh.ce_lane < l.nlanes) {
    // The receiver saw CE marks on packets of this lane (docs/wire.md).
    LaneTx& ct = l.lanes[leh.ce_lane];
    ct.ce += leh.ce_count;
    if (weights && ct.active) weight_cut(l, ct, now);
    cc_lane_ce(*this, qp, leh.ce_lane, now);  // per-lane controller (congestion.h)
  }
  // INT (docs/lossy.md, lane weights): a hop of the echo lane's path holds a
  // queue worth more than the delay target: cut that lane like a CE echo
  // (the ACK's echo is of the newest request, sent on echo_lane).
  if (weights && cfg_.lossy.lane_int && leh.echo_lane < l.nlanes) {
    LaneTx& it = l.lanes[leh.echo_lane];
    if (it.active && cc_echo_queue_delay(*this) > cfg_.lossy.lane_delay_target) {
      ++it.int_high;
      weight_cut(l, it, now);
    }
  }
  if (leh.dup_total > l.peer_dups) {
    qp.stats.spurious_retransmits += leh.dup_total - l.peer_dups;
    l.peer_dups = leh.dup_total;
  }
  // RTT (RFC 6298 weights; Karn: never from a retransmitted PSN).
  if (leh.echo_psn & SROCE_LEH_PSN_VALID) {
    const uint32_t e = leh.echo_psn & kPsnMask;
    TxSlot& t = slot(qp, e);
    if (t.valid && t.psn == e && !t.retx && t.rtt_armed && now >= t.sent) {
      const int64_t r = (now - t.sent).ps;
      rtt_sample(l.srtt_ps, l.rttvar_ps, r);
      qp.stats.srtt_ps = l.srtt_ps;
      LaneTx& lt = l.lanes[t.lane % kMaxLanes];
      lt.srtt_ps = lt.srtt_ps == 0 ? r : (7 * lt.srtt_ps + r) / 8;
      t.rtt_armed = false;  // one sample per transmission
    }
  }
  if (sroce_aeth_type(pkt.aeth.syndrome) == SROCE_AETH_RNR_NAK) {
    // The receiver took back a PSN it had SACKed (a WRITE with immediate
    // found no receive WQE when it came in order): it must be sent again.
    TxSlot& t = slot(qp, pkt.bth.psn & kPsnMask);
    if (t.valid && t.psn == (pkt.bth.psn & kPsnMask)) t.sacked = false;
  }
  if (sroce_aeth_type(pkt.aeth.syndrome) != SROCE_AETH_ACK) return;
  const uint32_t cum = pkt.bth.psn & kPsnMask;
  // Per-lane RTT: every PSN this ACK newly covers (cumulatively or by SACK)
  // that was sent once gives its lane a sample.
  // Returns the RTT sample it took (0: none).
  auto lane_sample = [&](TxSlot& t) -> int64_t {
    LaneTx& pl = l.lanes[t.lane % kMaxLanes];
    if (pl.probe_out && pl.probe_psn == t.psn && !t.retx) {
      // The probe arrived: the lane is back (docs/lossy.md, lane health).
      pl.probe_out = false;
      pl.probe_fails = 0;
      pl.active = true;
      pl.score = kRetireScore / 2;
      pl.since_decay = 0;
      pl.weight = kLaneWeightFull;  // its share back; the signals cut it again if needed
      pl.swrr = 0;
      pl.win_n = 0;
    }
    if (!t.rtt_armed || now < t.sent) return 0;
    // Only PSNs the previous ACK could have reported (within its SACK
    // bitmap) arrived since it: beyond it, a PSN that arrived long ago shows
    // up only now that the cumulative point came near, and its sample would
    // hold the wait for a hole on another lane.
    if (psn_diff(t.psn, qp.acked_psn) > static_cast<int32_t>(kSackBits)) {
      t.rtt_armed = false;
      return 0;
    }
    const int64_t r = (now - t.sent).ps;
    LaneTx& lt = l.lanes[t.lane % kMaxLanes];
    lt.srtt_ps = lt.srtt_ps == 0 ? r : (7 * lt.srtt_ps + r) / 8;
    t.rtt_armed = false;
    if (weights && lt.active) weight_delay_sample(cfg_, l, lt, r, now);
    return r;
  };
  // Per-lane controllers (congestion.h): each PSN newly acknowledged, once.
  auto lane_acked = [&](TxSlot& t, bool was_sacked) {
    const int64_t r = lane_sample(t);
    if (!was_sacked)
      cc_lane_acked(*this, qp, static_cast<uint8_t>(t.lane % kMaxLanes), t.psn, Duration::picos(r), leh.echo_lane,
                    now);
  };
  for (uint32_t q = psn_add(qp.acked_psn, 1); psn_diff(q, cum) <= 0; q = psn_add(q, 1)) {
    TxSlot& t = slot(qp, q);
    if (t.valid && t.psn == q) lane_acked(t, t.sacked);
    if (psn_diff(q, qp.acked_psn) >= static_cast<int32_t>(kLossyWindow)) break;
  }
  bool any = false;
  for (uint32_t i = 0; i < kSackBits; ++i) {
    const uint32_t q = psn_add(cum, static_cast<int32_t>(i) + 1);
    if (psn_diff(q, qp.high_psn) >= 0) break;
    TxSlot& t = slot(qp, q);
    if (!t.valid || t.psn != q) continue;
    if ((leh.sack >> i) & 1) {
      lane_acked(t, t.sacked);
      if (!t.sacked) l.rto_backoff = 0;  // progress: the peer is alive
      t.sacked = true;
      if (t.pending) {
        t.pending = false;
        --l.rtx_count;
      }
      continue;
    }
    if (!((leh.rtx >> i) & 1) || t.sacked || t.pending) continue;
    t.pending = true;
    ++l.rtx_count;
    any = true;
    l.loss_at = now;  // adaptive trains (lossy_pick_lane)
    l.loss_seen = true;
    LaneTx& lt = l.lanes[t.lane % kMaxLanes];
    ++lt.naks;
    cc_lane_loss(*this, qp, static_cast<uint8_t>(t.lane % kMaxLanes), now);
    if (!lt.active) continue;  // a probe: lossy_on_sent sees it fail when resent
    lt.score += kLossPenalty;
    if (weights) {
      // Loss steers weights only where it stands out: uniform random loss
      // hits every lane alike, and cutting whichever lane it hit last would
      // only unbalance the spray (5 % loss: -15 % goodput that way).
      uint32_t sum = 0, n = 0;
      for (uint16_t k = 0; k < l.nlanes; ++k)
        if (l.lanes[k].active) {
          sum += l.lanes[k].score;
          ++n;
        }
      if (n > 1 && lt.score >= kRetireScore / 2 && uint64_t{lt.score} * n > 3ull * sum)
        weight_cut(l, lt, now);
    }
    if (lt.active && lt.score >= kRetireScore) {
      uint32_t active = 0;
      for (uint16_t k = 0; k < l.nlanes; ++k) active += l.lanes[k].active ? 1 : 0;
      if (active > 1) {
        lt.active = false;  // retired: no new packets until its hold-down ends
        lt.retired_at = now;
        lt.swrr = 0;
      }
    }
  }
  if (any) sched_req(qp);
}

// Queues every PSN in [from, high_psn) that was sent and is not SACKed for a
// selective retransmission; returns how many.
// While compatible PSNs before S are still outstanding (mixed), a resend
// from before S is go-back-N: returns 0 and the caller rewinds.
uint32_t Engine::Impl::lossy_mark_unsacked(Qp& qp, uint32_t from) {
  Lossy& l = qp.lossy;
  uint32_t marked = 0;
  if (!lossy_psn(qp, from)) return 0;
  for (TxSlot& t : l.txw) {
    if (!t.valid || t.sacked || t.pending) continue;
    if (psn_diff(t.psn, from) < 0 || psn_diff(t.psn, qp.acked_psn) <= 0 ||
        psn_diff(t.psn, qp.high_psn) >= 0)
      continue;
    t.pending = true;
    ++l.rtx_count;
    ++marked;
  }
  return marked;
}

// Retransmission timeout in lossy mode: resend every PSN the receiver has
// not SACKed (not the whole window), and back off exponentially. The retry
// count applies as in compatible mode (IBA 9.7, retry_cnt).
void Engine::Impl::lossy_on_rto(Qp& qp, Time now) {
  Lossy& l = qp.lossy;
  if (qp.retry_left == 0) {
    req_fatal(qp, WcStatus::kRetryExcErr);
    return;
  }
  --qp.retry_left;
  qp.implied_valid = false;
  l.loss_at = now;  // adaptive trains (lossy_pick_lane)
  l.loss_seen = true;
  uint32_t marked = 0;
  bool compat = false;
  if (l.mixed && !lossy_psn(qp, psn_add(qp.acked_psn, 1))) {
    // Mid-stream switch (docs/lossy.md): the compatible PSNs go back N, up
    // to S only; of the lossy ones, what the receiver has not SACKed.
    compat = lossy_resend_compat(qp, req_resume_psn(qp));
    if (compat) marked = lossy_mark_unsacked(qp, l.tx_start);
  }
  if (!compat) marked = lossy_mark_unsacked(qp, psn_add(qp.acked_psn, 1));
  // Nothing the window knows is missing (a READ/atomic response was lost, or
  // a long READ's PSNs aliased the ring): go back N from the oldest
  // unfinished WQE, as compatible mode does.
  bool head_rd = qp.sq_head != qp.sq_tail && qp.wqe(qp.sq_head).started &&
                 is_rd_atomic(qp.wqe(qp.sq_head).opcode) && !qp.wqe(qp.sq_head).done;
  const bool head_sel = head_rd && lossy_read_sel(qp, qp.wqe(qp.sq_head));
  if (head_sel) {
    // A lossy READ (lossy_read.cc): ask for exactly its missing responses
    // (all of them if none came: the same as its request again, which is
    // then not also resent from the window).
    const SendWqe& w = qp.wqe(qp.sq_head);
    TxSlot& t = slot(qp, w.first_psn);
    if (t.valid && t.psn == w.first_psn && t.pending) {
      t.pending = false;
      --l.rtx_count;
    }
    uint32_t base;
    if (lossy_read_base(qp, &base)) lossy_read_ask_range(qp, base, psn_add(w.last_psn, 1), true);
  }
  if (!compat && !head_sel && (marked == 0 || head_rd)) req_rewind(qp, req_resume_psn(qp));
  if (l.rto_backoff < kMaxBackoff) ++l.rto_backoff;
  if (qp.ack_timeout.ps != 0) {
    const Duration rto = qp.ack_timeout * (int64_t{1} << l.rto_backoff);
    qp.retx_deadline = now + std::min(rto, std::max(qp.ack_timeout, kRtoCap));
    timer_update(qp);
  }
  sched_req(qp);
}

size_t Engine::Impl::lane_stats(Qpn qpn, std::span<LaneStats> out) const {
  const uint32_t s = qp_slot(qpn);
  if (s == kNone) return 0;
  const Qp& qp = qps_[s];
  if (!qp.is_rc()) return 0;
  const Lossy& l = qp.lossy;
  const uint32_t n = std::min<size_t>(
      out.size(), std::max<uint32_t>(l.tx ? l.nlanes : 1, std::max<uint16_t>(l.lanes_seen, 1)));
  for (uint32_t i = 0; i < n; ++i) {
    LaneStats& o = out[i];
    o = LaneStats{};
    o.src_port = lane_port(qp, static_cast<uint8_t>(i));
    // Without the lossy windows (no RTR yet, or lossy mode not offered) and
    // for lanes the peer uses beyond ours, the sending side's fields stay 0.
    static const LaneTx kIdle{};
    const LaneTx& t = i < l.lanes.size() ? l.lanes[i] : kIdle;
    o.active = l.tx ? t.active : i == 0;
    o.tx_packets = t.tx;
    o.retransmits = t.retx;
    o.naks = t.naks;
    o.losses_detected = i < l.lanes_rx.size() ? l.lanes_rx[i].losses : 0;
    o.srtt_ps = t.srtt_ps;
    o.weight = t.weight;
    o.ce_echoed = t.ce;
    o.weight_cuts = t.cuts;
    o.int_high = t.int_high;
    if (i < qp.cc.lanes.size() && qp.cc.lanes[i].ctl) {
      o.cc_rate_bps = qp.cc.lanes[i].ctl->rate_bps();
      o.cc_window_bytes = qp.cc.lanes[i].ctl->window_bytes();
    }
  }
  return n;
}

}  // namespace sroce
