// Receive checks (IBA 9.6 packet header validation, Annex A17.3.3 ICRC) and
// dispatch to the responder (requests) or the completer (responses). Any
// packet that fails a check is dropped and counted by reason; nothing a
// packet contains can make the engine fail.
#include <cstring>

#include "impl.h"
#include "proto/icrc.h"

namespace sroce {

using namespace eng;

namespace {

sroce_transport transport_of(QpType t) {
  switch (t) {
    case QpType::kUc:
      return SROCE_TRANSPORT_UC;
    case QpType::kUd:
      return SROCE_TRANSPORT_UD;
    default:
      return SROCE_TRANSPORT_RC;
  }
}

// IBA 10.9: P_Keys match when their low 15 bits are equal and at least one
// of them is a full member; the all-zero P_Key is invalid.
bool pkey_match(uint16_t a, uint16_t b) {
  if ((a & 0x7fff) == 0 || (a & 0x7fff) != (b & 0x7fff)) return false;
  return (a & 0x8000) || (b & 0x8000);
}

// docs/security.md, "The wire" (Linux rxe's check_addr, IBA 9.6.1.1): a
// connected QP (RC, UC) takes packets only from its remote: the source IP
// must be the QP's dgid and the destination the local GID it sends from, so
// a third host cannot complete or kill the QP's work requests with forged
// ACKs/NAKs, nor write into it. The UDP source port is entropy (Annex
// A17.2.2) and is not checked for a plain peer; a sroce peer (it offered
// lossy mode, or the packet carries a lossy trailer) always sends from
// 0xc000..0xffff (docs/lossy.md, "Lanes"). 0 = accepted. UD is datagram
// service: any source with the Q_Key.
constexpr uint16_t kSrocePortBase = 0xc000;

RxDropReason peer_check(const Engine::Impl& e, const Qp& qp, const PacketMeta& m, bool ext) {
  if (qp.is_ud()) return RxDropReason{0};
  const AhAttr& av = qp.attr.ah_attr;
  if (!(m.src == av.dgid)) return kRxDropWrongPeer;
  if (av.sgid_index >= e.gids_.size() || !(m.dst == e.gids_[av.sgid_index])) return kRxDropWrongLocal;
  if ((ext || qp.lossy.peer_cap) && m.src_port < kSrocePortBase) return kRxDropWrongPort;
  return RxDropReason{0};
}

// DCP-style trimmed packet: only the BTH is read (no ICRC: the switch cut
// it). A trimmed request on a lossy QP asks for exactly its PSN again.
template <typename Drop>
void on_trimmed(Engine::Impl& e, const uint8_t* buf, size_t len, const PacketMeta& meta, Time now,
                Drop& drop) {
  if (len < SROCE_BTH_LEN) return drop(kRxDropParseShort, nullptr);
  sroce_bth bth;
  sroce_bth_read(buf, &bth);
  const uint32_t s = e.qp_slot(bth.dqpn);
  if (s == kNone) {
    ++e.stats_.rx_unknown_qp;
    return drop(kRxDropUnknownQp, nullptr);
  }
  Qp& qp = e.qps_[s];
  if (qp.state == QpState::kReset || qp.state == QpState::kInit || qp.state == QpState::kErr)
    return drop(kRxDropQpState, &qp);
  if (const RxDropReason r = peer_check(e, qp, meta, false)) return drop(r, &qp);
  const struct sroce_opinfo* op = sroce_opinfo(bth.opcode);
  const uint8_t op5 = bth.opcode & 0x1f;
  if (qp.is_rc() && qp.lossy.tx && op && op5 >= SROCE_OP_READ_RESP_FIRST &&
      op5 <= SROCE_OP_READ_RESP_ONLY) {
    // A trimmed lossy READ response: ask for exactly its PSN (lossy_read.cc).
    ++qp.stats.trims_received;
    e.lossy_read_ask_range(qp, bth.psn & kPsnMask, psn_add(bth.psn & kPsnMask, 1), true);
    return;
  }
  if (!qp.is_rc() || !qp.lossy.rx || !op || !op->name || (op->flags & SROCE_IS_RESPONSE) ||
      (bth.opcode & SROCE_TRANSPORT_MASK) != SROCE_TRANSPORT_RC)
    return drop(kRxDropInvalid, &qp);
  ++qp.stats.trims_received;
  e.lossy_rx_trimmed(qp, bth.psn & kPsnMask, now);
}

}  // namespace

void Engine::Impl::on_packet(std::span<const std::byte> payload, const PacketMeta& meta, Time now) {
  last_now_ = now;
  ++stats_.rx_packets;
  CcRxScope cc_scope(cc_, meta);
  const auto* buf = reinterpret_cast<const uint8_t*>(payload.data());
  size_t len = payload.size();
  auto drop = [&](RxDropReason r, Qp* qp) {
    ++stats_.rx_dropped;
    ++stats_.rx_drop_reason[r];
    if (qp) ++qp->stats.rx_dropped;
  };

  // docs/wire.md, "INT": an INT shim in front of the BTH (outside the
  // ICRC; congestion.h) is checked and stripped first.
  if (sroce_int_present(buf, len)) {
    size_t skip = 0;
    if (!cc_rx_shim(*this, buf, len, meta.trimmed, skip)) return drop(kRxDropBadInt, nullptr);
    buf += skip;
    len -= skip;
  }

  // A trimmed packet (DCP): its payload and ICRC are gone; only the BTH is
  // trusted enough to name the QP and the PSN to ask for again.
  if (meta.trimmed) return on_trimmed(*this, buf, len, meta, now, drop);

  // docs/wire.md, INT echo: the IECHO bit says an echo trailer sits right
  // before the ICRC (after the lossy trailer).
  size_t tail = 0;
  if (len >= SROCE_BTH_LEN && (buf[8] & SROCE_BTH8_INT_ECHO) != 0 && !cc_rx_echo(*this, buf, len, tail))
    return drop(kRxDropBadInt, nullptr);
  // docs/wire.md, lossy mode: the EXT bit of BTH byte 8 says a trailer sits
  // before the ICRC; the standard parser sees the packet without it.
  const bool ext = len >= SROCE_BTH_LEN + SROCE_LEH_LEN + SROCE_ICRC_LEN + tail &&
                   (buf[8] & SROCE_BTH8_SROCE_EXT) != 0;
  const size_t plen = len - tail - (ext ? SROCE_LEH_LEN : 0);
  sroce_pkt pkt;
  const sroce_parse_err pe = sroce_parse(buf, plen, &pkt);
  if (pe != SROCE_PARSE_OK) return drop(static_cast<RxDropReason>(pe), nullptr);
  if (plen != len) pkt.icrc = sroce_icrc_get(buf + len - SROCE_ICRC_LEN);

  if (!cfg_.icrc_offload) {
    sroce_icrc_addr a;
    std::memcpy(a.src_gid, meta.src.raw, 16);
    std::memcpy(a.dst_gid, meta.dst.raw, 16);
    a.src_port = meta.src_port;
    a.dst_port = meta.dst_port;
    // docs/wire.md: a peer's own IPv4 id (rxe, RNICs) is checked exactly when
    // the datapath saw it, recovered from the ICRC when it did not.
    const int v = sroce_icrc_check(&a, meta.ipv4_id, buf, len - SROCE_ICRC_LEN, pkt.icrc, &icrc_ids_, nullptr);
    if (v == SROCE_ICRC_BAD) {
      ++stats_.rx_bad_icrc;
      return drop(kRxDropBadIcrc, nullptr);
    }
    if (v == SROCE_ICRC_OK_ID_RECOVERED) ++stats_.rx_icrc_id_recovered;
  }
  // Annex A17.9.3: a CNP goes to congestion control (congestion.h).
  if ((pkt.bth.opcode & SROCE_TRANSPORT_MASK) == SROCE_TRANSPORT_CNP) {
    // A forged CNP from a third host would slow the QP down: its peer only.
    if (const uint32_t cs = qp_slot(pkt.bth.dqpn); cs != kNone) {
      if (const RxDropReason r = peer_check(*this, qps_[cs], meta, false)) return drop(r, &qps_[cs]);
    }
    if (cc_on_cnp(*this, pkt, now)) return;
    return drop(kRxDropCnp, nullptr);
  }

  const uint32_t s = qp_slot(pkt.bth.dqpn);
  if (s == kNone) {
    ++stats_.rx_unknown_qp;
    return drop(kRxDropUnknownQp, nullptr);
  }
  Qp& qp = qps_[s];
  if (!sroce_opcode_valid_for(pkt.bth.opcode, transport_of(qp.type)))
    return drop(kRxDropWrongTransport, &qp);
  if (!pkey_match(pkt.bth.pkey, qp.pkey)) return drop(kRxDropBadPkey, &qp);
  // IBA 10.3: only RTR and later states receive; ERR and RESET/INIT drop.
  if (qp.state == QpState::kReset || qp.state == QpState::kInit || qp.state == QpState::kErr)
    return drop(kRxDropQpState, &qp);
  // Before anything the packet could change (negotiation, PSNs, completions).
  if (const RxDropReason r = peer_check(*this, qp, meta, ext)) return drop(r, &qp);
  // IBA 10.2 (Q_Keys): a UD packet must carry the QP's Q_Key.
  if (qp.is_ud() && pkt.deth.qkey != qp.attr.qkey) return drop(kRxDropBadQkey, &qp);

  // Lossy negotiation (docs/lossy.md): the peer's CAP bit; a trailer only
  // from a peer we offered lossy mode to, on an RC QP.
  // A packet without CAP says the peer never switches: the compatible window
  // opens (requester.cc).
  if (qp.is_rc() && qp.lossy.offer) {
    bool& seen = (buf[8] & SROCE_BTH8_SROCE_CAP) ? qp.lossy.peer_cap : qp.lossy.peer_nocap;
    if (!seen) {
      seen = true;
      sched_req(qp);
    }
  }
  if (ext && (!qp.is_rc() || !qp.lossy.offer)) return drop(kRxDropInvalid, &qp);
  // INT negotiation (congestion.h): the peer's ICAP; INT only where offered.
  if (!cc_rx_check(*this, qp, buf, (pkt.bth.opcode & 0x1f) == SROCE_OP_ACK)) return drop(kRxDropInvalid, &qp);

  ++qp.stats.rx_packets;
  qp.stats.rx_bytes += len;
  if (pkt.op->flags & SROCE_IS_RESPONSE) {
    if (!qp.is_rc() || qp.state == QpState::kRtr) return drop(kRxDropUnexpectedResponse, &qp);
    const uint8_t rop = pkt.bth.opcode & 0x1f;
    if (ext && rop >= SROCE_OP_READ_RESP_FIRST && rop <= SROCE_OP_READ_RESP_ONLY) {
      // Lossy mode: a READ response sprayed over lanes (lossy_read.cc).
      if (!qp.lossy.tx) return drop(kRxDropInvalid, &qp);
      sroce_leh_req leh;
      sroce_leh_req_read(buf + plen - SROCE_ICRC_LEN, &leh);
      return lossy_on_read_resp(qp, pkt, leh, now);
    }
    if (ext && (pkt.bth.opcode & 0x1f) == SROCE_OP_ACK && qp.lossy.tx) {
      sroce_leh_ack leh;
      sroce_leh_ack_read(buf + plen - SROCE_ICRC_LEN, &leh);
      lossy_on_ack(qp, pkt, leh, now);
      if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return;
    }
    comp_on_response(qp, pkt, now);
  } else if (ext) {
    cc_on_request(*this, qp, meta, now);  // notification point, INT echo
    if (qp.state == QpState::kRtr && !qp.comm_est_sent) {
      qp.comm_est_sent = true;
      raise(AsyncEventType::kCommEst, qp.qpn);
    }
    sroce_leh_req leh;
    sroce_leh_req_read(buf + plen - SROCE_ICRC_LEN, &leh);
    lossy_rx_request(qp, pkt, leh, meta, now);
  } else {
    // IBA 11.6 (communication established): the first request that reaches
    // a QP still in RTR is reported, so that a consumer can move it to RTS.
    if (qp.state == QpState::kRtr && !qp.comm_est_sent) {
      qp.comm_est_sent = true;
      raise(AsyncEventType::kCommEst, qp.qpn);
    }
    cc_on_request(*this, qp, meta, now);  // notification point, INT echo
    // docs/lossy.md: after a mid-stream switch, compatible packets from
    // before it still come in order.
    if (qp.is_rc() && qp.lossy.rx) return lossy_rx_compat(qp, pkt, meta, now);
    lossy_peer_port(qp, meta.src_port);  // docs/lossy.md: the peer repathed after a timeout
    resp_on_request(qp, pkt, meta, now);
  }
}

}  // namespace sroce
