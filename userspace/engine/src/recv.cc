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

}  // namespace

void Engine::Impl::on_packet(std::span<const std::byte> payload, const PacketMeta& meta, Time now) {
  last_now_ = now;
  ++stats_.rx_packets;
  const auto* buf = reinterpret_cast<const uint8_t*>(payload.data());
  const size_t len = payload.size();
  auto drop = [&](RxDropReason r, Qp* qp) {
    ++stats_.rx_dropped;
    ++stats_.rx_drop_reason[r];
    if (qp) ++qp->stats.rx_dropped;
  };

  sroce_pkt pkt;
  const sroce_parse_err pe = sroce_parse(buf, len, &pkt);
  if (pe != SROCE_PARSE_OK) return drop(static_cast<RxDropReason>(pe), nullptr);

  if (!cfg_.icrc_offload) {
    sroce_icrc_addr a;
    std::memcpy(a.src_gid, meta.src.raw, 16);
    std::memcpy(a.dst_gid, meta.dst.raw, 16);
    a.src_port = meta.src_port;
    a.dst_port = meta.dst_port;
    if (sroce_icrc_payload(&a, buf, len - SROCE_ICRC_LEN) != pkt.icrc) {
      ++stats_.rx_bad_icrc;
      return drop(kRxDropBadIcrc, nullptr);
    }
  }
  if ((pkt.bth.opcode & SROCE_TRANSPORT_MASK) == SROCE_TRANSPORT_CNP)
    return drop(kRxDropCnp, nullptr);

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
  // IBA 10.2 (Q_Keys): a UD packet must carry the QP's Q_Key.
  if (qp.is_ud() && pkt.deth.qkey != qp.attr.qkey) return drop(kRxDropBadQkey, &qp);

  ++qp.stats.rx_packets;
  qp.stats.rx_bytes += len;
  if (pkt.op->flags & SROCE_IS_RESPONSE) {
    if (!qp.is_rc() || qp.state == QpState::kRtr) return drop(kRxDropUnexpectedResponse, &qp);
    comp_on_response(qp, pkt, now);
  } else {
    // IBA 11.6 (communication established): the first request that reaches
    // a QP still in RTR is reported, so that a consumer can move it to RTS.
    if (qp.state == QpState::kRtr && !qp.comm_est_sent) {
      qp.comm_est_sent = true;
      raise(AsyncEventType::kCommEst, qp.qpn);
    }
    resp_on_request(qp, pkt, meta, now);
  }
}

}  // namespace sroce
