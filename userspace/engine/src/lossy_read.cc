// Lossy mode, READ responses (docs/lossy.md, "READ responses"): the
// responder sprays the responses of a READ whose request carried a trailer
// over its lanes, each with a trailer (lane, per-lane sequence, previous PSN
// of the lane), as the requester sprays requests. The requester places each
// response by its PSN (offset (PSN - first PSN) · MTU into the READ's SGEs),
// decides what is lost as the lossy receiver does for requests (a gap inside
// a lane at once, a PSN every lane has passed, a timer backstop), and asks
// for exactly the missing response PSNs: a READ request at the first missing
// PSN with the VA and length of the missing run (IBA 9.7: a duplicate READ
// request is re-executed from its PSN, VA and length; IRN, SIGCOMM 2018
// section 4: the requester recovers lost READ responses selectively, by
// asking again only for the lost ones). The responder serves such a request
// as a *repair* from the MR, without stopping the responses it is still
// sending (a go-back-N replay would).
#include <algorithm>
#include <bit>
#include <cstring>

#include "impl.h"

namespace sroce {

using namespace eng;

namespace {

using Impl = Engine::Impl;

constexpr uint32_t kMaxFires = 6;  // the response timer doubles at most 2^6 times


void count_drop(Impl& e, Qp& qp, RxDropReason r) {
  ++e.stats_.rx_dropped;
  ++e.stats_.rx_drop_reason[r];
  ++qp.stats.rx_dropped;
}

// First response PSN of w not yet placed in order (w.resp_bytes is the
// placed prefix, as in compatible mode).
uint32_t next_psn(const Qp& qp, const SendWqe& w) {
  return psn_add(w.first_psn, static_cast<int32_t>(w.resp_bytes / qp.mtu));
}

void ask(Lossy& l, uint32_t psn) {
  if (psn_bit(l.rd_ask, psn)) return;
  set_psn_bit(l.rd_ask, psn);
  ++l.rd_ask_n;
}
void unask(Lossy& l, uint32_t psn) {
  if (!psn_bit(l.rd_ask, psn)) return;
  clr_psn_bit(l.rd_ask, psn);
  --l.rd_ask_n;
}

Duration read_window(const EngineConfig& c, const Lossy& l) {
  const Duration w = std::max(c.lossy.reorder_timeout, Duration::nanos(1));
  return w * (int64_t{1} << std::min(l.rd_fires, kMaxFires));
}

}  // namespace

// A READ WQE whose request went out with a trailer: its responses come
// sprayed, with trailers, and are placed out of order (after a mid-stream
// switch the READs before S stay compatible).
bool Engine::Impl::lossy_read_sel(const Qp& qp, const SendWqe& w) const {
  return w.opcode == WrOpcode::kRdmaRead && w.started && w.lossy && qp.lossy.tx;
}

// The response window's base: the first unplaced PSN of the oldest lossy
// READ not finished. False: no such READ.
bool Engine::Impl::lossy_read_base(Qp& qp, uint32_t* base) {
  for (uint32_t i = qp.sq_head; i != qp.sq_tail && qp.wqe(i).started; ++i) {
    const SendWqe& w = qp.wqe(i);
    if (w.done || !lossy_read_sel(qp, w) || w.err != WcStatus::kSuccess) continue;
    *base = next_psn(qp, w);
    return true;
  }
  return false;
}

// Marks for a new request every unplaced response PSN in [from, to) of the
// unfinished lossy READs, inside the window; PSNs requested already only
// `again` (a timer: the repair may be lost too). Returns how many.
uint32_t Engine::Impl::lossy_read_ask_range(Qp& qp, uint32_t from, uint32_t to, bool again) {
  Lossy& l = qp.lossy;
  uint32_t base;
  if (!lossy_read_base(qp, &base)) return 0;
  const uint32_t end = psn_add(base, static_cast<int32_t>(kLossyWindow));
  uint32_t n = 0;
  for (uint32_t i = qp.sq_head; i != qp.sq_tail && qp.wqe(i).started; ++i) {
    const SendWqe& w = qp.wqe(i);
    if (w.done || !lossy_read_sel(qp, w) || w.err != WcStatus::kSuccess) continue;
    if (psn_diff(w.first_psn, end) >= 0) break;
    uint32_t q = next_psn(qp, w);
    if (psn_diff(from, q) > 0) q = from;
    uint32_t stop = psn_add(w.last_psn, 1);
    if (psn_diff(stop, to) > 0) stop = to;
    if (psn_diff(stop, end) > 0) stop = end;
    for (; psn_diff(q, stop) < 0; q = psn_add(q, 1)) {
      if (psn_bit(l.rd_have, q) || psn_bit(l.rd_ask, q) || (!again && psn_bit(l.rd_sent, q))) continue;
      ask(l, q);
      ++n;
    }
  }
  if (n) sched_req(qp);
  return n;
}

// ---------------------------------------------------------------- responder

// The trailer of one READ response (request trailer layout, docs/wire.md):
// lane and per-lane sequence, the previous response PSN of that lane, the
// byte offset in the READ. Picks the lane (round robin over the configured
// lanes) and its source port.
void Engine::Impl::lossy_read_trailer(Qp& qp, uint32_t psn, uint32_t res_first, bool retx,
                                      uint8_t* out, PacketMeta& meta) {
  Lossy& l = qp.lossy;
  const uint16_t n = static_cast<uint16_t>(std::clamp<uint32_t>(cfg_.lossy.lanes, 1, kMaxLanes));
  const uint8_t lane = static_cast<uint8_t>(l.rd_next_lane % n);
  l.rd_next_lane = static_cast<uint16_t>((lane + 1) % n);
  RdLaneTx& t = l.rd_tx[lane];
  sroce_leh_req leh{};
  leh.lane = lane;
  leh.flags = static_cast<uint8_t>((retx ? SROCE_LEH_F_RETX : 0) | ((n - 1) << SROCE_LEH_LANES_SHIFT));
  leh.lane_seq = t.seq++;
  leh.prev_psn = t.has_prev ? (t.prev_psn | SROCE_LEH_PSN_VALID) : 0;
  leh.offset = static_cast<uint32_t>(psn_diff(psn, res_first)) * qp.mtu;
  sroce_leh_req_write(out, &leh);
  t.prev_psn = psn;
  t.has_prev = true;
  meta.src_port = lane_port(qp, lane);
}

// A duplicate READ request inside the PSNs of a lossy READ: queue a repair
// of exactly [psn, psn + packets of len) (checked against the resource's
// range and the R_Key by the caller), less what the original stream has still to send.
// False: the repair queue is full (the requester's timer asks again).
bool Engine::Impl::lossy_read_repair(Qp& qp, const Resource& r, uint32_t psn, uint64_t host,
                                     uint64_t ref, uint32_t len) {
  Lossy& l = qp.lossy;
  // While the READ's original responses are still going out (r.cur_psn is the next), the
  // PSNs from there on are on their way in that stream: the repair stops before them. The
  // requester's response timer asks for the tail after a short silence (a responder paced,
  // or its loop descheduled); without this a 1 MiB READ went out twice (e2e_mpi_rc: some
  // 10 000 duplicate responses a run on a lossless veth).
  if (r.tx_pending && !r.answered) {
    const uint32_t k = npackets(len, qp.mtu);
    const auto sent = static_cast<uint32_t>(std::max(psn_diff(r.cur_psn, psn), 0));
    if (sent < k) {
      stats_.read_repair_psns_unsent += k - sent;
      if (sent == 0) return true;
      len = sent * qp.mtu;  // whole packets: the READ's last one is among the unsent
    }
  }
  if (l.rd_rep_n >= kRdRepairs) return false;
  RdRepair& p = l.rd_rep[(l.rd_rep_head + l.rd_rep_n) % kRdRepairs];
  p = RdRepair{};
  p.host = host;
  p.ref = ref;
  p.psn = psn;
  p.left = len;
  p.msn = r.msn;
  p.res_first = r.first_psn;
  p.res_last = r.last_psn;
  ++l.rd_rep_n;
  qp.stats.selective_retransmits += npackets(len, qp.mtu);
  sched_resp(qp);
  return true;
}

// One packet of the oldest repair (before any new response: a repair is a
// retransmission). 0: nothing built.
size_t Engine::Impl::lossy_read_repair_build(Qp& qp, uint8_t* out, PacketMeta& meta) {
  Lossy& l = qp.lossy;
  RdRepair& p = l.rd_rep[l.rd_rep_head];
  const uint32_t len = std::min(qp.mtu, p.left);
  const bool last = p.left <= qp.mtu;
  sroce_bth bth{};
  bth.pkey = qp.pkey;
  bth.dqpn = qp.attr.dest_qp_num;
  bth.psn = p.psn;
  bth.opcode = p.first ? (last ? SROCE_OP_READ_RESP_ONLY : SROCE_OP_READ_RESP_FIRST)
                       : (last ? SROCE_OP_READ_RESP_LAST : SROCE_OP_READ_RESP_MIDDLE);
  uint8_t* h = out + SROCE_BTH_LEN;
  if (p.first || last) {
    const sroce_aeth aeth{sroce_aeth_syndrome(SROCE_AETH_ACK, SROCE_AETH_CREDIT_INVALID),
                          p.msn & kPsnMask};
    sroce_aeth_write(h, &aeth);
    h += SROCE_AETH_LEN;
  }
  uint32_t crc_reg;
  uint32_t* const data_crc = fused_crc(crc_reg);  // the data's CRC while reading it
  const std::span<std::byte> dst{reinterpret_cast<std::byte*>(h), len};
  if (len && (!mr_live(p.ref) || !(data_crc ? mem_.read_mr_crc(mem_lkey(p.ref), p.host, dst, *data_crc)
                                            : mem_.read_mr(mem_lkey(p.ref), p.host, dst)))) {
    // The memory went away under an answered READ: drop the repair; the
    // requester's RTO ends the QP if it never gets the data.
    l.rd_rep_head = static_cast<uint8_t>((l.rd_rep_head + 1) % kRdRepairs);
    --l.rd_rep_n;
    return 0;
  }
  const uint32_t psn = p.psn;
  const uint32_t res_first = p.res_first;
  p.psn = psn_add(p.psn, 1);
  p.host += len;
  p.left -= len;
  p.first = false;
  if (last) {
    l.rd_rep_head = static_cast<uint8_t>((l.rd_rep_head + 1) % kRdRepairs);
    --l.rd_rep_n;
  }
  ++qp.stats.read_responses_sent;
  bth.pad = static_cast<uint8_t>((4 - (len & 3)) & 3);
  sroce_bth_write(out, &bth);
  if (qp.lossy.offer) out[8] |= SROCE_BTH8_SROCE_CAP;
  out[8] |= SROCE_BTH8_SROCE_EXT;
  fill_meta(qp, meta);
  uint8_t trailer[SROCE_LEH_LEN];
  lossy_read_trailer(qp, psn, res_first, true, trailer, meta);
  return finish_packet(out, static_cast<size_t>(h - out), len, meta, trailer, data_crc);
}

// ---------------------------------------------------------------- requester

// A READ response with a trailer (the READ went out in lossy form).
void Engine::Impl::lossy_on_read_resp(Qp& qp, const sroce_pkt& pkt, const sroce_leh_req& leh,
                                      Time now) {
  Lossy& l = qp.lossy;
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd)
    return count_drop(*this, qp, kRxDropQpState);
  const uint32_t psn = pkt.bth.psn;
  if (psn_diff(psn, qp.high_psn) >= 0) return count_drop(*this, qp, kRxDropUnexpectedResponse);
  uint32_t idx = qp.sq_head;
  for (; idx != qp.sq_tail && qp.wqe(idx).started; ++idx) {
    const SendWqe& c = qp.wqe(idx);
    if (psn_diff(psn, c.first_psn) >= 0 && psn_diff(psn, c.last_psn) <= 0) break;
  }
  if (idx == qp.sq_tail || !lossy_read_sel(qp, qp.wqe(idx)))
    return count_drop(*this, qp, kRxDropUnexpectedResponse);
  SendWqe& w = qp.wqe(idx);
  // Responses are generated in request order (IBA 9.7): every request
  // before this READ was executed, whatever the lanes did to the order. But
  // this response may have overtaken (on a faster lane) an atomic ACK or a
  // compatible READ response on lane 0: no implied NAK from it.
  l.rd_evidence = true;
  comp_retire(qp, psn_add(w.first_psn, -1), now);
  l.rd_evidence = false;
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return;

  // Lanes (PSN-PATH, as lossy_rx_request does for requests): a jump in the
  // lane's sequence means the response it carried before this one is lost.
  const uint8_t lane = static_cast<uint8_t>(leh.lane % kMaxLanes);
  RdLaneRx& lr = l.rd_rx[lane];
  l.rd_peer_lanes = std::min<uint16_t>(sroce_leh_flags_lanes(leh.flags), kMaxLanes);
  const auto g = static_cast<int16_t>(leh.lane_seq - lr.exp_seq);
  if (g >= 0) lr.exp_seq = static_cast<uint16_t>(leh.lane_seq + 1);
  const bool retx = (leh.flags & SROCE_LEH_F_RETX) != 0;
  if (!retx && (!lr.used || psn_diff(psn, lr.hi_new) > 0)) {
    lr.hi_new = psn;
    lr.used = true;
  }
  if (!l.rd_high_valid || psn_diff(psn_add(psn, 1), l.rd_high) > 0) {
    l.rd_high = psn_add(psn, 1);
    l.rd_high_valid = true;
  }

  uint32_t base = 0;
  const bool placed_before =
      w.done || psn_diff(psn, next_psn(qp, w)) < 0 || psn_bit(l.rd_have, psn);
  bool placed = false;
  if (!placed_before && lossy_read_base(qp, &base) &&
      psn_diff(psn, base) < static_cast<int32_t>(kLossyWindow)) {
    const uint32_t off = static_cast<uint32_t>(psn_diff(psn, w.first_psn)) * qp.mtu;
    const uint32_t want = psn == w.last_psn ? w.length - off : qp.mtu;
    if (pkt.payload_len != want) {
      req_fatal(qp, WcStatus::kBadRespErr);  // IBA 9.9: malformed response
      return;
    }
    if (want) {
      const MemStatus ms =
          scatter_wqe(qp, idx, off, reinterpret_cast<const std::byte*>(pkt.payload), want);
      if (ms != MemStatus::kOk) {
        req_fatal(qp, ms == MemStatus::kAccess ? WcStatus::kLocAccessErr : WcStatus::kLocProtErr);
        return;
      }
    }
    set_psn_bit(l.rd_have, psn);
    unask(l, psn);
    clr_psn_bit(l.rd_sent, psn);
    placed = true;
    // The placed prefix moves over what arrived (the bits are cleared as it
    // passes them, so a bit is only ever a PSN placed ahead of the prefix).
    for (uint32_t q = next_psn(qp, w); !w.done && psn_bit(l.rd_have, q); q = next_psn(qp, w)) {
      clr_psn_bit(l.rd_have, q);
      if (q == w.last_psn) {
        w.resp_bytes = w.length;
        w.done = true;
      } else {
        w.resp_bytes += qp.mtu;
      }
    }
  } else {
    ++stats_.rx_drop_reason[placed_before ? kRxDropDuplicate : kRxDropOutOfSequence];
    ++stats_.rx_dropped;
    ++qp.stats.rx_dropped;
  }
  if (g > 0 && (leh.prev_psn & SROCE_LEH_PSN_VALID)) {
    const uint32_t pp = leh.prev_psn & kPsnMask;
    lossy_read_ask_range(qp, pp, psn_add(pp, 1), false);
  }
  // Every lane of the responder delivered a first transmission above q: q's
  // lane did too, so q is lost (the responder sends each READ's responses
  // in PSN order, READs in request order, so each lane's PSNs increase).
  bool all = true;
  uint32_t low = 0;
  for (uint16_t i = 0; i < l.rd_peer_lanes && all; ++i) {
    const RdLaneRx& x = l.rd_rx[i];
    if (!x.used) all = false;
    else if (i == 0 || psn_diff(x.hi_new, low) < 0) low = x.hi_new;
  }
  if (all && lossy_read_base(qp, &base)) lossy_read_ask_range(qp, base, low, false);

  if (placed) {
    l.rd_fires = 0;
    if (idx == qp.sq_head && !w.done) {
      const uint32_t in_order = psn_add(next_psn(qp, w), -1);
      if (psn_diff(in_order, qp.acked_psn) > 0) qp.acked_psn = in_order;
    }
    if (w.done) {
      l.rd_evidence = true;
      comp_retire(qp, idx == qp.sq_head ? w.last_psn : psn_add(w.first_psn, -1), now);
      l.rd_evidence = false;
      if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return;
    }
    comp_progress(qp, now);
  }
  lossy_read_arm(qp, now);
}

// The head WQE is a compatible READ or an atomic still unanswered, with
// responses of later lossy READs (sprayed, maybe on faster lanes than lane 0,
// where its answer comes) beyond it: the implied NAK waits for the response
// timer instead of firing at once.
bool Engine::Impl::head_overtaken(Qp& qp) const {
  if (qp.sq_head == qp.sq_tail) return false;
  const SendWqe& h = qp.sq[qp.sq_head & qp.sq_mask];
  return h.started && is_rd_atomic(h.opcode) && !h.done && !lossy_read_sel(qp, h) &&
         h.err == WcStatus::kSuccess && psn_diff(qp.acked_psn, h.last_psn) >= 0;
}

// The response timer (a window after the last response, doubling while
// nothing arrives): while a lossy READ the responder has executed is
// unfinished, ask for whatever of it is still missing, the tail included.
void Engine::Impl::lossy_read_arm(Qp& qp, Time now) {
  Lossy& l = qp.lossy;
  uint32_t base;
  if (!lossy_read_base(qp, &base) && !head_overtaken(qp)) {
    l.rd_deadline = Time::never();
    return;
  }
  l.rd_deadline = now + read_window(cfg_, l);
  timer_update(qp);
}

void Engine::Impl::lossy_read_timer(Qp& qp, Time now) {
  Lossy& l = qp.lossy;
  l.rd_deadline = Time::never();
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return;
  if (head_overtaken(qp) && !(qp.implied_valid && qp.implied_idx == qp.sq_head)) {
    // IBA 9.7 implied NAK, a window late (its answer had that long to come
    // on lane 0): ask again for the head READ/atomic, once per WQE until a
    // timeout, as compatible mode does.
    qp.implied_valid = true;
    qp.implied_idx = qp.sq_head;
    comp_retry(qp, req_resume_psn(qp), now, true);
    if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return;
  }
  // Evidence that the responder executed a READ: a response of it or of a
  // later READ, or an acknowledgement at or beyond its first PSN.
  uint32_t e = psn_add(qp.acked_psn, 1);
  if (l.rd_high_valid && psn_diff(l.rd_high, e) > 0) e = l.rd_high;
  uint32_t base;
  if (!lossy_read_base(qp, &base)) return;
  uint32_t to = e;
  bool executed = false;
  for (uint32_t i = qp.sq_head; i != qp.sq_tail && qp.wqe(i).started; ++i) {
    const SendWqe& w = qp.wqe(i);
    if (w.done || !lossy_read_sel(qp, w) || psn_diff(w.first_psn, e) >= 0) continue;
    to = psn_add(w.last_psn, 1);  // the tail of an executed READ too
    executed = true;
  }
  if (!executed) return;  // nothing executed is missing: the RTO covers the rest
  lossy_read_ask_range(qp, base, to, true);
  if (l.rd_fires < kMaxFires) ++l.rd_fires;
  lossy_read_arm(qp, now);
}

// One re-request: a READ request for the lowest run of asked PSNs of one
// READ (its PSN, and the VA and length of exactly that run). 0: none.
size_t Engine::Impl::lossy_read_rerequest(Qp& qp, uint8_t* out, PacketMeta& meta, Time now) {
  Lossy& l = qp.lossy;
  uint32_t base;
  if (!lossy_read_base(qp, &base)) {
    std::memset(l.rd_ask, 0, sizeof l.rd_ask);
    l.rd_ask_n = 0;
    return 0;
  }
  for (uint32_t k = 0; k < kLossyWindow && l.rd_ask_n > 0; ++k) {
    const uint32_t q = psn_add(base, static_cast<int32_t>(k));
    if (!psn_bit(l.rd_ask, q)) continue;
    unask(l, q);
    set_psn_bit(l.rd_sent, q);
    uint32_t i = qp.sq_head;
    for (; i != qp.sq_tail && qp.wqe(i).started; ++i)
      if (psn_diff(q, qp.wqe(i).first_psn) >= 0 && psn_diff(q, qp.wqe(i).last_psn) <= 0) break;
    if (i == qp.sq_tail || !qp.wqe(i).started) continue;
    const SendWqe& w = qp.wqe(i);
    if (w.done || !lossy_read_sel(qp, w) || psn_diff(q, next_psn(qp, w)) < 0 ||
        psn_bit(l.rd_have, q))
      continue;  // placed meanwhile
    // The run: consecutive asked PSNs of this READ.
    uint32_t end = q;
    while (end != w.last_psn && k + 1 < kLossyWindow && psn_bit(l.rd_ask, psn_add(end, 1))) {
      end = psn_add(end, 1);
      unask(l, end);
      set_psn_bit(l.rd_sent, end);
      ++k;
    }
    const uint32_t off = static_cast<uint32_t>(psn_diff(q, w.first_psn)) * qp.mtu;
    const uint32_t stop = end == w.last_psn
                              ? w.length
                              : static_cast<uint32_t>(psn_diff(end, w.first_psn) + 1) * qp.mtu;
    sroce_bth bth{};
    bth.opcode = static_cast<uint8_t>(unsigned{SROCE_OP_READ_REQUEST} | unsigned{SROCE_TRANSPORT_RC});
    bth.pkey = qp.pkey;
    bth.dqpn = qp.attr.dest_qp_num;
    bth.psn = q;
    bth.ack_req = true;
    sroce_bth_write(out, &bth);
    if (l.offer) out[8] |= SROCE_BTH8_SROCE_CAP;
    out[8] |= SROCE_BTH8_SROCE_EXT;
    const sroce_reth r{w.remote_addr + off, w.rkey, stop - off};
    sroce_reth_write(out + SROCE_BTH_LEN, &r);
    fill_meta(qp, meta);
    const uint8_t lane = lossy_pick_lane(qp, now, true);
    LaneTx& lt = l.lanes[lane];
    sroce_leh_req leh{};
    leh.lane = lane;
    leh.flags = static_cast<uint8_t>(SROCE_LEH_F_RETX | ((l.nlanes - 1) << SROCE_LEH_LANES_SHIFT));
    leh.lane_seq = lt.seq++;
    leh.prev_psn = lt.has_prev ? (lt.prev_psn | SROCE_LEH_PSN_VALID) : 0;
    leh.offset = off;
    leh.va = w.remote_addr + off;
    leh.rkey = w.rkey;
    uint8_t trailer[SROCE_LEH_LEN];
    sroce_leh_req_write(trailer, &leh);
    lt.prev_psn = q;
    lt.has_prev = true;
    ++lt.tx;
    ++lt.retx;
    meta.src_port = lane_port(qp, lane);
    ++qp.stats.retransmits;
    ++stats_.retransmits;
    comp_arm_retx(qp, now);
    return finish_packet(out, SROCE_BTH_LEN + SROCE_RETH_LEN, 0, meta, trailer);
  }
  return 0;
}

void Engine::Impl::lossy_read_reset(Qp& qp, bool tx) {
  Lossy& l = qp.lossy;
  if (tx) {
    std::memset(l.rd_have, 0, sizeof l.rd_have);
    std::memset(l.rd_ask, 0, sizeof l.rd_ask);
    std::memset(l.rd_sent, 0, sizeof l.rd_sent);
    l.rd_ask_n = 0;
    l.rd_high = 0;
    l.rd_high_valid = false;
    l.rd_peer_lanes = 1;
    l.rd_fires = 0;
    l.rd_deadline = Time::never();
    for (RdLaneRx& x : l.rd_rx) x = RdLaneRx{};
  } else {
    l.rd_next_lane = 0;
    l.rd_rep_head = l.rd_rep_n = 0;
    for (RdLaneTx& x : l.rd_tx) x = RdLaneTx{};
  }
}

}  // namespace sroce
