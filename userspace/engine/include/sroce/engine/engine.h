// The sans-I/O RoCEv2 transport engine: one instance per host (or NIC).
//
// Contract (DESIGN.md, "The engine is sans-I/O"):
//  * every entry point that can move protocol state takes `now`;
//  * no clock reads, no sockets, no blocking; no allocation on the data path
//    (post_*, poll_*, on_packet, on_timer, poll_transmit): queues and buffers
//    are sized when objects are created;
//  * application memory is reached only through the MemoryAccess the host
//    gives at construction (in-process, process_vm_readv, or pinned pages).
//
// Packets cross the boundary as RoCEv2 UDP payloads (BTH .. ICRC) plus their
// addressing (PacketMeta); the datapath adds Ethernet/IP/UDP. The ICRC is
// computed over the IP and UDP headers sroce itself builds
// (proto/icrc.h: IPv4 id 0 and DF; masked fields as IBTA Annex A17).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "sroce/cc/cc.h"
#include "sroce/engine/result.h"
#include "sroce/engine/types.h"
#include "sroce/engine/verbs.h"

namespace sroce {

// How the engine reaches application memory. `addr` is a virtual address in
// the owner's address space as registered with reg_mr. Returning false means
// the host could not access it (the process died, the page is gone); the
// engine turns that into the right error completion.
//
// Every access the engine makes through an MR names that MR by its L_Key (`lkey`; for a
// memory window the L_Key of the MR it is bound to): read_mr / write_mr. A host that keeps
// state per MR (where an MR's pages live: sroced's shared MRs, the kernel path's pinned
// pages) uses only the state of that MR, never another MR's found by address: two MRs may
// name the same address with different memory behind it (a range unmapped and mapped again
// under a still-registered MR). read / write are the accesses through no MR (inline data
// the host copied out); the defaults of read_mr / write_mr ignore the MR.
class MemoryAccess {
 public:
  virtual ~MemoryAccess() = default;
  virtual bool read(uint64_t addr, std::span<std::byte> out) = 0;
  virtual bool write(uint64_t addr, std::span<const std::byte> in) = 0;
  virtual bool read_mr(uint32_t lkey, uint64_t addr, std::span<std::byte> out) {
    (void)lkey;
    return read(addr, out);
  }
  virtual bool write_mr(uint32_t lkey, uint64_t addr, std::span<const std::byte> in) {
    (void)lkey;
    return write(addr, in);
  }
  // read_mr, and the CRC-32 of what was read: `crc` is a CRC-32 register (reflected
  // 0xEDB88320, no pre/post inversion: proto/icrc.h, sroce_crc32_update) before `out` and
  // after it on return (on false: unspecified). The engine gathers payload with it when it
  // computes the ICRC itself, so that the ICRC needs no second pass over the payload
  // (docs/engine.md, "ICRC"). A host whose read is a plain copy overrides it with
  // sroce_crc32_copy (one pass); the default reads, then runs the CRC over `out`.
  virtual bool read_mr_crc(uint32_t lkey, uint64_t addr, std::span<std::byte> out, uint32_t& crc);
};

// Where the random part of every L_Key, R_Key and memory window key comes
// from (docs/security.md, "Keys"). The daemon gives one backed by
// getrandom(2), so a key cannot be predicted from keys seen before; without
// one (the simulator, unit tests) the bytes derive from EngineConfig::seed,
// reproducibly. Called on the control path only (reg_mr, alloc_mw).
class RandomSource {
 public:
  virtual ~RandomSource() = default;
  virtual uint32_t next32() = 0;
};

// Addressing of one RoCEv2 packet, in or out.
struct PacketMeta {
  Gid src;                // source IP as GID (IPv4-mapped for IPv4)
  Gid dst;                // destination IP as GID
  uint16_t src_port = 0;  // UDP source port: the lane, hence the ECMP path
  uint16_t dst_port = 4791;
  uint8_t traffic_class = 0;  // DSCP << 2 | ECN (ECN CE = 3 on receive)
  uint8_t hop_limit = 64;
  uint32_t flow_label = 0;  // IPv6 only
  // Receive only: the IPv4 identification when the datapath saw the IP header
  // (DPDK), -1 when it did not (UDP sockets). The ICRC covers it; an unknown
  // id is recovered from the ICRC (proto/icrc.h, docs/wire.md).
  int32_t ipv4_id = -1;
  // Receive only: a switch cut the payload (DCP / Ultra Ethernet trimming).
  // The ICRC of such a packet is not checked (its bytes are gone); only the
  // BTH is read, and in lossy mode it becomes an immediate, precise
  // retransmission request for its PSN (docs/lossy.md).
  bool trimmed = false;
};

struct TxPacket {
  size_t len = 0;  // bytes written into the caller's buffer (UDP payload)
  PacketMeta meta;
  Time send_at;  // earliest time to put it on the wire (pacing)
};

#if __has_include("sroce_config.h")
#include "sroce_config.h"  // Kconfig (build/generated): CONFIG_DEFAULT_LANES
#endif
#ifdef SROCE_CONFIG_DEFAULT_LANES
inline constexpr uint16_t kDefaultLanes = SROCE_CONFIG_DEFAULT_LANES;  // Kconfig DEFAULT_LANES
#else
inline constexpr uint16_t kDefaultLanes = 16;
#endif
// Default LossyConfig::train_bytes: 32 KiB, UCCL's chunk (docs/lossy.md says
// how the simulator's lossy scenarios chose it).
inline constexpr uint32_t kDefaultTrainBytes = 32768;
// Upper bound of LossyConfig::lanes (per-lane state is a fixed array).
inline constexpr uint16_t kMaxLanes = 64;

// Lossy mode (docs/lossy.md): selective repeat with SACK, lanes (UDP source
// ports) with per-lane sequences, trimmed packets. Negotiated per RC QP in
// band; a peer that does not offer it keeps the QP in compatible mode.
struct LossyConfig {
  bool enable = true;           // offer lossy mode; negotiated per QP; false = compatible only
  uint16_t lanes = kDefaultLanes;  // source ports per QP in lossy mode (1 = selective repeat, one path)
  // Lane trains (docs/lossy.md "Lane trains"): a lane carries this many bytes
  // of consecutive new packets of the QP (rounded down to whole packets, at
  // least one) before the next lane is chosen, so that a train leaves as one
  // UDP GSO send and arrives as one GRO batch. <= the path MTU: packet by
  // packet. Retransmissions and probes are always chosen packet by packet.
  uint32_t train_bytes = kDefaultTrainBytes;
  // Single lane: later arrivals before a gap is a loss (Falcon). With lanes a
  // cross-lane gap waits for every lane to pass it or for the timer
  // (docs/lossy.md says why no count is used there).
  uint16_t ooo_threshold = 3;
  Duration reorder_timeout = Duration::micros(50);
  bool gap_is_loss = false;     // baseline: every PSN gap is a loss at once (IRN-style receiver)
  // Lane weights (docs/lossy.md "Lane weights"): spray by per-lane weights
  // that CE echoes, retransmission requests and queueing delay cut and time
  // restores (MP-RDMA-style congestion-aware spraying); lossy packets are
  // then ECN-capable (ECT(0)). false: equal round-robin over the active lanes.
  bool lane_weights = true;
  // A lane whose windowed-minimum RTT exceeds the QP's lowest lane RTT by
  // more than this is congested (a standing queue on its path).
  Duration lane_delay_target = Duration::micros(25);
  // INT steers weights too (docs/lossy.md "Lane weights"): an ACK whose INT
  // echo shows a hop queue worth more than lane_delay_target (qlen / link
  // rate) cuts the weight of its echo lane. Needs INT (CcEngineConfig).
  bool lane_int = true;
  // Reorder window cap (docs/lossy.md): the window may grow past
  // reorder_timeout up to this bound when the receiver measures path skew
  // (originals that arrived late after a later PSN). reorder_timeout is
  // then the cap only until skew is seen. <= reorder_timeout: fixed cap.
  Duration reorder_timeout_max = Duration::millis(1);
};

// Congestion control (docs/cc/README.md, "Integration"): one controller and
// pacer per RC QP, one NIC-level state per engine. Off by default: then the
// engine behaves exactly as without it (same packets, same bytes).
struct CcEngineConfig {
  bool enable = false;
  cc::CcConfig config;                        // algorithm and its parameters
  uint64_t line_rate_bps = 100'000'000'000;   // the port rate: every flow's maximum
  Duration base_rtt = Duration::micros(8);    // unloaded RTT of the longest path (HPCC's T)
  // Notification point (DCQCN, Annex A17.9.3): answer CE-marked requests
  // with CNPs, at most one per QP per config.dcqcn.cnp_interval.
  bool notification_point = true;
  // Requester: AckReq on at least every `ack_every`-th request packet while a
  // controller runs (HPCC's NIC acknowledges every packet: its INT and RTT
  // samples come from ACKs), and always when the window is nearly full.
  uint32_t ack_every = 1;
  // In-band telemetry on the wire (docs/wire.md, "INT"): while a controller
  // that reads INT runs (hpcc, odin, delay), offer it (BTH bit ICAP); once
  // the peer QP offers it too, requests carry an INT shim that switches
  // append hop records to, and the peer's ACKs echo them. false: never.
  bool int_telemetry = true;
  // Per-lane controllers (docs/cc/README.md, "Per lane"): in lossy mode each
  // lane also gets its own controller of the configured algorithm, fed by
  // that lane's CE echoes, RTT samples, INT echoes and losses; a lane whose
  // controller holds it (window or pacing) is skipped by the lane picker,
  // while the QP's controller still bounds the QP as a whole.
  bool per_lane = false;
};

struct EngineConfig {
  // Local GID table (index = sgid_index); at least one entry.
  std::span<const Gid> gids;
  uint32_t max_qps = 1024;
  uint32_t max_cqs = 1024;
  uint32_t max_mrs = 4096;
  uint32_t max_pds = 1024;
  uint32_t max_srqs = 256;
  uint32_t max_ahs = 4096;
  uint32_t max_cqe = 65536;
  uint32_t max_qp_wr = 16384;
  uint32_t max_sge = 32;
  uint32_t max_inline_data = 256;
  uint32_t max_rd_atomic = 16;  // outstanding READ/atomic per QP
  uint32_t max_msg_size = 1u << 31;
  uint64_t seed = 1;  // QPNs and the key index permutation derive from it (reproducible)
  // Key bytes (docs/security.md, "Keys"): from here when set, else from `seed`.
  RandomSource* random = nullptr;
  // Active MTU of the port: upper bound of a QP's path MTU and of a UD message.
  Mtu port_mtu = Mtu::k4096;
  // Compatible-mode responder: ACK at least every `ack_every` request packets
  // even without AckReq (IBA 9.7.5.1: ACK coalescing is the responder's choice).
  uint32_t ack_every = 16;
  // Requester window: at most this many unacknowledged PSNs per RC QP.
  uint32_t max_unacked_psns = 1024;
  // The datapath generates and checks the ICRC itself (NIC offload, benchmarks):
  // the engine writes a zero ICRC and does not verify received ones.
  bool icrc_offload = false;
  // Without offload: the payload's CRC is taken while it is gathered
  // (MemoryAccess::read_mr_crc) and combined with the headers' (proto/icrc.h,
  // sroce_icrc_payload_fused). false: the payload is read, then the ICRC runs
  // over the whole packet (the two-pass path; the same bytes on the wire).
  // Off by default: with the 512-bit CRC the second pass costs less than the
  // combination and the extra header calls (engine-bench write4k_tx against
  // write4k_tx_2pass: 8-23 % slower fused; docs/performance.md).
  bool icrc_fused = false;
  LossyConfig lossy;
  CcEngineConfig cc;
};

// Why a received packet was dropped. The first values are the proto parser's
// sroce_parse_err codes (proto/packet.h), same numbers; engine-level reasons follow.
enum RxDropReason : uint8_t {
  kRxDropParseShort = 1,
  kRxDropParseBadOpcode = 2,
  kRxDropParseBadTver = 3,
  kRxDropParseTruncatedHdr = 4,
  kRxDropParseBadPad = 5,
  kRxDropParseBadLength = 6,
  kRxDropBadIcrc = 7,
  kRxDropWrongTransport = 8,  // opcode's service does not match the QP type
  kRxDropUnknownQp = 9,
  kRxDropQpState = 10,  // QP in RESET/INIT/ERR, or not a receiving state
  kRxDropBadPkey = 11,
  kRxDropBadQkey = 12,
  kRxDropCnp = 13,                 // CNP with congestion control off, or for no local RC QP
  kRxDropNoRecvWqe = 14,           // UD/UC: no receive WQE (RC answers RNR NAK instead)
  kRxDropOutOfSequence = 15,       // RC: PSN ahead (NAKed once); UC: rest of a broken message
  kRxDropUnexpectedResponse = 16,  // response/ACK that matches no outstanding request
  kRxDropDuplicate = 17,           // duplicate that cannot be answered (e.g. atomic evicted)
  kRxDropLength = 18,              // UD message larger than the receive buffer
  kRxDropAccess = 19,              // UC: R_Key/access violation (RC NAKs instead)
  kRxDropInvalid = 20,             // UC: invalid request (RC NAKs instead)
  kRxDropBadInt = 21,              // malformed INT shim or INT echo (proto/int.h)
  // RC/UC: the packet does not come from the QP's connected peer (docs/security.md, "The wire";
  // Linux rxe's check_addr): source IP is not the QP's dgid, destination IP not its sgid, or
  // (a peer that negotiated lossy mode) a UDP source port outside 49152..65535.
  kRxDropWrongPeer = 22,
  kRxDropWrongLocal = 23,
  kRxDropWrongPort = 24,
  kRxDropCount = 25,
};
const char* to_string(RxDropReason r);

// The NAK codes of an AETH (IBA 9.7.5.2.4, table 43; proto/roce.h SROCE_NAK_*), the index of
// EngineStats::naks_sent_by_code / naks_received_by_code. A remote access NAK is an access
// fault: a peer named memory its R_Key does not allow (or that went away under an MR).
enum NakCode : uint8_t {
  kNakPsnSeqErr = 0,
  kNakInvalidRequest = 1,
  kNakRemoteAccess = 2,
  kNakRemoteOp = 3,
  kNakInvalidRdRequest = 4,
  kNakCodes = 5,
};
const char* to_string(NakCode c);  // "psn_seq_err", "invalid_request", "remote_access", ...

// Engine-wide counters; per-QP counters come from qp_stats().
struct EngineStats {
  uint64_t rx_packets = 0;
  uint64_t rx_dropped = 0;  // malformed, bad ICRC, unknown QP, ... (see rx_drop_reason)
  uint64_t rx_bad_icrc = 0;
  uint64_t rx_icrc_id_recovered = 0;  // IPv4 ICRC matched with an id recovered from it (rxe, RNICs)
  uint64_t rx_unknown_qp = 0;
  uint64_t tx_packets = 0;
  uint64_t retransmits = 0;
  uint64_t naks_sent = 0;
  uint64_t naks_received = 0;
  uint64_t rnr_naks_sent = 0;
  uint64_t rnr_naks_received = 0;
  uint64_t timeouts = 0;
  uint64_t duplicates = 0;
  // READ responses dropped because their MR was deregistered (or its memory gone) when the
  // requester may have the data already: a replay for a duplicate request (the original
  // responses went out in full) or a lossy READ (repairs may have completed it). No NAK, the
  // QP lives. Counted once per READ.
  uint64_t replays_dropped = 0;
  // NAKs and RNR NAKs for a PSN already acknowledged, dropped by the requester (also in
  // rx_drop_reason[kRxDropUnexpectedResponse]).
  uint64_t stale_naks = 0;
  // Lossy READ repair requests for response PSNs the responder had not sent yet (its original
  // responses were still going out, paced or behind a slow loop): those PSNs are left to the
  // original stream instead of being sent twice. Counted per PSN (docs/lossy.md).
  uint64_t read_repair_psns_unsent = 0;
  uint64_t rx_drop_reason[kRxDropCount] = {};  // indexed by RxDropReason
  // NAKs other than RNR by code (NakCode): sent by the responder, received by the requester
  // (a reserved code received counts in naks_received only).
  uint64_t naks_sent_by_code[kNakCodes] = {};
  uint64_t naks_received_by_code[kNakCodes] = {};
  uint64_t cq_overflows = 0;
  uint64_t async_events_lost = 0;  // async event queue full
};

enum class QpMode : uint8_t { kCompatible = 0, kLossy = 1 };
const char* to_string(QpMode m);

// Per-QP counters (qp_stats()).
struct QpStats {
  QpMode mode = QpMode::kCompatible;  // requester direction: lossy once negotiated
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;    // UDP payload bytes
  uint64_t rx_packets = 0;  // accepted by the QP (after the checks)
  uint64_t rx_bytes = 0;
  uint64_t rx_dropped = 0;   // dropped after the QP was found
  uint64_t retransmits = 0;  // request packets sent again (go-back-N)
  uint64_t timeouts = 0;     // local ACK timer expirations
  uint64_t acks_sent = 0;
  uint64_t acks_received = 0;
  uint64_t naks_sent = 0;  // NAKs other than RNR
  uint64_t naks_received = 0;
  uint64_t seq_naks_received = 0;
  uint64_t rnr_naks_sent = 0;
  uint64_t rnr_naks_received = 0;
  uint64_t duplicates = 0;  // duplicate requests answered by the responder
  uint64_t read_responses_sent = 0;
  uint64_t send_wqes_completed = 0;
  uint64_t recv_wqes_completed = 0;
  // --- lossy mode (docs/lossy.md) ---
  uint64_t sacks_sent = 0;             // ACKs carrying the SACK extension
  uint64_t sacks_received = 0;
  uint64_t selective_retransmits = 0;  // single PSNs resent on a precise request, a trim or an RTO
  // Retransmissions the peer already had: counted by the peer's receiver and
  // echoed in its ACK extension (cumulative), so this is the sender's view of
  // its own spurious retransmissions.
  uint64_t spurious_retransmits = 0;
  uint64_t duplicates_lossy = 0;       // receiver: duplicate data packets it already had
  uint64_t trims_received = 0;         // receiver: trimmed requests turned into requests
  uint64_t losses_detected = 0;        // receiver: PSNs declared lost (lane gap, threshold, timer, trim)
  uint64_t max_reorder_depth = 0;      // receiver: largest PSN distance above the expected PSN
  int64_t srtt_ps = 0;                 // requester: smoothed RTT (RFC 6298 weights), 0 = no sample
  // --- congestion control (EngineConfig::cc) ---
  uint64_t cnps_sent = 0;          // responder: CNPs for CE-marked requests
  uint64_t cnps_received = 0;      // requester: CNPs handed to the controller
  uint64_t cc_rate_bps = 0;        // requester: current pacing rate (0 = no controller)
  uint64_t cc_rate_min_bps = 0;    // requester: the lowest rate the controller has set (0 = none yet)
  uint64_t cc_window_bytes = 0;    // requester: current window (UINT64_MAX = none)
  uint64_t cc_est_bps = 0;         // requester, LTP: the filter's estimate of the rate available (0 = none)
  int8_t cc_algorithm = -1;        // requester: the QP controller's cc::Algorithm (-1 = none)
  uint64_t ltp_decisions = 0;      // requester, LTP: monitor intervals decided by the policy
  uint64_t ltp_fallback_mis = 0;   // requester, LTP: ... by the delay-rule fallback
  uint64_t ltp_missing_mis = 0;    // requester, LTP: MIs without inputs (no RTT sample or delivery), timeouts
  uint64_t ltp_divergences = 0;    // requester, LTP: filter divergences (each hands over fallback_mis MIs)
  double ltp_info_gain = 0;        // requester, LTP: nats its filter's updates removed (when tracked)
  uint64_t cc_window_stalls = 0;   // times the window held the QP back
  uint64_t cc_paced = 0;           // times pacing held the QP back
  uint64_t int_shims_sent = 0;     // requester: requests sent with an INT shim (docs/wire.md "INT")
  uint64_t int_echoes_sent = 0;    // responder: ACKs sent with an INT echo
  uint64_t int_echoes_received = 0;  // requester: INT echoes handed to the controller
};

// Per-lane counters of a lossy QP (Engine::lane_stats). A lane is one UDP
// source port, hence one ECMP path.
struct LaneStats {
  uint16_t src_port = 0;
  bool active = false;  // false: retired (no new packets; probed now and then)
  uint64_t tx_packets = 0;
  uint64_t retransmits = 0;
  uint64_t naks = 0;             // retransmission requests for packets sent on this lane
  uint64_t losses_detected = 0;  // receiver: gaps inside this lane's sequence
  int64_t srtt_ps = 0;
  uint32_t weight = 0;      // spraying weight, kLaneWeightFull = an equal share (lane weights)
  uint64_t ce_echoed = 0;   // CE marks the receiver reported for this lane's packets
  uint64_t weight_cuts = 0; // multiplicative decreases (CE, loss, queueing delay)
  uint64_t int_high = 0;        // INT echoes that showed a queue above lane_delay_target
  uint64_t cc_rate_bps = 0;     // the lane's controller (CcEngineConfig::per_lane); 0 = none
  uint64_t cc_window_bytes = 0; // ... its window (UINT64_MAX = none)
};
inline constexpr uint32_t kLaneWeightFull = 65536;

struct MrKeys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

// A memory window (alloc_mw): the handle names it in bind WRs and dealloc_mw; rkey is its
// first R_Key (a bind gives it a new key byte).
struct MwKeys {
  Handle handle = kNoHandle;
  uint32_t rkey = 0;
};

class Engine {
 public:
  Engine(const EngineConfig& cfg, MemoryAccess& mem);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // --- control path: errno-bearing results --------------------------------
  Result<Handle> alloc_pd();
  Result<void> dealloc_pd(Handle pd);  // EBUSY while MRs/QPs/AHs/SRQs use it

  Result<MrKeys> reg_mr(Handle pd, uint64_t addr, uint64_t length, uint32_t access);
  // The same with the address handed to MemoryAccess (`host_addr`) apart from the one the
  // keys are used with (`iova`, IBA 10.6.1: the MR's virtual address as the consumer
  // and its peers name it): a daemon serving several processes whose buffers share
  // virtual addresses (forked programs) tells them apart by host_addr.
  Result<MrKeys> reg_mr_host(Handle pd, uint64_t host_addr, uint64_t length, uint32_t access,
                             uint64_t iova);
  Result<void> dereg_mr(uint32_t lkey);
  // Reregistration (ibv_rereg_mr; IBA 11.2.8, "Reregister Memory Region"): changes the MR
  // named by lkey in place, as asked by kRereg* flags (at least one): the range (addr,
  // length; the iova follows as in reg_mr), the PD, the access rights. The keys stay, so
  // peers that hold the rkey keep using it and see the new rights and range. Every argument
  // is checked before anything changes: on error the MR is as it was.
  Result<void> rereg_mr(uint32_t lkey, uint32_t flags, Handle pd, uint64_t addr, uint64_t length,
                        uint32_t access);

  Result<Handle> create_cq(uint32_t cqe);
  Result<void> destroy_cq(Handle cq);  // EBUSY while a QP uses it
  // ibv_resize_cq (IBA 11.2.6.3, "Resize Completion Queue"): room for at least `cqe`
  // completions from now on; those not yet polled stay, in order. EINVAL when cqe is 0,
  // above max_cqe, or below the completions the CQ holds (as rxe).
  Result<void> resize_cq(Handle cq, uint32_t cqe);
  // rereg_mr for an MR registered with reg_mr_host: with kReregTranslation the host address
  // and the iova move apart (`host_addr`, `iova`); otherwise as rereg_mr with the iova kept,
  // except that a change of kAccessZeroBased makes `iova` the MR's iova.
  Result<void> rereg_mr_host(uint32_t lkey, uint32_t flags, Handle pd, uint64_t host_addr,
                             uint64_t length, uint32_t access, uint64_t iova);

  // Memory windows (IBA 10.6.7, docs/engine.md "Memory windows"): type kMwType1 or
  // kMwType2 (else EINVAL). A window shares the R_Key space of the MRs; it is bound by a
  // kBindMw send WR and checked at the responder like an MR. dealloc_mw of a bound window
  // unbinds it first; dereg_mr/rereg_mr of an MR with windows bound is EBUSY (as rxe).
  Result<MwKeys> alloc_mw(Handle pd, uint8_t type);
  Result<void> dealloc_mw(Handle mw);

  Result<Handle> create_srq(Handle pd, const SrqAttr& attr);
  Result<void> modify_srq(Handle srq, uint32_t srq_limit);
  Result<void> destroy_srq(Handle srq);

  Result<Handle> create_ah(Handle pd, const AhAttr& attr);
  Result<void> destroy_ah(Handle ah);

  Result<Qpn> create_qp(Handle pd, const QpInitAttr& attr);
  Result<void> modify_qp(Qpn qpn, const QpAttr& attr, uint32_t attr_mask, Time now);
  Result<QpAttr> query_qp(Qpn qpn) const;
  Result<void> destroy_qp(Qpn qpn);
  Result<QpStats> qp_stats(Qpn qpn) const;
  // Per-lane counters of an RC QP: fills out[0..n) and returns n (the QP's
  // lane count, at most out.size()); 0 for an unknown QP.
  size_t lane_stats(Qpn qpn, std::span<LaneStats> out) const;
  // Memory (docs/engine.md, "Memory"): bytes the engine holds for one QP
  // (its slot, send and receive queues, responder resources, lossy-mode
  // windows once it reached RTR, congestion-control rings), and for the
  // whole engine (every table's built slots and every object's queues).
  // Sizes follow each object's caps and configuration, not the maxima.
  Result<size_t> qp_memory_bytes(Qpn qpn) const;
  size_t memory_bytes() const;

  // --- data path ----------------------------------------------------------
  // 0 on success, else the errno ibv_post_send returns (EINVAL, ENOMEM when the
  // queue is full, ...). On error nothing of the WR was queued.
  int post_send(Qpn qpn, const SendWr& wr, Time now);
  int post_recv(Qpn qpn, const RecvWr& wr);
  int post_srq_recv(Handle srq, const RecvWr& wr);

  // Returns the number of completions written (<= out.size()), or -errno.
  int poll_cq(Handle cq, std::span<Wc> out);
  // Arms the CQ: the next (solicited, if asked) completion yields one
  // notification from poll_cq_notification().
  int req_notify_cq(Handle cq, bool solicited_only);
  std::optional<Handle> poll_cq_notification();
  std::optional<AsyncEvent> poll_async_event();
  // Counts what the three polls above can return: it grows with every
  // completion written (or lost to an overrun), notification queued and
  // async event raised. A driver that read it before draining them all may
  // skip the next drain while it is unchanged (the simulator's hosts: the
  // polls touch several cold lines of an engine among thousands).
  uint64_t output_seq() const;

  // A received UDP payload (BTH .. ICRC). Malformed packets are dropped and
  // counted, never fatal.
  void on_packet(std::span<const std::byte> payload, const PacketMeta& meta, Time now);
  // Fires whatever timers are due at `now` (retransmission, RNR, ACK coalescing).
  void on_timer(Time now);
  // Next packet to send, written into `out` (at least the path MTU plus
  // headers: kMaxPacket). nullopt when nothing is ready at `now`.
  std::optional<TxPacket> poll_transmit(std::span<std::byte> out, Time now);
  // Earliest time on_timer or poll_transmit has work; Time::never() if idle.
  Time next_deadline() const;

  // 4096 payload + headers (64) + the empty INT shim a request may carry
  // (8, proto/int.h; switches' hop records come on top, on the wire only).
  static constexpr size_t kMaxPacket = 4096 + 64 + 8;

  const EngineStats& stats() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sroce
