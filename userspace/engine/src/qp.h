// The queue pair: its attributes, send queue, receive queue and the state of
// the three protocol roles (requester, completer, responder), all sized when
// the QP is created so that the data path never allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "congestion.h"
#include "objects.h"
#include "sroce/engine/engine.h"
#include "sroce/engine/types.h"
#include "sroce/engine/verbs.h"

namespace sroce::eng {

constexpr uint32_t kNone = UINT32_MAX;
constexpr uint32_t kPsnMask = 0xffffff;

enum WqeFlags : uint8_t {
  kWqeSignaled = 1u << 0,
  kWqeFence = 1u << 1,
  kWqeSolicited = 1u << 2,
  kWqeInline = 1u << 3,
};

// UD destination, copied from the AH at post time (the AH may be destroyed
// while the WQE waits; IBA 11.2 leaves that undefined, we stay safe).
struct UdDest {
  Gid dgid;
  uint32_t flow_label = 0;
  uint8_t sgid_index = 0;
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 64;
};

struct SendWqe {
  uint64_t wr_id = 0;
  uint64_t remote_addr = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint32_t rkey = 0;
  uint32_t imm = 0;        // immediate data (host order) or the R_Key to invalidate
  uint32_t length = 0;     // message length in bytes
  uint32_t num_sge = 0;    // 0 with kWqeInline: data in the inline buffer
  uint32_t first_psn = 0;  // valid while `started`
  uint32_t last_psn = 0;
  uint32_t resp_bytes = 0;   // READ: response bytes placed so far
  uint32_t remote_qpn = 0;   // UD
  uint32_t remote_qkey = 0;  // UD
  uint32_t rsn = 0;          // lossy: receive sequence number (SEND, WRITE with imm)
  WrOpcode opcode = WrOpcode::kSend;
  uint8_t flags = 0;                  // WqeFlags
  bool started = false;               // PSNs assigned (kept across rewinds: PSNs are deterministic)
  bool counted = false;               // READ/atomic: counted in rd_atomic_inflight
  bool done = false;                  // READ/atomic: response fully received
  WcStatus err = WcStatus::kSuccess;  // local error found at post or start: completes with it
  UdDest ud;
  bool lossy = false;  // started after the switch: its packets carry the trailer (lossy_read.cc)
};

// Responder resource for one RDMA READ or atomic (IBA 9.7 / 9.4):
// kept after the response is sent, so that a duplicate READ is re-executed
// and a duplicate atomic gets the saved result instead of a second execution.
struct Resource {
  enum Kind : uint8_t { kFree = 0, kRead = 1, kAtomic = 2 };
  uint32_t seq = 0;  // allocation sequence number
  Kind kind = kFree;
  bool tx_pending = false;
  // The original response went out in full once. A replay for a duplicate
  // request (tx_pending again) then holds no new responder resource: the
  // requester may already have that response and a new request out.
  bool answered = false;
  uint32_t first_psn = 0;  // PSNs of the response(s)
  uint32_t last_psn = 0;
  uint32_t msn = 0;  // MSN reported in the response AETH
  uint32_t rkey = 0;
  // READ: what is left to send.
  uint32_t cur_psn = 0;
  uint64_t cur_va = 0;
  uint64_t cur_host = 0;  // host address of cur_va (R_Key checked at the request)
  uint64_t cur_ref = 0;   // its MR's fence reference (Impl::mr_live)
  uint32_t cur_left = 0;
  bool cur_first = true;  // next packet starts a (re)transmission
  uint64_t atomic_orig = 0;
  // Lossy mode (docs/lossy.md, READ responses): the request came with a
  // trailer, so the responses are sprayed over lanes with a trailer each and
  // a lost one is asked for again alone (a repair, not a replay).
  bool lossy = false;
};

enum class InMsg : uint8_t { kNone, kSend, kWrite };

// --- lossy mode (docs/lossy.md) ---
// Window of PSNs a lossy QP tracks on each side: the requester keeps at most
// this many PSNs unacknowledged, the responder accepts PSNs up to this far
// beyond its expected PSN. Power of two (ring index = PSN & (kLossyWindow-1)).
constexpr uint32_t kLossyWindow = 256;
constexpr uint32_t kLossyWords = kLossyWindow / 64;
// One bit per PSN of the window (bitmaps of kLossyWords words, ring-indexed).
inline uint32_t lossy_ring(uint32_t psn) { return psn & (kLossyWindow - 1); }
inline bool psn_bit(const uint64_t* m, uint32_t psn) { return (m[lossy_ring(psn) >> 6] >> (lossy_ring(psn) & 63)) & 1; }
inline void set_psn_bit(uint64_t* m, uint32_t psn) { m[lossy_ring(psn) >> 6] |= uint64_t{1} << (lossy_ring(psn) & 63); }
inline void clr_psn_bit(uint64_t* m, uint32_t psn) { m[lossy_ring(psn) >> 6] &= ~(uint64_t{1} << (lossy_ring(psn) & 63)); }
constexpr uint32_t kSackBits = 64;  // SACK / retransmit-request bitmaps in an ACK

// One RTT sample into a smoothed RTT and its variation (RFC 6298 2.2-2.3:
// alpha 1/8, beta 1/4; the first sample sets srtt = r, rttvar = r / 2).
inline void rtt_sample(int64_t& srtt, int64_t& rttvar, int64_t r) {
  if (srtt == 0) {
    srtt = r;
    rttvar = r / 2;
    return;
  }
  const int64_t dev = r > srtt ? r - srtt : srtt - r;
  rttvar = (3 * rttvar + dev) / 4;
  srtt = (7 * srtt + r) / 8;
}

// Requester: one transmitted PSN. 16 bytes: four to a cache line, 4 KiB for
// the window.
struct TxSlot {
  Time sent;
  uint32_t psn = 0;
  uint8_t lane = 0;
  bool valid : 1 = false;    // a request packet was sent with this PSN
  bool retx : 1 = false;     // sent more than once (no RTT sample: Karn)
  bool sacked : 1 = false;   // the receiver has it
  bool pending : 1 = false;  // queued for a selective retransmission
  bool rtt_armed : 1 = false;  // no RTT sample taken from it yet
};
static_assert(sizeof(TxSlot) == 16);

// Responder: what to do when the in-order point passes a received PSN.
// 20 bytes (5 KiB for the window): the headers of an early READ or atomic
// live in the QP's small table of Deferred requests, not in every slot.
struct RxSlot {
  // kDeferred: a READ request or atomic that arrived early, executed when the
  // expected PSN reaches it (its headers are in Lossy::deferred[deferred]).
  enum Action : uint8_t { kNothing = 0, kMsgLast, kSendLast, kWriteImmLast, kDeferred };
  Action action = kNothing;
  bool se = false;
  uint8_t wc_flags = 0;  // kWcWithImm / kWcWithInv
  uint8_t deferred = 0;  // kDeferred: its entry in Lossy::deferred
  uint32_t imm = 0;      // immediate data or invalidated R_Key
  uint32_t byte_len = 0;
  uint32_t asked_ns = 0;  // missing PSN: when it was last asked for (low 32 bits of ns)
  uint32_t hole_ns = 0;   // missing PSN: when a later PSN first arrived (reorder delay)
};
static_assert(sizeof(RxSlot) == 20);

// The headers of a READ request or atomic that arrived before the expected
// PSN (RxSlot::kDeferred). A table of EngineConfig::max_rd_atomic entries, at
// most kDeferredMax: a requester keeps at most that many READs and atomics
// outstanding, so a peer that keeps to the device limit (16 by default) never
// fills it; one that goes beyond has its early request dropped as if lost,
// and asked for again (lossy_rx_request).
struct Deferred {
  uint64_t va = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
  uint8_t opcode = 0;
  bool used = false;
};
constexpr uint32_t kDeferredMax = 16;

struct LaneTx {
  uint16_t seq = 0;  // next per-lane sequence number
  bool has_prev = false;
  bool active = true;
  uint32_t prev_psn = 0;  // PSN of the last packet sent on the lane
  uint32_t score = 0;     // loss score (health); decays with packets sent
  uint32_t since_decay = 0;
  Time retired_at;
  // A retired lane is probed with one new packet after its hold-down; it
  // comes back only when that packet is acknowledged.
  bool probe_out = false;
  uint8_t probe_fails = 0;  // consecutive failed probes (the hold-down doubles)
  uint32_t probe_psn = 0;
  Time probe_at;
  int64_t srtt_ps = 0;
  uint64_t tx = 0, retx = 0, naks = 0;
  // Lane weights (docs/lossy.md): smooth weighted round robin over `weight`
  // (kLaneWeightFull = full), cut on CE / loss / queueing delay at most once
  // per RTT, restored linearly with time.
  uint32_t weight = kLaneWeightFull;
  int32_t swrr = 0;          // SWRR current value
  Time cut_at;               // last decrease
  int64_t win_min_ps = 0;    // minimum RTT sample of the current window
  uint32_t win_n = 0;        // samples in it
  uint64_t ce = 0, cuts = 0;
  uint64_t int_high = 0;  // INT echoes of this lane that showed a queue above the delay target
};

// READ responses in lossy mode (lossy_read.cc): the responder's per-lane
// sequence for the responses it sprays, and the requester's view of it.
struct RdLaneTx {
  uint16_t seq = 0;
  bool has_prev = false;
  uint32_t prev_psn = 0;  // PSN of the last response sent on the lane
};
struct RdLaneRx {
  uint16_t exp_seq = 0;
  bool used = false;    // a first transmission arrived on the lane
  uint32_t hi_new = 0;  // highest response PSN of a first transmission on it
};
// A repair: response PSNs of one READ the requester asked for again (a READ
// request inside an answered READ's PSNs), sent before new responses.
struct RdRepair {
  uint64_t host = 0;       // host address of psn's first byte
  uint64_t ref = 0;        // its MR's fence reference (Impl::mr_live)
  uint32_t psn = 0;        // next response PSN to send
  uint32_t left = 0;       // bytes left
  uint32_t msn = 0;        // the READ's MSN (AETH)
  uint32_t res_first = 0;  // the READ's first response PSN (trailer offset)
  uint32_t res_last = 0;   // the READ's last response PSN
  bool first = true;       // next packet starts the repair (FIRST / ONLY)
};
constexpr uint32_t kRdRepairs = 16;

struct LaneRx {
  uint16_t exp_seq = 0;
  bool used = false;     // a first transmission arrived on this lane
  bool resync = false;   // adopt the next sequence seen (switch on a retransmission)
  uint32_t hi_new = 0;   // highest PSN of a first transmission on this lane
  uint16_t ce_pending = 0;  // CE-marked requests not yet echoed (ACK trailer)
  uint64_t losses = 0;
};

// The windows and per-lane arrays of a lossy QP, allocated when an RC QP that
// offers lossy mode first goes to RTR (lossy_alloc): the control path, where
// ENOMEM can be returned; a QP that never connects, and every UC/UD QP, holds
// none of it. The requester's half (what we send: the send window, our
// lanes, the READ responses we receive) only for a QP with a send queue
// (max_send_wr > 0); the responder's half for every connected QP, since any
// peer may write to it. Per-lane state of our own sending is sized by the
// configured lane count; state about the peer's lanes (which the peer
// chooses, up to kMaxLanes) has room for all of them.
struct LossyTxMem {
  TxSlot txw[kLossyWindow];
  RdLaneRx rd_rx[kMaxLanes];
};
struct LossyRxMem {
  RxSlot rxs[kLossyWindow];
  LaneRx lanes_rx[kMaxLanes];
  RdRepair rd_rep[kRdRepairs];
  Deferred deferred[kDeferredMax];
};

struct Lossy {
  // Owners of the spans below (empty until lossy_alloc; the Tx half stays
  // empty on a QP without a send queue).
  std::unique_ptr<LossyTxMem> tx_mem;
  std::unique_ptr<LaneTx[]> lane_mem;
  std::unique_ptr<LossyRxMem> rx_mem;
  std::unique_ptr<RdLaneTx[]> rd_lane_mem;
  // negotiation
  bool offer = false;     // this QP offers lossy mode (engine config, RC only)
  bool peer_cap = false;  // a packet of the peer QP carried CAP
  bool peer_nocap = false;  // one came without it: the peer never switches
  bool tx = false;        // requester sends with the trailer (switched)
  bool rx = false;        // responder runs the lossy receiver
  // Mid-stream switch (docs/lossy.md, negotiation): PSNs before tx_start are
  // compatible packets (no trailer, go-back-N) while `mixed`, i.e. while
  // some of them are still unacknowledged.
  bool mixed = false;
  uint32_t tx_start = 0;  // first lossy PSN (S)
  // requester
  uint16_t nlanes = 1;
  uint16_t next_lane = 0;
  // Lane trains (LossyConfig::train_bytes): the lane of the current train and
  // the new packets it still takes.
  uint16_t train_lane = 0;
  uint32_t train_left = 0;
  // Adaptive trains: the last retransmission request or RTO; for a while
  // after it the QP sprays packet by packet (lossy_pick_lane).
  Time loss_at;
  bool loss_seen = false;
  uint8_t retired_chunk = 0;  // which 8 lanes' state the next trailer carries
  uint32_t rsn_next = 0;  // receive sequence number of the next SEND / WRITE w/ imm
  uint32_t rtx_count = 0; // pending selective retransmissions
  uint32_t rto_backoff = 0;
  uint32_t peer_dups = 0; // last dup_total echoed by the peer
  int64_t srtt_ps = 0, rttvar_ps = 0;
  int64_t lane_base_ps = 0;  // lowest RTT sample of any lane (lane weights)
  Time weight_at;            // lane weights last restored
  std::span<TxSlot> txw;  // kLossyWindow (LossyTxMem)
  std::span<LaneTx> lanes;  // the configured lanes (lane_mem)
  // responder
  uint64_t have[kLossyWords] = {};    // ring by PSN: received and placed
  uint64_t report[kLossyWords] = {};  // ring by PSN: lost, to request in the next ACK
  uint64_t lost[kLossyWords] = {};    // ring by PSN: declared lost (asked once)
  uint64_t stale[kLossyWords] = {};   // ring by PSN: asked, and still missing at a timer fire
  std::span<RxSlot> rxs;              // kLossyWindow (LossyRxMem)
  std::span<Deferred> deferred;       // min(EngineConfig::max_rd_atomic, kDeferredMax) (LossyRxMem)
  uint32_t rx_high = 0;       // one past the highest PSN received
  // Mid-stream switch: PSNs before rx_floor (the lowest PSN known to have
  // been sent with a trailer) may be compatible packets still to come in
  // order; while rx_mixed the lossy rules leave them to go-back-N.
  uint32_t rx_floor = 0;
  bool rx_mixed = false;
  uint32_t rsn_commit = 0;    // receive sequence number of the RQ front
  uint32_t dup_total = 0;     // duplicates received (echoed to the sender)
  uint16_t lanes_seen = 0;    // 1 + highest lane seen from the peer
  uint16_t peer_lanes = 1;    // the sender's lane count (request trailer flags)
  uint64_t peer_retired = 0;  // the sender's retired lanes (request trailers)
  uint32_t retired_psn[kMaxLanes / 8] = {};  // PSN that last updated each chunk
  uint8_t retired_seen = 0;                  // chunks updated at least once
  uint8_t echo_lane = 0;
  uint8_t ack_lane = 0;       // lane (our source port) lossy ACKs go on
  Time ack_hop_at;            // ack_lane last moved
  uint16_t peer_port = 0;     // source port of the peer's last compatible request
  uint32_t echo_psn = 0;      // with SROCE_LEH_PSN_VALID
  uint32_t gap_mark = 0;      // PSNs before it are lost when the gap timer fires
  // Reorder window (RACK-like, RFC 8985): a fraction of the minimum RTT the
  // receiver measures from a retransmission request to the retransmission,
  // in quarters (reo_mult), widened when an original arrives after it was
  // declared lost (a spurious declaration), reset after 16 clean rounds.
  int64_t rx_rtt_min_ps = 0;  // 0: no sample yet (reorder_timeout alone)
  int64_t rx_rtt_win_ps = 0;  // minimum of the current window of samples
  int64_t rx_srtt_ps = 0, rx_rttvar_ps = 0;  // RFC 6298: when to ask again
  uint32_t rx_rtt_n = 0;
  uint32_t rtt_probe_psn = 0;
  bool rtt_probe_on = false;
  uint8_t reo_mult = 1;
  uint8_t reo_clean = 0;
  // Path skew the receiver saw: how long an original arrived after a later
  // PSN (hole_ns), the maximum over windows of kRttWindow late originals;
  // lifts the reorder window's cap up to reorder_timeout_max.
  int64_t reo_skew_ps = 0, reo_skew_win_ps = 0;
  uint32_t reo_skew_n = 0;
  Time rtt_probe_at;
  uint32_t gap_fires = 0;     // consecutive timer fires without progress (backoff)
  Time gap_deadline = Time::never();
  std::span<LaneRx> lanes_rx;  // kMaxLanes: the peer's lanes (LossyRxMem)
  // READ responses (lossy_read.cc, docs/lossy.md). Responder: the lanes it
  // sprays responses over, and repairs asked for by the requester.
  uint16_t rd_next_lane = 0;
  uint8_t rd_rep_head = 0, rd_rep_n = 0;
  std::span<RdLaneTx> rd_tx;   // the configured lanes (rd_lane_mem)
  std::span<RdRepair> rd_rep;  // kRdRepairs (LossyRxMem)
  // Requester: response PSNs placed out of order and PSNs to ask for again,
  // rings by PSN over [base, base + kLossyWindow) where base is the first
  // unplaced response PSN of the oldest unfinished lossy READ.
  uint64_t rd_have[kLossyWords] = {};
  uint64_t rd_ask[kLossyWords] = {};
  uint64_t rd_sent[kLossyWords] = {};  // asked for and requested: not asked again but by a timer
  uint32_t rd_ask_n = 0;      // bits set in rd_ask
  uint32_t rd_high = 0;       // one past the highest response PSN received
  bool rd_high_valid = false;
  uint16_t rd_peer_lanes = 1;  // the responder's lane count (trailer flags)
  uint32_t rd_fires = 0;       // response timer fires without progress (backoff)
  Time rd_deadline = Time::never();
  std::span<RdLaneRx> rd_rx;  // kMaxLanes: the peer's lanes (LossyTxMem)
  // Mid-stream switch: a go-back-N over the compatible PSNs that stops at S
  // (the cursor then jumps forward to high_psn; lossy_rewind_stop).
  bool compat_rewind = false;
  // comp_retire called for a lossy READ response: no implied NAK from it
  // (it came on another lane than the ACKs it may have overtaken).
  bool rd_evidence = false;
  // Highest PSN acknowledged by an ACK, an atomic ACK or a compatible READ
  // response (lane 0): what the implied NAK may go by in lossy mode.
  uint32_t ack_seen = 0;
};

struct Qp {
  // --- identity and attributes ---
  Qpn qpn = 0;
  QpType type = QpType::kRc;
  QpState state = QpState::kReset;
  uint32_t pd = 0, send_cq = 0, recv_cq = 0, srq = kNone;  // table slots
  QpCap cap;
  bool sq_sig_all = false;
  QpAttr attr;  // as last modified (query_qp)
  uint16_t pkey = 0xffff;
  uint16_t src_port = 0xc000;  // RoCEv2 UDP source port (Annex A17.2.2: flow entropy)
  uint32_t mtu = 1024;
  Duration ack_timeout;             // 0: infinite (IBA 9.7, timeout 0)
  Duration min_rnr;                 // our min_rnr_timer, decoded
  uint32_t max_rd_atomic = 0;       // requester: outstanding READ/atomic limit
  uint32_t max_dest_rd_atomic = 0;  // responder: resource table size in use
  bool sqd_notify = false;
  bool sqd_drained_sent = false;
  bool comm_est_sent = false;  // COMM_EST raised (first request received in RTR)

  // --- send queue (free-running indices: head <= next <= tail) ---
  std::vector<SendWqe> sq;
  std::vector<Sge> sq_sge;
  std::vector<uint64_t> sq_host;  // host address of each SGE, resolved when its WQE starts
  std::vector<uint64_t> sq_ref;   // the fence reference of each SGE's MR (Impl::mr_live)
  std::vector<std::byte> sq_inline;
  uint32_t sq_mask = 0;
  uint32_t sq_head = 0;  // oldest WQE not yet completed (completer)
  uint32_t sq_next = 0;  // WQE the requester is sending from
  uint32_t sq_tail = 0;  // producer (post_send)

  // --- requester: segmentation cursor over sq[sq_next] ---
  uint32_t req_psn = 0;  // next PSN to send
  uint32_t req_off = 0;  // byte offset in the message
  uint32_t req_sge = 0;  // SGE index and offset of req_off
  uint32_t req_sge_off = 0;
  uint32_t high_psn = 0;  // one past the highest PSN ever sent (retransmit count)
  uint32_t rd_atomic_inflight = 0;
  uint32_t pkts_since_ackreq = 0;

  // --- completer ---
  uint32_t acked_psn = 0;  // highest PSN known acknowledged
  uint8_t retry_left = 0;
  uint8_t rnr_left = 0;
  bool rnr_wait = false;
  uint32_t rnr_psn = 0;
  Time rnr_deadline = Time::never();
  Time retx_deadline = Time::never();
  // An implied-NAK retry was issued for the WQE at sq index implied_idx; no
  // other one for it until a timeout (damps retry storms under reordering).
  bool implied_valid = false;
  uint32_t implied_idx = 0;
  // Compatible mode after a local ACK timeout: the oldest unacknowledged packet goes
  // alone, with AckReq, and the rest waits for a response that shows progress
  // (docs/interop.md, "64 KiB messages sroce->rxe": a responder that ACKs every
  // duplicate answers a resent window with as many ACKs).
  bool timeout_probe = false;

  // --- receive queue (own; unused with an SRQ) ---
  RecvQueue rq;

  // --- responder ---
  uint32_t resp_psn = 0;      // expected PSN (ePSN)
  uint32_t msn = 0;           // message sequence number (IBA 9.7)
  bool nak_seq_sent = false;  // one NAK-sequence-error per gap (IBA 9.7)
  InMsg in_msg = InMsg::kNone;
  bool uc_drop = false;  // UC: drop until the next FIRST/ONLY
  // receive WQE being filled (copied from the RQ/SRQ when a SEND starts)
  bool rwqe_active = false;
  uint64_t rwqe_id = 0;
  uint32_t rwqe_nsge = 0;
  uint32_t rwqe_len = 0;
  std::vector<Sge> rwqe_sge;
  uint32_t recv_off = 0;
  uint32_t recv_sge = 0, recv_sge_off = 0;
  // RDMA WRITE in progress
  uint64_t wr_va = 0;
  uint64_t wr_host = 0;  // host address of wr_va (R_Key checked once per message)
  uint64_t wr_ref = 0;   // its MR's fence reference (Impl::mr_live)
  uint32_t wr_rkey = 0;
  uint32_t wr_left = 0;
  uint32_t wr_total = 0;
  // pending ACK/NAK (one slot: later ACKs coalesce into it)
  bool ack_pending = false;
  bool ack_final = false;  // the NAK that precedes entering ERR
  uint8_t ack_syndrome = 0;
  uint32_t ack_psn = 0;
  uint32_t ack_msn = 0;
  uint32_t pkts_since_ack = 0;
  // READ/atomic resources (IBA 9.7), capacity cfg.max_rd_atomic
  std::vector<Resource> res;
  uint32_t res_alloc = 0;  // sequence number of the next resource
  uint32_t res_tx = 0;     // sequence number of the next to transmit

  // --- scheduling (intrusive lists of slots, timer heap position) ---
  uint32_t req_prev = kNone, req_next = kNone;
  uint32_t resp_prev = kNone, resp_next = kNone;
  bool in_req_list = false, in_resp_list = false;
  uint32_t heap_pos = kNone;
  uint32_t slot = kNone;  // own slot in the QP table

  Lossy lossy;
  CcQp cc;  // congestion control (congestion.h)
  QpStats stats;

  bool is_rc() const { return type == QpType::kRc; }
  bool is_ud() const { return type == QpType::kUd; }
  SendWqe& wqe(uint32_t idx) { return sq[idx & sq_mask]; }
  Sge* wqe_sges(uint32_t idx) {
    return &sq_sge[static_cast<size_t>(idx & sq_mask) * cap.max_send_sge];
  }
  uint64_t* wqe_hosts(uint32_t idx) {
    return &sq_host[static_cast<size_t>(idx & sq_mask) * cap.max_send_sge];
  }
  uint64_t* wqe_refs(uint32_t idx) {
    return &sq_ref[static_cast<size_t>(idx & sq_mask) * cap.max_send_sge];
  }
  std::byte* wqe_inline(uint32_t idx) {
    return sq_inline.data() + static_cast<size_t>(idx & sq_mask) * cap.max_inline_data;
  }
  bool sq_has_unsent() const { return sq_next != sq_tail; }
  bool res_pending() const { return res_tx != res_alloc; }
  bool resp_has_output() const { return ack_pending || res_pending() || lossy.rd_rep_n > 0; }
};

}  // namespace sroce::eng
