// Congestion-control glue of the engine (docs/cc/README.md, "Integration"):
// the per-QP controller, pacer and notification point, the NIC-level state
// of the engine, and the hooks the protocol roles call. The algorithms live
// in userspace/cc; this file only feeds them events and applies their
// window and rate. With EngineConfig::cc.enable false every hook returns at
// once and the engine's packets are the same as without this file.
//
// Per QP: a lane's path is chosen by lossy.cc and a QP's packets are sprayed
// over them; a CNP names a QP, not a path (Annex A17.9.3). One controller
// per QP sees the aggregate of its lanes. With CcEngineConfig::per_lane each
// lane of a lossy QP also has its own controller, fed by the lane's CE
// echoes, RTT samples, INT echo and losses; the lane picker skips a lane its
// controller holds (docs/cc/README.md, "Per lane").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "proto/int.h"
#include "sroce/cc/cc.h"
#include "sroce/engine/engine.h"

struct sroce_pkt;

namespace sroce::eng {

struct Qp;

// std::optional<CongestionControl> that the QP table can copy: a copy is
// empty (a controller is never duplicated; Odin's NIC share is owned once).
// The table only copies empty QPs (init, release).
class CcSlot {
 public:
  CcSlot() = default;
  CcSlot(const CcSlot&) {}
  CcSlot& operator=(const CcSlot& o) {
    if (this != &o) ctl_.reset();
    return *this;
  }
  CcSlot(CcSlot&& o) noexcept {
    if (o.ctl_) ctl_.emplace(std::move(*o.ctl_));
    o.ctl_.reset();
  }
  CcSlot& operator=(CcSlot&& o) noexcept {
    if (this != &o) {
      ctl_.reset();
      if (o.ctl_) ctl_.emplace(std::move(*o.ctl_));
      o.ctl_.reset();
    }
    return *this;
  }

  void start(const cc::CcConfig& cfg, const cc::FlowParams& f, cc::NicState* nic) {
    ctl_.reset();
    ctl_.emplace(cfg, f, nic);
  }
  void stop() { ctl_.reset(); }
  explicit operator bool() const { return ctl_.has_value(); }
  cc::CongestionControl* operator->() { return &*ctl_; }
  const cc::CongestionControl* operator->() const { return &*ctl_; }

 private:
  std::optional<cc::CongestionControl> ctl_;
};

// One sent request packet, for RTT samples (Karn: none from a resent PSN)
// and the acknowledged payload bytes.
struct CcSent {
  int64_t at_ps = 0;
  uint32_t psn = UINT32_MAX;
  uint16_t bytes = 0;
  uint8_t retx = 0;
};

// One lane's controller (CcEngineConfig::per_lane, lossy mode).
struct CcLane {
  CcSlot ctl;
  cc::Pacer pacer;
  uint64_t inflight = 0;  // payload bytes sent on the lane, not yet acknowledged
};

// Per-QP congestion-control state (Qp::cc).
struct CcQp {
  CcSlot ctl;  // requester: started at RTS, stopped at reset/error/destroy
  cc::Pacer pacer;
  Time pace_at = Time::never();  // pacing holds the QP until then (timer heap)
  bool active = false;           // has joined the NIC's demand since its last on_idle
  // Responder: the notification point and its pending CNP.
  cc::DcqcnNotificationPoint np{cc::DcqcnConfig{}};
  bool cnp_pending = false;
  // INT on the wire (proto/int.h, docs/wire.md "INT"). Requester: the peer
  // QP offered it (ICAP): requests carry a shim. Responder: the peer sent a
  // shim (it parses echoes); the raw hop records of the newest request that
  // carried any, echoed on every ACK.
  bool int_peer = false;
  bool int_echo_ok = false;
  uint8_t echo_n = 0;
  uint8_t echo_flags = 0;
  std::array<uint8_t, SROCE_INT_MAX_HOPS * SROCE_INT_HOP_LEN> echo{};
  // Requester: the last echo, widened (48-bit wire counters -> 64 bits per
  // hop), first hop first; the reference for the next one.
  std::array<cc::IntHop, cc::kMaxHops> int_last{};
  uint8_t int_last_n = 0;
  // Per-lane controllers (sized at create_qp when per_lane is on).
  std::vector<CcLane> lanes;
  // Requester: one entry per recent PSN (ring sized at create_qp).
  std::vector<CcSent> sent;
  uint32_t sent_mask = 0;
};

// Engine-wide part (Engine::Impl::cc_): the NIC-level view of all flows of
// this engine (one engine per NIC port in sroced) and the packet being
// received (its INT shim or echo and hop count while on_packet runs).
struct CcEngine {
  explicit CcEngine(const EngineConfig& cfg);
  bool on = false;   // EngineConfig::cc.enable
  bool np = false;   // ... and notification_point
  bool intw = false; // ... and INT on the wire (int_telemetry, an INT-reading algorithm)
  std::unique_ptr<cc::NicState> nic;
  const PacketMeta* rx = nullptr;
  // The received packet's INT shim records (raw, newest first) ...
  const uint8_t* rx_shim = nullptr;
  uint8_t rx_shim_n = 0;
  uint8_t rx_shim_flags = 0;
  // ... or its INT echo, decoded (first hop first, 48-bit counters).
  std::array<cc::IntHop, cc::kMaxHops> rx_echo{};
  uint8_t rx_echo_n = 0;
  bool rx_echo_widened = false;
  bool rx_echo_lane_fed = false;
  bool rx_has_shim = false;
};

// Sets CcEngine::rx for the duration of one on_packet.
class CcRxScope {
 public:
  CcRxScope(CcEngine& c, const PacketMeta& m) : c_(c) {
    c_.rx = &m;
    c_.rx_has_shim = false;
    c_.rx_shim = nullptr;
    c_.rx_shim_n = 0;
    c_.rx_echo_n = 0;
    c_.rx_echo_widened = false;
    c_.rx_echo_lane_fed = false;
  }
  ~CcRxScope() { c_.rx = nullptr; }
  CcRxScope(const CcRxScope&) = delete;
  CcRxScope& operator=(const CcRxScope&) = delete;

 private:
  CcEngine& c_;
};

// ---- hooks (congestion.cc); each is a no-op while congestion control is off

// create_qp: size the per-PSN ring (control path).
void cc_qp_create(Engine::Impl& e, Qp& qp);
// RTR -> RTS: start the controller (control path).
void cc_qp_start(Engine::Impl& e, Qp& qp, Time now);
// reset, error, destroy: stop it (Odin leaves the NIC's demand).
void cc_qp_stop(Engine::Impl& e, Qp& qp);
// poll_transmit, before building a request: window and pacing. False: the
// QP may not send now (an ACK or the pacing timer puts it back).
bool cc_may_send(Engine::Impl& e, Qp& qp, Time now);
// The ACK timer fired while every packet sent has been acknowledged and the
// rest of the WQE waits for pacing, or after a rewind before the pacer let
// the oldest unacknowledged packet out again: no loss (the send re-arms it).
bool cc_nothing_in_flight(Engine::Impl& e, Qp& qp);
// Should this request packet ask for an ACK (AckReq)? Window-based
// controllers need feedback for every packet (HPCC acknowledges each packet;
// a window smaller than the responder's coalescing would otherwise stall).
bool cc_want_ack(Engine::Impl& e, Qp& qp);
// BTH byte 8 bits a request or ACK of this QP carries: ICAP (INT offered).
uint8_t cc_bth_bits(const Engine::Impl& e, const Qp& qp);
// poll_transmit, after a request of `n` bytes was built in `buf` (room for
// `cap`): put the INT shim in front once the peer offered INT. Returns the
// new length.
size_t cc_add_shim(Engine::Impl& e, Qp& qp, uint8_t* buf, size_t n, size_t cap);
// on_packet, first: a UDP payload that starts with an INT shim. Checks it
// (false: malformed, drop) and returns in `skip` the bytes in front of the
// BTH. `trimmed`: the fabric cut the packet (no ICRC behind the headers).
bool cc_rx_shim(Engine::Impl& e, const uint8_t* buf, size_t len, bool trimmed, size_t& skip);
// on_packet, before parsing: the INT echo trailer of a packet with IECHO.
// False: malformed (drop); else `tail` = its bytes before the ICRC.
bool cc_rx_echo(Engine::Impl& e, const uint8_t* buf, size_t len, size_t& tail);
// on_packet, the QP known: the peer's BTH bits (ICAP). False: the packet
// carries INT that this QP never offered (drop).
bool cc_rx_check(Engine::Impl& e, Qp& qp, const uint8_t* bth, bool is_ack);
// A request packet was built (new or resent): ECT(0), pacer, on_send, RTT ring.
void cc_on_sent(Engine::Impl& e, Qp& qp, uint32_t psn, uint32_t payload, size_t len, bool resend,
                PacketMeta& meta, Time now);
// The last packet of the last posted WQE was sent: nothing left to send, so
// on_idle (Odin's NIC-level share goes back to the NIC's other flows now,
// not one RTT later with the ACK; docs/cc/odin.md).
void cc_on_drained(Engine::Impl& e, Qp& qp, Time now);
// A request arrived at the responder: notification point, INT to echo.
void cc_on_request(Engine::Impl& e, Qp& qp, const PacketMeta& meta, Time now);
// poll_transmit, responder list: a pending CNP (0 if none).
size_t cc_build_cnp(Engine::Impl& e, Qp& qp, uint8_t* out, PacketMeta& meta);
// A response of `n` bytes was built in `pkt`: an ACK to a peer that sent INT
// shims gets the echo trailer (ICRC recomputed). Returns the new length.
size_t cc_on_response_built(Engine::Impl& e, Qp& qp, uint8_t* pkt, size_t n, const PacketMeta& meta);
// A CNP arrived (after the ICRC check). False: not ours to take (then dropped).
bool cc_on_cnp(Engine::Impl& e, const sroce_pkt& pkt, Time now);
// The completer moved acked_psn from `before`: on_ack (and on_idle).
void cc_on_acked(Engine::Impl& e, Qp& qp, uint32_t before, Time now);
void cc_on_loss(Engine::Impl& e, Qp& qp, cc::LossKind kind, Time now);
// ---- per-lane controllers (CcEngineConfig::per_lane; lossy mode)
// The lane picker: may this lane take a new packet now (window, pacing)?
bool cc_lane_allows(Engine::Impl& e, const Qp& qp, uint8_t lane, Time now);
// A request went out on `lane` (after lossy_on_sent).
void cc_lane_sent(Engine::Impl& e, Qp& qp, uint8_t lane, uint32_t psn, uint32_t payload, size_t len,
                  bool resend, Time now);
// An ACK newly covered `psn`, sent on `lane`; `rtt` its sample (0: none),
// `echo_lane` the lane the ACK's INT echo belongs to.
void cc_lane_acked(Engine::Impl& e, Qp& qp, uint8_t lane, uint32_t psn, Duration rtt, uint8_t echo_lane,
                   Time now);
// The largest queueing delay (qlen / link rate) a hop of the received ACK's
// INT echo reports; zero without an echo (lane weights, docs/lossy.md).
Duration cc_echo_queue_delay(const Engine::Impl& e);
// The receiver reported CE marks on `lane` / asked for a PSN of `lane` again.
void cc_lane_ce(Engine::Impl& e, Qp& qp, uint8_t lane, Time now);
void cc_lane_loss(Engine::Impl& e, Qp& qp, uint8_t lane, Time now);

// Timers: the pacing hold, the controller's and the NP's timers.
Time cc_deadline(const Qp& qp);
void cc_on_timer(Engine::Impl& e, Qp& qp, Time now);

}  // namespace sroce::eng
