// Congestion-control glue (congestion.h; docs/cc/README.md, "Integration").
//
// Requester side: a QP may send a request packet when its window allows
// (bytes in flight + one packet <= window, or nothing in flight) and its
// pacer's time has come; otherwise it leaves the transmit list until an ACK
// (window) or the pacing timer (rate) puts it back, so one slow QP never
// holds a packet in front of the others. Responder side: the DCQCN
// notification point turns CE-marked requests into CNPs (Annex A17.9.3),
// and the INT records of the newest data packet ride back on ACKs.
#include "congestion.h"

#include <algorithm>
#include <cstring>

#include "impl.h"

namespace sroce::eng {

namespace {

// Ethernet header + FCS + preamble and inter-frame gap + IPv4 + UDP: what a
// RoCEv2 UDP payload costs on the wire beyond its own bytes (the pacer
// spaces frames by their wire time).
constexpr uint32_t kWireOverhead = 14 + 4 + 20 + 20 + 8;

// DSCP 48 (CS6), not ECN-capable: how ConnectX NICs send CNPs (the network
// control class, so CNPs are not stuck behind data or marked themselves).
constexpr uint8_t kCnpTrafficClass = 48 << 2;

bool has_controller(const Qp& qp) { return static_cast<bool>(qp.cc.ctl); }

// Payload bytes in flight: the PSNs sent and not acknowledged, at one MTU
// each (an upper bound: the last packet of a message may be shorter; a
// per-byte count would need the go-back-N rewind to recount it).
uint64_t inflight_bytes(const Qp& qp) {
  const int32_t n = psn_diff(qp.req_psn, psn_add(qp.acked_psn, 1));
  return n > 0 ? static_cast<uint64_t>(n) * qp.mtu : 0;
}

// After any controller event: export rate and window, and move a pending
// pacing hold earlier if the rate went up (the pacer recomputes the gap from
// the current rate, as a hardware rate limiter does: a flow cut to 1 Mb/s
// must not sit out a 33 ms gap after it recovered).
void publish(Engine::Impl& e, Qp& qp, Time now) {
  const uint64_t rate = qp.cc.ctl->rate_bps();
  if (qp.cc.pace_at != Time::never() && rate != qp.stats.cc_rate_bps) {
    const Time t = qp.cc.pacer.next_send(now, rate);
    if (t < qp.cc.pace_at) {
      qp.cc.pace_at = t;
      e.timer_update(qp);
    }
  }
  qp.stats.cc_rate_bps = rate;
  if (rate != 0 && (qp.stats.cc_rate_min_bps == 0 || rate < qp.stats.cc_rate_min_bps)) qp.stats.cc_rate_min_bps = rate;
  qp.stats.cc_window_bytes = qp.cc.ctl->window_bytes();
  qp.stats.cc_algorithm = static_cast<int8_t>(qp.cc.ctl->algorithm());
  if (const auto* l = qp.cc.ctl->get<cc::Ltp>()) {
    qp.stats.cc_est_bps = l->estimate_bps();
    qp.stats.ltp_decisions = l->stats().decisions;
    qp.stats.ltp_fallback_mis = l->stats().fallback_mis;
    qp.stats.ltp_missing_mis = l->stats().missing;
    qp.stats.ltp_divergences = l->stats().divergences;
    qp.stats.ltp_info_gain = l->stats().info_gain;
  }
}

}  // namespace

CcEngine::CcEngine(const EngineConfig& cfg)
    : on(cfg.cc.enable),
      np(cfg.cc.enable && cfg.cc.notification_point),
      // DCQCN reads no INT: its packets carry no shim.
      intw(cfg.cc.enable && cfg.cc.int_telemetry && cfg.cc.config.algorithm != cc::Algorithm::kDcqcn) {
  if (on) nic = std::make_unique<cc::NicState>(cfg.cc.line_rate_bps);
}

// ---- INT on the wire (proto/int.h; docs/wire.md, "INT")

namespace {

// One wire record to the controllers' IntHop (counters still 48 bits).
cc::IntHop decode_hop(const uint8_t* p) {
  sroce_int_hop w;
  sroce_int_hop_read(p, &w);
  cc::IntHop h;
  h.port_id = w.node_port;
  h.ts = Time{static_cast<int64_t>(w.ts_ps)};
  h.tx_bytes = w.tx_bytes;
  h.qlen_bytes = w.qlen;
  h.link_bps = static_cast<uint64_t>(w.link_mbps) * 1'000'000ull;
  h.buffer_flag = (w.flags & SROCE_INT_HOP_F_SB) != 0;
  return h;
}

// The 64-bit value nearest `prev` whose low 48 bits are `raw`: counters
// move less than 2^47 between two echoes of one hop (140 s, 140 TB), and an
// older echo (lanes reorder ACKs) must read as a step back, not a wrap.
uint64_t widen48(uint64_t prev, uint64_t raw) {
  int64_t d = static_cast<int64_t>((raw - prev) & SROCE_INT_MASK48);
  if (d >= (int64_t{1} << 47)) d -= int64_t{1} << 48;
  return prev + static_cast<uint64_t>(d);
}

// The received ACK's INT echo for `qp`, its 48-bit counters widened (once)
// against the previous echo of the same (switch, port) at the same hop.
std::span<const cc::IntHop> echo_hops(Engine::Impl& e, Qp& qp) {
  const uint8_t n = e.cc_.rx_echo_n;
  if (n == 0) return {};
  if (!e.cc_.rx_echo_widened) {
    e.cc_.rx_echo_widened = true;
    for (uint8_t i = 0; i < n; ++i) {
      cc::IntHop& h = e.cc_.rx_echo[i];
      if (i < qp.cc.int_last_n && qp.cc.int_last[i].port_id == h.port_id) {
        const cc::IntHop& p = qp.cc.int_last[i];
        h.ts = Time{static_cast<int64_t>(widen48(static_cast<uint64_t>(p.ts.ps), static_cast<uint64_t>(h.ts.ps)))};
        h.tx_bytes = widen48(p.tx_bytes, h.tx_bytes);
      }
      qp.cc.int_last[i] = h;
    }
    qp.cc.int_last_n = n;
  }
  return {e.cc_.rx_echo.data(), n};
}

}  // namespace

uint8_t cc_bth_bits(const Engine::Impl& e, const Qp& qp) {
  return e.cc_.intw && qp.is_rc() ? SROCE_BTH8_INT_CAP : 0;
}

size_t cc_add_shim(Engine::Impl& e, Qp& qp, uint8_t* buf, size_t n, size_t cap) {
  if (!e.cc_.intw || !qp.cc.int_peer || !qp.is_rc() || n + SROCE_INT_SHIM_LEN > cap) return n;
  // The ICRC was computed without the shim (the switches change it): the
  // receiver strips it before checking, as an INT sink does.
  std::memmove(buf + SROCE_INT_SHIM_LEN, buf, n);
  sroce_int_shim_write(buf, cc::kMaxHops);
  ++qp.stats.int_shims_sent;
  return n + SROCE_INT_SHIM_LEN;
}

bool cc_rx_shim(Engine::Impl& e, const uint8_t* buf, size_t len, bool trimmed, size_t& skip) {
  sroce_int_shim s{};
  // A trimmed packet keeps the shim and the headers, not the ICRC.
  if (sroce_int_shim_parse(buf, trimmed ? len + SROCE_ICRC_LEN : len, &s) != SROCE_INT_OK) return false;
  skip = sroce_int_shim_bytes(&s);
  e.cc_.rx_has_shim = true;
  e.cc_.rx_shim = buf + SROCE_INT_SHIM_LEN;
  e.cc_.rx_shim_n = s.count;
  e.cc_.rx_shim_flags = s.flags;
  return true;
}

bool cc_rx_echo(Engine::Impl& e, const uint8_t* buf, size_t len, size_t& tail) {
  // The echo sits right before the ICRC, after BTH + AETH at least.
  const size_t min = SROCE_BTH_LEN + SROCE_AETH_LEN + SROCE_ICRC_LEN;
  if (len < min) return false;
  uint8_t n = 0, flags = 0;
  const uint8_t* end = buf + len - SROCE_ICRC_LEN;
  if (sroce_int_echo_parse(end, len - min, &n, &flags) != SROCE_INT_OK) return false;
  tail = sroce_int_echo_bytes(n);
  // Records are newest (last switch) first on the wire; controllers want
  // the forward path's first hop first.
  const uint8_t* rec = end - tail;
  for (uint8_t i = 0; i < n; ++i)
    e.cc_.rx_echo[i] = decode_hop(rec + static_cast<size_t>(n - 1 - i) * SROCE_INT_HOP_LEN);
  e.cc_.rx_echo_n = n;
  return true;
}

bool cc_rx_check(Engine::Impl& e, Qp& qp, const uint8_t* bth, bool is_ack) {
  const bool echo = e.cc_.rx_echo_n != 0;
  if (!e.cc_.intw || !qp.is_rc()) return !echo && !e.cc_.rx_has_shim;
  if ((bth[8] & SROCE_BTH8_INT_CAP) && !qp.cc.int_peer) {
    qp.cc.int_peer = true;
    qp.cc.int_last_n = 0;
  }
  return !echo || is_ack;
}

void cc_qp_create(Engine::Impl& e, Qp& qp) {
  qp.cc = CcQp{};
  if (!e.cc_.on || !qp.is_rc()) return;
  qp.cc.np = cc::DcqcnNotificationPoint(e.cfg_.cc.config.dcqcn);
  // The ring covers the largest window of PSNs the requester may have out.
  const uint32_t window = std::max<uint32_t>(e.cfg_.max_unacked_psns, kLossyWindow);
  uint32_t n = 64;
  while (n < window && n < 4096) n <<= 1;
  qp.cc.sent.assign(n, CcSent{});
  qp.cc.sent_mask = n - 1;
  if (e.cfg_.cc.per_lane && e.cfg_.lossy.enable)
    qp.cc.lanes.resize(std::clamp<uint32_t>(e.cfg_.lossy.lanes, 1, kMaxLanes));
}

void cc_qp_start(Engine::Impl& e, Qp& qp, Time now) {
  if (!e.cc_.on || !qp.is_rc()) return;
  const CcEngineConfig& c = e.cfg_.cc;
  qp.cc.ctl.start(c.config, cc::FlowParams{c.line_rate_bps, c.base_rtt, qp.mtu}, e.cc_.nic.get());
  // LTP's dither: one PRNG stream per QP and lane (engine seed, QPN, lane).
  const uint64_t ltp_seed = (e.cfg_.seed ^ c.config.ltp.seed) * 0x100000001b3ull + qp.qpn;
  if (auto* l = qp.cc.ctl->get<cc::Ltp>()) l->reseed(ltp_seed << 5);
  qp.cc.pacer = cc::Pacer{};
  qp.cc.pace_at = Time::never();
  qp.cc.active = false;
  for (CcSent& s : qp.cc.sent) s = CcSent{};
  // Lane controllers: no NIC view (Odin's ratio is the QP controller's; a
  // lane is a path of the QP, not another flow of the host).
  uint64_t lane_no = 0;
  for (CcLane& l : qp.cc.lanes) {
    l.ctl.start(c.config, cc::FlowParams{c.line_rate_bps, c.base_rtt, qp.mtu}, nullptr);
    if (auto* t = l.ctl->get<cc::Ltp>()) t->reseed((ltp_seed << 5) + ++lane_no);
    l.pacer = cc::Pacer{};
    l.inflight = 0;
  }
  publish(e, qp, now);
}

void cc_qp_stop(Engine::Impl& e, Qp& qp) {
  if (!e.cc_.on) return;
  qp.cc.ctl.stop();
  for (CcLane& l : qp.cc.lanes) l.ctl.stop();
  qp.cc.pace_at = Time::never();
  qp.cc.cnp_pending = false;
  qp.cc.echo_n = 0;
  qp.cc.int_last_n = 0;
  qp.cc.active = false;
}

bool cc_may_send(Engine::Impl& e, Qp& qp, Time now) {
  if (!e.cc_.on || !has_controller(qp)) return true;
  // A retransmission the receiver asked for (lossy mode) is in the window
  // already: only the rate applies to it.
  const bool retx = qp.lossy.tx && qp.lossy.rtx_count > 0;
  const uint64_t w = qp.cc.ctl->window_bytes();
  if (!retx && w != cc::kNoWindow) {
    const uint64_t f = inflight_bytes(qp);
    if (f > 0 && f + qp.mtu > w) {
      ++qp.stats.cc_window_stalls;
      return false;  // the next ACK calls sched_req
    }
  }
  Time t = qp.cc.pacer.next_send(now, qp.cc.ctl->rate_bps());
  // Per lane: some active lane's controller must allow a packet; else wait
  // for the earliest lane pacing time, or for an ACK (lane windows).
  if (t <= now && !retx && qp.lossy.tx && !qp.cc.lanes.empty()) {
    Time soonest = Time::never();
    bool any = false;
    for (uint16_t i = 0; i < qp.lossy.nlanes && i < qp.cc.lanes.size() && !any; ++i) {
      if (!qp.lossy.lanes[i].active) continue;
      CcLane& l = qp.cc.lanes[i];
      const uint64_t lw = l.ctl->window_bytes();
      if (lw != cc::kNoWindow && l.inflight > 0 && l.inflight + qp.mtu > lw) continue;
      const Time lt = l.pacer.next_send(now, l.ctl->rate_bps());
      if (lt <= now) any = true;
      soonest = std::min(soonest, lt);
    }
    if (!any) {
      if (soonest == Time::never()) {
        ++qp.stats.cc_window_stalls;
        return false;  // every lane's window is full: the next ACK calls sched_req
      }
      t = soonest;
    }
  }
  if (t > now) {
    ++qp.stats.cc_paced;
    qp.cc.pace_at = t;
    e.timer_update(qp);
    return false;
  }
  return true;
}

bool cc_nothing_in_flight(Engine::Impl& e, Qp& qp) {
  if (!e.cc_.on || !has_controller(qp)) return false;
  if (qp.lossy.tx && qp.lossy.rtx_count > 0) return false;
  // Only the WQE being sent is outstanding (none sent in full awaits its
  // ACK or READ/atomic response) and every PSN of it sent is acknowledged.
  if (qp.sq_head == qp.sq_next && qp.rd_atomic_inflight == 0 && inflight_bytes(qp) == 0 &&
      psn_diff(qp.high_psn, qp.req_psn) <= 0)
    return true;
  // Rewound (compatible mode) and the pacer has not let the oldest
  // unacknowledged packet out again: no request is out to time.
  return !qp.lossy.tx && psn_diff(qp.req_psn, psn_add(qp.acked_psn, 1)) <= 0;
}

bool cc_want_ack(Engine::Impl& e, Qp& qp) {
  if (!e.cc_.on || !has_controller(qp)) return false;
  // pkts_since_ackreq was counted for this packet already.
  if (qp.pkts_since_ackreq >= e.cfg_.cc.ack_every) return true;
  const uint64_t w = qp.cc.ctl->window_bytes();
  return w != cc::kNoWindow && inflight_bytes(qp) + 2ull * qp.mtu > w;
}

void cc_on_sent(Engine::Impl& e, Qp& qp, uint32_t psn, uint32_t payload, size_t len, bool resend,
                PacketMeta& meta, Time now) {
  if (!e.cc_.on || !has_controller(qp)) return;
  // Data packets are ECN-capable, ECT(0) (RFC 3168; DCQCN needs the marks).
  meta.traffic_class = static_cast<uint8_t>((meta.traffic_class & ~3u) | 2u);
  // With INT the packet grows on its way: the shim here, a record per switch
  // (as many as the last echo had). Pacing by that size keeps a flow at
  // line rate from building a queue of INT bytes at every hop.
  const size_t int_bytes =
      qp.cc.int_peer && e.cc_.intw ? SROCE_INT_SHIM_LEN + size_t{qp.cc.int_last_n} * SROCE_INT_HOP_LEN : 0;
  qp.cc.pacer.on_sent(now, static_cast<uint32_t>(len + int_bytes) + kWireOverhead);
  CcSent& s = qp.cc.sent[psn & qp.cc.sent_mask];
  s.at_ps = now.ps;
  s.psn = psn;
  s.bytes = static_cast<uint16_t>(std::min<uint32_t>(payload, UINT16_MAX));
  s.retx = resend ? 1 : 0;
  qp.cc.active = true;
  qp.cc.ctl->on_send({now, payload, resend});
  // Lossy mode resends a PSN only when the receiver reported it missing
  // (SACK hole, trimmed packet) or the RTO fired: each such resend is a loss
  // signal (compatible mode reports its NAKs and timeouts from the completer).
  if (resend && qp.lossy.tx) qp.cc.ctl->on_loss({now, cc::LossKind::kNak, payload});
  publish(e, qp, now);
}

void cc_on_drained(Engine::Impl& e, Qp& qp, Time now) {
  if (!e.cc_.on || !has_controller(qp)) return;
  // on_idle means "nothing left to send" (cc.h); the ACK path below calls it
  // again when everything is acknowledged (idempotent).
  qp.cc.ctl->on_idle(now);
}

void cc_on_request(Engine::Impl& e, Qp& qp, const PacketMeta& meta, Time now) {
  if (!e.cc_.on || !qp.is_rc()) return;
  // A shim says the peer is an INT source that parses echoes; its records
  // (if the fabric stamped any) are what the next ACKs echo.
  if (e.cc_.intw && e.cc_.rx_has_shim) {
    qp.cc.int_echo_ok = true;
    if (e.cc_.rx_shim_n != 0) {
      std::memcpy(qp.cc.echo.data(), e.cc_.rx_shim, size_t{e.cc_.rx_shim_n} * SROCE_INT_HOP_LEN);
      qp.cc.echo_n = e.cc_.rx_shim_n;
      qp.cc.echo_flags = e.cc_.rx_shim_flags;
    }
  }
  // Annex A17.9.3: a CE-marked packet makes the receiver (the notification
  // point) send a CNP to the sender's QP, at most one per interval.
  if (e.cc_.np && (meta.traffic_class & 3) == 3 && qp.cc.np.on_marked_packet(now)) {
    qp.cc.cnp_pending = true;
    e.sched_resp(qp);
  }
  if (qp.cc.np.next_timer() != Time::never()) e.timer_update(qp);
}

size_t cc_build_cnp(Engine::Impl& e, Qp& qp, uint8_t* out, PacketMeta& meta) {
  if (!qp.cc.cnp_pending) return 0;
  qp.cc.cnp_pending = false;
  const size_t hdr = sroce_cnp_write(out, qp.attr.dest_qp_num, qp.pkey);
  e.fill_meta(qp, meta);
  meta.traffic_class = kCnpTrafficClass;
  ++qp.stats.cnps_sent;
  return e.finish_packet(out, hdr, 0, meta);
}

size_t cc_on_response_built(Engine::Impl& e, Qp& qp, uint8_t* pkt, size_t n, const PacketMeta& meta) {
  if (!e.cc_.intw || !qp.cc.int_echo_ok || qp.cc.echo_n == 0) return n;
  if ((pkt[0] & 0x1f) != SROCE_OP_ACK || n < SROCE_BTH_LEN + SROCE_ICRC_LEN) return n;
  // The echo goes where the ICRC was (after the lossy trailer, if any); the
  // ICRC is computed again over the longer packet.
  uint8_t* at = pkt + n - SROCE_ICRC_LEN;
  const size_t rec = size_t{qp.cc.echo_n} * SROCE_INT_HOP_LEN;
  std::memcpy(at, qp.cc.echo.data(), rec);
  sroce_int_echo_footer_write(at + rec, qp.cc.echo_n, qp.cc.echo_flags);
  pkt[8] |= SROCE_BTH8_INT_ECHO;
  ++qp.stats.int_echoes_sent;
  return e.finish_packet(pkt, n - SROCE_ICRC_LEN + sroce_int_echo_bytes(qp.cc.echo_n), 0, meta, nullptr);
}

bool cc_on_cnp(Engine::Impl& e, const sroce_pkt& pkt, Time now) {
  if (!e.cc_.on) return false;
  const uint32_t s = e.qp_slot(pkt.bth.dqpn);
  if (s == kNone) return false;
  Qp& qp = e.qps_[s];
  if (!qp.is_rc() || !has_controller(qp)) return false;
  ++qp.stats.cnps_received;
  ++qp.stats.rx_packets;
  qp.cc.ctl->on_cnp(now);
  publish(e, qp, now);
  if (qp.cc.ctl->next_timer() != Time::never()) e.timer_update(qp);
  return true;
}

void cc_on_acked(Engine::Impl& e, Qp& qp, uint32_t before, Time now) {
  if (!e.cc_.on || !has_controller(qp)) return;
  const int32_t d = psn_diff(qp.acked_psn, before);
  if (d <= 0) return;
  // Newly acknowledged payload, and the RTT of the newest acknowledged PSN
  // unless it was resent (Karn).
  uint64_t bytes = 0;
  if (static_cast<uint32_t>(d) > qp.cc.sent_mask) {
    bytes = static_cast<uint64_t>(d) * qp.mtu;
  } else {
    for (int32_t i = 1; i <= d; ++i) {
      const uint32_t p = psn_add(before, i);
      const CcSent& s = qp.cc.sent[p & qp.cc.sent_mask];
      bytes += s.psn == p ? s.bytes : qp.mtu;
    }
  }
  cc::AckEvent ev;
  ev.now = now;
  ev.acked_bytes = bytes;
  const CcSent& last = qp.cc.sent[qp.acked_psn & qp.cc.sent_mask];
  if (last.psn == qp.acked_psn && !last.retx) ev.rtt = Duration::picos(now.ps - last.at_ps);
  if (const PacketMeta* m = e.cc_.rx)
    ev.path_hops = m->hop_limit < 64 ? static_cast<uint8_t>(64 - m->hop_limit) : 0;
  ev.hops = echo_hops(e, qp);
  if (!ev.hops.empty()) ++qp.stats.int_echoes_received;
  qp.cc.ctl->on_ack(ev);
  // Everything sent is acknowledged: no lane has bytes in flight (whatever
  // path acknowledged them: compatible PSNs before the switch, a rewind).
  if (psn_diff(qp.req_psn, psn_add(qp.acked_psn, 1)) <= 0)
    for (CcLane& l : qp.cc.lanes) l.inflight = 0;
  // Nothing queued and nothing in flight: the flow is idle (Odin leaves the
  // NIC's demand until its next packet).
  if (qp.cc.active && qp.sq_head == qp.sq_tail) {
    qp.cc.active = false;
    qp.cc.ctl->on_idle(now);
  }
  publish(e, qp, now);
  if (qp.cc.ctl->next_timer() != Time::never()) e.timer_update(qp);
}

void cc_on_loss(Engine::Impl& e, Qp& qp, cc::LossKind kind, Time now) {
  if (!e.cc_.on || !has_controller(qp)) return;
  qp.cc.ctl->on_loss({now, kind, qp.mtu});
  publish(e, qp, now);
}

// ---- per-lane controllers

namespace {
CcLane* lane_cc(Qp& qp, uint8_t lane) {
  return lane < qp.cc.lanes.size() && qp.cc.lanes[lane].ctl ? &qp.cc.lanes[lane] : nullptr;
}
}  // namespace

bool cc_lane_allows(Engine::Impl& e, const Qp& qp, uint8_t lane, Time now) {
  if (!e.cc_.on || lane >= qp.cc.lanes.size() || !qp.cc.lanes[lane].ctl) return true;
  const CcLane& l = qp.cc.lanes[lane];
  const uint64_t w = l.ctl->window_bytes();
  if (w != cc::kNoWindow && l.inflight > 0 && l.inflight + qp.mtu > w) return false;
  return l.pacer.next_send(now, l.ctl->rate_bps()) <= now;
}

void cc_lane_sent(Engine::Impl& e, Qp& qp, uint8_t lane, uint32_t psn, uint32_t payload, size_t len,
                  bool resend, Time now) {
  if (!e.cc_.on) return;
  CcLane* l = lane_cc(qp, lane);
  if (!l) return;
  (void)psn;
  l->pacer.on_sent(now, static_cast<uint32_t>(len) + kWireOverhead);
  if (!resend) l->inflight += payload;
  l->ctl->on_send({now, payload, resend});
}

void cc_lane_acked(Engine::Impl& e, Qp& qp, uint8_t lane, uint32_t psn, Duration rtt, uint8_t echo_lane,
                   Time now) {
  if (!e.cc_.on) return;
  CcLane* l = lane_cc(qp, lane);
  if (!l) return;
  const CcSent& s = qp.cc.sent[psn & qp.cc.sent_mask];
  const uint64_t bytes = s.psn == psn ? s.bytes : qp.mtu;
  l->inflight -= std::min(l->inflight, bytes);
  cc::AckEvent ev;
  ev.now = now;
  ev.acked_bytes = bytes;
  ev.rtt = rtt;
  if (const PacketMeta* m = e.cc_.rx)
    ev.path_hops = m->hop_limit < 64 ? static_cast<uint8_t>(64 - m->hop_limit) : 0;
  // The ACK's INT echo describes the path of its echo lane: that lane's
  // controller gets it, once per ACK.
  if (lane == echo_lane && !e.cc_.rx_echo_lane_fed) {
    ev.hops = echo_hops(e, qp);
    e.cc_.rx_echo_lane_fed = !ev.hops.empty();
  }
  l->ctl->on_ack(ev);
  if (l->ctl->next_timer() != Time::never()) e.timer_update(qp);
}

Duration cc_echo_queue_delay(const Engine::Impl& e) {
  int64_t worst = 0;
  for (uint8_t i = 0; i < e.cc_.rx_echo_n; ++i) {
    const cc::IntHop& h = e.cc_.rx_echo[i];
    if (h.link_bps == 0) continue;
    const auto ps = static_cast<int64_t>(static_cast<double>(h.qlen_bytes) * 8.0 * cc::kPsPerSecond /
                                         static_cast<double>(h.link_bps));
    worst = std::max(worst, ps);
  }
  return Duration::picos(worst);
}

void cc_lane_ce(Engine::Impl& e, Qp& qp, uint8_t lane, Time now) {
  if (!e.cc_.on) return;
  // The lane's reaction point: the CE echo of the lossy ACK trailer names the
  // lane, which a CNP (Annex A17.9.3, per QP) cannot.
  if (CcLane* l = lane_cc(qp, lane)) {
    l->ctl->on_cnp(now);
    if (l->ctl->next_timer() != Time::never()) e.timer_update(qp);
  }
}

void cc_lane_loss(Engine::Impl& e, Qp& qp, uint8_t lane, Time now) {
  if (!e.cc_.on) return;
  if (CcLane* l = lane_cc(qp, lane)) l->ctl->on_loss({now, cc::LossKind::kNak, qp.mtu});
}

Time cc_deadline(const Qp& qp) {
  Time t = qp.cc.pace_at;
  if (qp.cc.ctl) t = std::min(t, qp.cc.ctl->next_timer());
  for (const CcLane& l : qp.cc.lanes)
    if (l.ctl) t = std::min(t, l.ctl->next_timer());
  return std::min(t, qp.cc.np.next_timer());
}

void cc_on_timer(Engine::Impl& e, Qp& qp, Time now) {
  if (!e.cc_.on) return;
  if (qp.cc.pace_at <= now) {
    qp.cc.pace_at = Time::never();
    e.sched_req(qp);
  }
  if (has_controller(qp) && qp.cc.ctl->next_timer() <= now) {
    qp.cc.ctl->on_timer(now);
    publish(e, qp, now);
  }
  bool lane_timer = false;
  for (CcLane& l : qp.cc.lanes)
    if (l.ctl && l.ctl->next_timer() <= now) {
      l.ctl->on_timer(now);
      lane_timer = true;
    }
  if (lane_timer) e.sched_req(qp);
  if (qp.cc.np.next_timer() <= now && qp.cc.np.on_timer(now)) {
    qp.cc.cnp_pending = true;
    e.sched_resp(qp);
  }
}

}  // namespace sroce::eng
