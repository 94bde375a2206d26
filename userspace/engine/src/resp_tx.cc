// What the responder sends (IBA 9.7): ACK/NAK packets from the one
// pending-acknowledgement slot (later ACKs coalesce into it), and READ
// responses / atomic ACKs from the resource table in PSN order. Responses
// carry an AETH that acknowledges everything before them, so a pending ACK
// for an earlier PSN is dropped when a response goes out.
#include <algorithm>

#include "impl.h"

namespace sroce {

using namespace eng;

// IBA 9.7: the responder may coalesce ACKs; it must answer AckReq.
// We ACK on AckReq, on duplicates, and at least every cfg.ack_every packets.
// The credit field says "invalid" (no end-to-end credits: IBA 9.7, AETH credit field 0x1f).
void Engine::Impl::resp_ack(Qp& qp, uint32_t psn, bool force) {
  ++qp.pkts_since_ack;
  if (!force && qp.pkts_since_ack < cfg_.ack_every) return;
  if (qp.ack_final) return;
  if (qp.ack_pending && sroce_aeth_type(qp.ack_syndrome) != SROCE_AETH_ACK &&
      psn_diff(psn, qp.ack_psn) < 0)
    return;  // a NAK for a later PSN says more than this ACK
  qp.ack_pending = true;
  qp.ack_syndrome = sroce_aeth_syndrome(SROCE_AETH_ACK, SROCE_AETH_CREDIT_INVALID);
  qp.ack_psn = psn;
  qp.ack_msn = qp.msn;
  qp.pkts_since_ack = 0;
  sched_resp(qp);
}

static_assert(kNakPsnSeqErr == int{SROCE_NAK_PSN_SEQ_ERR} &&
              kNakInvalidRequest == int{SROCE_NAK_INVALID_REQ} &&
              kNakRemoteAccess == int{SROCE_NAK_REMOTE_ACCESS} &&
              kNakRemoteOp == int{SROCE_NAK_REMOTE_OP} &&
              kNakInvalidRdRequest == int{SROCE_NAK_INVALID_RD_REQ});

void Engine::Impl::resp_nak(Qp& qp, uint8_t syndrome, uint32_t psn, bool final) {
  if (qp.ack_final) return;
  qp.ack_pending = true;
  qp.ack_syndrome = syndrome;
  qp.ack_psn = psn;
  qp.ack_msn = qp.msn;
  qp.ack_final = final;
  qp.pkts_since_ack = 0;
  if (sroce_aeth_type(syndrome) == SROCE_AETH_RNR_NAK) {
    ++qp.stats.rnr_naks_sent;
    ++stats_.rnr_naks_sent;
  } else {
    ++qp.stats.naks_sent;
    ++stats_.naks_sent;
    if (const uint8_t code = sroce_aeth_value(syndrome); code < kNakCodes)
      ++stats_.naks_sent_by_code[code];
  }
  sched_resp(qp);
}

namespace {

using Impl = Engine::Impl;

size_t build_ack(Impl& e, Qp& qp, uint8_t* out, PacketMeta& meta) {
  const bool lossy = qp.lossy.rx;
  const bool is_ack = sroce_aeth_type(qp.ack_syndrome) == SROCE_AETH_ACK;
  if (lossy && is_ack) {
    // The cumulative point as of now (the slot may be older than the latest
    // arrivals): the SACK trailer is built from the same state.
    qp.ack_psn = psn_add(qp.resp_psn, -1);
    qp.ack_msn = qp.msn;
  }
  sroce_bth bth{};
  bth.opcode = SROCE_OP_ACK;
  bth.pkey = qp.pkey;
  bth.dqpn = qp.attr.dest_qp_num;
  bth.psn = qp.ack_psn;
  sroce_bth_write(out, &bth);
  if (qp.lossy.offer) out[8] |= SROCE_BTH8_SROCE_CAP;
  out[8] |= cc_bth_bits(e, qp);  // docs/wire.md: INT offer
  const sroce_aeth a{qp.ack_syndrome, qp.ack_msn & kPsnMask};
  sroce_aeth_write(out + SROCE_BTH_LEN, &a);
  if (is_ack) ++qp.stats.acks_sent;
  qp.ack_pending = false;
  qp.ack_final = false;
  e.fill_meta(qp, meta);
  uint8_t trailer[SROCE_LEH_LEN];
  if (lossy) {
    out[8] |= SROCE_BTH8_SROCE_EXT;
    e.lossy_ack_trailer(qp, trailer, meta);  // also picks the ACK's lane
    ++qp.stats.sacks_sent;
  }
  return e.finish_packet(out, SROCE_BTH_LEN + SROCE_AETH_LEN, 0, meta, lossy ? trailer : nullptr);
}

void res_sent(Qp& qp, Resource& r) {
  r.tx_pending = false;
  r.answered = true;
  if (qp.res_tx == r.seq) ++qp.res_tx;
}

}  // namespace

size_t Engine::Impl::resp_build(Qp& qp, uint8_t* out, PacketMeta& meta) {
  if (qp.state == QpState::kErr && !(qp.ack_pending && qp.ack_final)) {
    // In ERR nothing goes out except the NAK that made us enter it (IBA
    // 9.9: the requester learns why), preceded by the responses owed for
    // earlier requests (responses stay in PSN order).
    qp.ack_pending = false;
    qp.res_tx = qp.res_alloc;
    qp.lossy.rd_rep_n = 0;
    return 0;
  }
  if (qp.state == QpState::kReset || qp.state == QpState::kInit) {
    qp.ack_pending = false;
    return 0;
  }
  // Lossy READ repairs first: they are retransmissions (lossy_read.cc).
  while (qp.lossy.rd_rep_n > 0)
    if (const size_t k = lossy_read_repair_build(qp, out, meta)) return k;
  const auto n = static_cast<uint32_t>(qp.res.size());
  while (qp.res_tx != qp.res_alloc) {
    Resource& r = qp.res[qp.res_tx % n];
    if (r.seq != qp.res_tx || !r.tx_pending) {
      ++qp.res_tx;
      continue;
    }
    if (qp.ack_pending && sroce_aeth_type(qp.ack_syndrome) == SROCE_AETH_ACK &&
        psn_diff(qp.ack_psn, r.cur_psn) < 0)
      qp.ack_pending = false;  // the response's AETH acknowledges it

    sroce_bth bth{};
    bth.pkey = qp.pkey;
    bth.dqpn = qp.attr.dest_qp_num;
    bth.psn = r.cur_psn;
    uint8_t* h = out + SROCE_BTH_LEN;
    const sroce_aeth aeth{sroce_aeth_syndrome(SROCE_AETH_ACK, SROCE_AETH_CREDIT_INVALID),
                          r.msn & kPsnMask};
    uint32_t len = 0;
    const uint32_t rpsn = r.cur_psn;
    uint32_t crc_reg;
    uint32_t* const data_crc = fused_crc(crc_reg);  // the data's CRC while reading it
    if (r.kind == Resource::kAtomic) {
      bth.opcode = SROCE_OP_ATOMIC_ACK;
      sroce_aeth_write(h, &aeth);
      h += SROCE_AETH_LEN;
      sroce_put_be64(h, r.atomic_orig);
      h += SROCE_ATMACK_LEN;
      res_sent(qp, r);
      ++qp.stats.acks_sent;
    } else {
      len = std::min(qp.mtu, r.cur_left);
      const bool last = r.cur_left <= qp.mtu;
      bth.opcode = r.cur_first ? (last ? SROCE_OP_READ_RESP_ONLY : SROCE_OP_READ_RESP_FIRST)
                               : (last ? SROCE_OP_READ_RESP_LAST : SROCE_OP_READ_RESP_MIDDLE);
      if (r.cur_first || last) {
        sroce_aeth_write(h, &aeth);
        h += SROCE_AETH_LEN;
      }
      if (len) {
        // The R_Key was checked for the whole range at the request; the MR must still be
        // the one it named (mr_live: a DEREG_MR or REREG_MR since ends the READ).
        const std::span<std::byte> dst{reinterpret_cast<std::byte*>(h), len};
        if (!mr_live(r.cur_ref) ||
            !(data_crc ? mem_.read_mr_crc(mem_lkey(r.cur_ref), r.cur_host, dst, *data_crc)
                       : mem_.read_mr(mem_lkey(r.cur_ref), r.cur_host, dst))) {
          // The requester may well have all of this READ's data: a replay for a duplicate
          // request (the original responses went out in full; a resend after a spurious
          // timeout, overtaken by what followed its completion, up to a DEREG_MR), or a
          // lossy READ it completed through repairs before the original responses all went
          // out (alloc_res). Then the rest is dropped without a NAK, as lossy repairs are:
          // ending the QP broke a valid exchange (the MPI allreduce, docs/security.md
          // "Memory"); a requester that really lacks the data times out (RETRY_EXC_ERR).
          const bool may_have_it = r.answered || r.lossy;
          const uint32_t psn = r.cur_psn;
          res_sent(qp, r);
          if (may_have_it) {
            ++stats_.replays_dropped;
            continue;
          }
          resp_nak(qp, sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_REMOTE_ACCESS), psn, true);
          qp_to_error(qp);
          raise(AsyncEventType::kQpAccessErr, qp.qpn);
          return build_ack(*this, qp, out, meta);
        }
      }
      r.cur_psn = psn_add(r.cur_psn, 1);
      r.cur_va += len;
      r.cur_host += len;
      r.cur_left -= len;
      r.cur_first = false;
      if (last) res_sent(qp, r);
      ++qp.stats.read_responses_sent;
    }
    bth.pad = static_cast<uint8_t>((4 - (len & 3)) & 3);
    sroce_bth_write(out, &bth);
    if (qp.lossy.offer) out[8] |= SROCE_BTH8_SROCE_CAP;
    fill_meta(qp, meta);
    if (r.lossy && r.kind == Resource::kRead) {
      // Lossy mode: READ responses sprayed over lanes with a trailer each
      // (docs/wire.md, READ response trailer; lossy_read.cc).
      uint8_t trailer[SROCE_LEH_LEN];
      out[8] |= SROCE_BTH8_SROCE_EXT;
      lossy_read_trailer(qp, rpsn, r.first_psn, false, trailer, meta);
      return finish_packet(out, static_cast<size_t>(h - out), len, meta, trailer, data_crc);
    }
    return finish_packet(out, static_cast<size_t>(h - out), len, meta, nullptr, data_crc);
  }
  if (qp.ack_pending) return build_ack(*this, qp, out, meta);
  return 0;
}

}  // namespace sroce
