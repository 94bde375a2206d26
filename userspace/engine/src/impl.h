// Engine::Impl: the engine's state and the declarations of its parts. Each
// role lives in its own file (Linux rxe is the model):
//   objects.cc    PD, MR, CQ, SRQ, AH; completion queues and async events
//   memory.cc     L_Key/R_Key checks and SGE gather/scatter through MemoryAccess
//   qp_state.cc   QP create/modify/query/destroy, the IBA 10.3 state machine
//   qp_error.cc   entering ERR, flushing, send completions
//   post.cc       post_send/post_recv/post_srq_recv validation
//   requester.cc  request packets from send WQEs (segmentation, retransmission)
//   completer.cc  ACK/NAK/READ response/atomic ACK handling, timers
//   responder.cc  executing incoming requests (IBA 9.7 responder)
//   resp_tx.cc    ACK/NAK, READ response and atomic ACK packets
//   recv.cc       packet checks and dispatch (parse, ICRC, QP, P_Key, Q_Key)
//   tx.cc         scheduling (round-robin, responses first) and the timer heap
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "keys.h"
#include "objects.h"
#include "proto/icrc.h"
#include "proto/packet.h"
#include "qp.h"
#include "ring.h"
#include "sroce/engine/engine.h"
#include "table.h"

namespace sroce {

// Outcome of a local memory operation (requester gather/scatter, responder
// receive-buffer scatter).
enum class MemStatus : uint8_t { kOk, kProt, kLen, kAccess };

class Engine::Impl {
 public:
  Impl(const EngineConfig& cfg, MemoryAccess& mem);

  // --- control path: objects.cc ---
  Result<Handle> alloc_pd();
  Result<void> dealloc_pd(Handle pd);
  Result<MrKeys> reg_mr(Handle pd, uint64_t addr, uint64_t length, uint32_t access);
  Result<MrKeys> reg_mr_host(Handle pd, uint64_t host_addr, uint64_t length, uint32_t access,
                             uint64_t iova);
  Result<void> dereg_mr(uint32_t lkey);
  Result<void> rereg_mr(uint32_t lkey, uint32_t flags, Handle pd, uint64_t addr, uint64_t length,
                        uint32_t access);
  Result<Handle> create_cq(uint32_t cqe);
  Result<void> destroy_cq(Handle cq);
  Result<void> resize_cq(Handle cq, uint32_t cqe);
  Result<void> rereg_mr_host(uint32_t lkey, uint32_t flags, Handle pd, uint64_t host_addr,
                             uint64_t length, uint32_t access, uint64_t iova);
  Result<MwKeys> alloc_mw(Handle pd, uint8_t type);  // mw.cc
  Result<void> dealloc_mw(Handle mw);                // mw.cc
  Result<Handle> create_srq(Handle pd, const SrqAttr& attr);
  Result<void> modify_srq(Handle srq, uint32_t srq_limit);
  Result<void> destroy_srq(Handle srq);
  Result<Handle> create_ah(Handle pd, const AhAttr& attr);
  Result<void> destroy_ah(Handle ah);
  int poll_cq(Handle cq, std::span<Wc> out);
  int req_notify_cq(Handle cq, bool solicited_only);
  std::optional<Handle> poll_cq_notification();
  std::optional<AsyncEvent> poll_async_event();

  // --- control path: qp_state.cc ---
  Result<Qpn> create_qp(Handle pd, const QpInitAttr& attr);
  Result<void> modify_qp(Qpn qpn, const QpAttr& attr, uint32_t mask, Time now);
  Result<QpAttr> query_qp(Qpn qpn) const;
  Result<void> destroy_qp(Qpn qpn);
  Result<QpStats> qp_stats(Qpn qpn) const;
  size_t lane_stats(Qpn qpn, std::span<LaneStats> out) const;  // lossy.cc
  Result<size_t> qp_memory_bytes(Qpn qpn) const;                 // footprint.cc
  size_t memory_bytes() const;                                   // footprint.cc

  // --- data path ---
  int post_send(Qpn qpn, const SendWr& wr, Time now);                                    // post.cc
  int post_recv(Qpn qpn, const RecvWr& wr);                                              // post.cc
  int post_srq_recv(Handle srq, const RecvWr& wr);                                       // post.cc
  void on_packet(std::span<const std::byte> payload, const PacketMeta& meta, Time now);  // recv.cc
  void on_timer(Time now);                                                               // tx.cc
  std::optional<TxPacket> poll_transmit(std::span<std::byte> out, Time now);             // tx.cc
  Time next_deadline() const;                                                            // tx.cc

  // ======================= internals =======================
  // lookups (objects.cc); kNone when the identifier names nothing
  uint32_t pd_slot(Handle h) const;
  uint32_t cq_slot(Handle h) const;
  uint32_t srq_slot(Handle h) const;
  uint32_t ah_slot(Handle h) const;
  uint32_t qp_slot(Qpn qpn) const;
  eng::Mr* mr_by_lkey(uint32_t lkey);
  eng::Mr* mr_by_rkey(uint32_t rkey);
  uint32_t key_bits();  // the random part of a new key (objects.cc)

  // completions and events (objects.cc)
  void cq_push(uint32_t cq, const Wc& wc, bool solicited);
  void cq_discard_qp(uint32_t cq, Qpn qpn);  // a QP's completions not yet polled
  void raise(AsyncEventType type, uint32_t element);
  void srq_check_limit(eng::Srq& srq, uint32_t slot);

  // memory (memory.cc)
  MemStatus gather(eng::Qp& qp, uint32_t idx, std::byte* dst, uint32_t len, uint32_t* crc = nullptr);
  MemStatus scatter_wqe(eng::Qp& qp, uint32_t idx, uint32_t off, const std::byte* src,
                        uint32_t len);
  MemStatus scatter_recv(eng::Qp& qp, const std::byte* src, uint32_t len);
  // Checks a WQE's SGEs and resolves each to a host address (hosts[i]) and the fence
  // reference of its MR (refs[i], mr_ref).
  MemStatus check_local_sgl(eng::Qp& qp, const Sge* sges, uint32_t n, uint32_t need,
                            uint64_t* hosts, uint64_t* refs);
  // R_Key check for [va, va+len) with `need` access; host address and the MR's (or
  // window's) fence reference on success.
  bool check_rkey(const eng::Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t need,
                  uint64_t* host, uint64_t* ref);
  // The DEREG_MR / REREG_MR fence (docs/security.md, "Memory"): a host address resolved from
  // a key is used packet after packet (a WQE's SGEs, a WRITE's or READ's range), so each such
  // use first asks mr_live(ref) whether the MR (or window) it came from is still the one that
  // was checked. dereg_mr, rereg_mr, invalidation, unbinding and dealloc_mw bump the slot's
  // fence, so once they return no in-flight work touches that memory again: the requester
  // completes with IBV_WC_LOC_PROT_ERR, the responder NAKs a remote access error.
  uint64_t mr_ref(const eng::Mr& mr) const {
    const uint32_t s = mr.slot;
    return (uint64_t{s} << 32) | mr_fence_[s];
  }
  bool mr_live(uint64_t ref) const {
    const auto s = static_cast<uint32_t>(ref >> 32);
    if (s >= mr_fence_.size() || mr_fence_[s] != static_cast<uint32_t>(ref)) return false;
    const eng::Mr& m = mrs_[s];
    return !m.invalidated && (m.kind == 0 || !mrs_[m.mw_mr].invalidated);
  }
  void fence_mr(const eng::Mr& mr) { ++mr_fence_[mr.slot]; }
  // The L_Key that MemoryAccess::read_mr / write_mr get for an access through `mr` (a window:
  // the MR it is bound to), so the host uses only that MR's memory (engine.h).
  uint32_t mem_lkey(const eng::Mr& mr) const {
    return mr.kind == 0 ? mr.lkey : mrs_[mr.mw_mr].lkey;
  }
  // The same for a fence reference (mr_ref); only while mr_live(ref).
  uint32_t mem_lkey(uint64_t ref) const { return mem_lkey(mrs_[static_cast<uint32_t>(ref >> 32)]); }
  void seek_cursor(const Sge* sges, uint32_t n, uint32_t off, uint32_t* idx, uint32_t* in);

  // memory windows and invalidation (mw.cc)
  eng::Mr* mw_by_handle(Handle mw);
  void mw_unbind(eng::Mr& mw);
  // Local operations of the send queue, executed when the requester reaches them.
  WcStatus mw_bind(eng::Qp& qp, const eng::SendWqe& w);
  WcStatus local_invalidate(eng::Qp& qp, uint32_t rkey);
  // SEND with Invalidate at the responder (IBA 10.6.7.2.3 / 9.4.1.1.5): false = invalid.
  bool remote_invalidate(eng::Qp& qp, uint32_t rkey);
  // The requester reached local WQEs (BIND_MW, LOCAL_INV): runs them in order; false
  // when it must stop (fence, error, SQD).
  bool req_local_ops(eng::Qp& qp);

  // QP errors and completions (qp_error.cc)
  void complete_send(eng::Qp& qp, eng::SendWqe& w, WcStatus status);
  void complete_recv(eng::Qp& qp, const Wc& wc, bool solicited);
  void complete_recv_flushed(eng::Qp& qp, uint64_t wr_id);  // IBV_WC_WR_FLUSH_ERR, opcode RECV
  void qp_to_error(eng::Qp& qp);
  void flush_sq(eng::Qp& qp);
  void flush_rq(eng::Qp& qp);
  // Fatal requester error on the head WQE: complete it with `status`, QP -> ERR.
  void req_fatal(eng::Qp& qp, WcStatus status);
  void reset_qp_state(eng::Qp& qp);
  void return_srq_wqes(eng::Qp& qp, std::vector<uint64_t>* lost);
  void check_sq_drained(eng::Qp& qp);

  // lossy mode, READ responses over lanes (lossy_read.cc)
  bool lossy_read_sel(const eng::Qp& qp, const eng::SendWqe& w) const;
  bool lossy_read_base(eng::Qp& qp, uint32_t* base);
  uint32_t lossy_read_ask_range(eng::Qp& qp, uint32_t from, uint32_t to, bool again);
  void lossy_read_trailer(eng::Qp& qp, uint32_t psn, uint32_t res_first, bool retx, uint8_t* out,
                          PacketMeta& meta);
  bool lossy_read_repair(eng::Qp& qp, const eng::Resource& r, uint32_t psn, uint64_t host,
                         uint64_t ref, uint32_t len);
  size_t lossy_read_repair_build(eng::Qp& qp, uint8_t* out, PacketMeta& meta);
  void lossy_on_read_resp(eng::Qp& qp, const sroce_pkt& pkt, const sroce_leh_req& leh, Time now);
  void lossy_read_arm(eng::Qp& qp, Time now);
  bool head_overtaken(eng::Qp& qp) const;
  void lossy_read_timer(eng::Qp& qp, Time now);
  size_t lossy_read_rerequest(eng::Qp& qp, uint8_t* out, PacketMeta& meta, Time now);
  void lossy_read_reset(eng::Qp& qp, bool tx);
  void lossy_rewind_stop(eng::Qp& qp);  // lossy.cc

  // requester (requester.cc)
  size_t req_build(eng::Qp& qp, uint8_t* out, PacketMeta& meta, Time now);
  size_t req_build_one(eng::Qp& qp, uint8_t* out, PacketMeta& meta, Time now);
  void req_rewind(eng::Qp& qp, uint32_t psn);
  uint32_t req_resume_psn(eng::Qp& qp);

  // completer (completer.cc)
  void comp_on_response(eng::Qp& qp, const sroce_pkt& pkt, Time now);
  void comp_on_timer(eng::Qp& qp, Time now);
  void comp_retire(eng::Qp& qp, uint32_t psn, Time now);
  void comp_retry(eng::Qp& qp, uint32_t psn, Time now, bool count);
  void comp_progress(eng::Qp& qp, Time now);
  void comp_arm_retx(eng::Qp& qp, Time now);

  // responder (responder.cc, resp_tx.cc)
  void resp_on_request(eng::Qp& qp, const sroce_pkt& pkt, const PacketMeta& meta, Time now);
  void resp_ack(eng::Qp& qp, uint32_t psn, bool force);
  void resp_nak(eng::Qp& qp, uint8_t syndrome, uint32_t psn, bool final);
  size_t resp_build(eng::Qp& qp, uint8_t* out, PacketMeta& meta);
  // After the PSN check: opcode sequence, length, execution (responder.cc).
  void resp_execute(eng::Qp& qp, const sroce_pkt& pkt, const PacketMeta& meta);

  // lossy mode: negotiation, lanes, requester (lossy.cc); receiver (lossy_rx.cc)
  bool lossy_alloc(eng::Qp& qp);  // lossy.cc: false = no memory
  void lossy_reset_tx(eng::Qp& qp);
  void lossy_reset_rx(eng::Qp& qp);
  bool lossy_tx_gate(eng::Qp& qp);
  bool lossy_psn(eng::Qp& qp, uint32_t psn);
  bool lossy_resend_compat(eng::Qp& qp, uint32_t from);
  uint8_t lossy_pick_lane(eng::Qp& qp, Time now, bool resend);
  uint8_t lossy_pick_lane_one(eng::Qp& qp, Time now, bool resend);
  void lossy_trailer_lanes(eng::Qp& qp, uint8_t lane, sroce_leh_req& leh);
  uint16_t lane_port(const eng::Qp& qp, uint8_t lane) const;
  void lossy_on_sent(eng::Qp& qp, uint32_t psn, uint8_t lane, bool retx, Time now);
  size_t lossy_retransmit(eng::Qp& qp, uint8_t* out, PacketMeta& meta, Time now);
  void lossy_on_ack(eng::Qp& qp, const sroce_pkt& pkt, const sroce_leh_ack& leh, Time now);
  void lossy_on_rto(eng::Qp& qp, Time now);
  uint32_t lossy_mark_unsacked(eng::Qp& qp, uint32_t from);
  void lossy_rx_request(eng::Qp& qp, const sroce_pkt& pkt, const sroce_leh_req& leh,
                        const PacketMeta& meta, Time now);
  void lossy_rx_compat(eng::Qp& qp, const sroce_pkt& pkt, const PacketMeta& meta, Time now);
  void lossy_rx_trimmed(eng::Qp& qp, uint32_t psn, Time now);
  void lossy_rx_timer(eng::Qp& qp, Time now);
  void lossy_ack_trailer(eng::Qp& qp, uint8_t* out, PacketMeta& meta);
  void lossy_rehash(eng::Qp& qp);
  void lossy_peer_port(eng::Qp& qp, uint16_t port);

  // packet helpers (tx.cc)
  void fill_meta(const eng::Qp& qp, PacketMeta& meta) const;
  // `data_crc`: the payload's CRC-32 register from 0 (taken while it was copied in,
  // read_mr_crc), which the ICRC then combines instead of reading the payload again.
  size_t finish_packet(uint8_t* p, size_t hdr_len, uint32_t payload_len, const PacketMeta& meta,
                       const uint8_t* trailer = nullptr, const uint32_t* data_crc = nullptr) const;
  // Where the payload's CRC is taken during the copy (EngineConfig::icrc_fused); the
  // register to give read_mr_crc / gather, or nullptr.
  uint32_t* fused_crc(uint32_t& reg) const {
    reg = 0;
    return !cfg_.icrc_offload && cfg_.icrc_fused ? &reg : nullptr;
  }

  // scheduling (tx.cc)
  void sched_req(eng::Qp& qp, bool front = false);
  void sched_resp(eng::Qp& qp);
  void unsched(eng::Qp& qp);
  void timer_update(eng::Qp& qp);
  void timer_remove(eng::Qp& qp);
  Time qp_deadline(const eng::Qp& qp) const;

  // ======================= state =======================
  EngineConfig cfg_;
  // Congestion control (congestion.h): after cfg_ (built from it), before
  // qps_ (the QPs' controllers hold its NicState and outlive nothing of it).
  eng::CcEngine cc_{cfg_};
  std::vector<Gid> gids_;
  MemoryAccess& mem_;
  EngineStats stats_;
  // ICRC id solvers by payload length (proto/icrc.h): peers with their own IPv4 ids.
  sroce_icrc_id_cache icrc_ids_{};

  eng::Perm24 perm_qpn_, perm_lkey_, perm_rkey_;
  uint64_t key_seed_ = 0;
  uint64_t key_counter_ = 0;

  eng::Table<eng::Pd> pds_;
  eng::Table<eng::Mr> mrs_;
  std::vector<uint32_t> mr_fence_;  // per MR slot, never reset (mr_live)
  eng::Table<eng::Cq> cqs_;
  eng::Table<eng::Srq> srqs_;
  eng::Table<eng::Ah> ahs_;
  eng::Table<eng::Qp> qps_;

  eng::Ring<AsyncEvent> events_;
  eng::Ring<Handle> notifications_;

  // transmit scheduling: FIFO lists of QP slots
  uint32_t req_head_ = eng::kNone, req_tail_ = eng::kNone;
  // The requester's quantum (poll_transmit): the QP at the head of the list
  // and the packets it may still send before the next QP's turn.
  uint32_t req_burst_qp_ = eng::kNone;
  uint32_t req_burst_left_ = 0;
  uint32_t resp_head_ = eng::kNone, resp_tail_ = eng::kNone;
  // timer heap of QP slots ordered by heap_key_
  std::vector<uint32_t> heap_;
  std::vector<Time> heap_key_;
  Time last_now_ = Time::zero();
  // Engine::output_seq: bumped by cq_push and raise. Beside the fields
  // next_deadline reads, so a driver's check after it costs no other line.
  uint64_t output_seq_ = 0;
  // One-entry lookup caches (most traffic uses few QPs and MRs); an entry is
  // only trusted after the table confirms the slot still holds that key.
  mutable uint32_t cache_qpn_ = 0, cache_qp_slot_ = eng::kNone;
  uint32_t cache_lkey_ = 0, cache_lkey_slot_ = eng::kNone;
  uint32_t cache_rkey_ = 0, cache_rkey_slot_ = eng::kNone;
  uint32_t mtu_max_ = 4096;
};

namespace eng {
// IBA table 45: RNR NAK timer field -> delay.
Duration rnr_timer_duration(uint8_t code);
// IBA 11.2 / 9.7: local ACK timeout 4.096 us * 2^timeout; 0 means infinite.
Duration ack_timeout_duration(uint8_t timeout);
inline uint32_t psn_add(uint32_t psn, int32_t d) { return sroce_psn_add(psn, d); }
inline int32_t psn_diff(uint32_t a, uint32_t b) { return sroce_psn_diff(a, b); }
inline uint32_t npackets(uint32_t len, uint32_t mtu) {
  return len == 0 ? 1 : (len + mtu - 1) / mtu;
}
inline bool is_rd_atomic(WrOpcode op) {
  return op == WrOpcode::kRdmaRead || op == WrOpcode::kAtomicCmpSwp ||
         op == WrOpcode::kAtomicFetchAdd;
}
inline bool is_atomic(WrOpcode op) {
  return op == WrOpcode::kAtomicCmpSwp || op == WrOpcode::kAtomicFetchAdd;
}
}  // namespace eng

}  // namespace sroce
