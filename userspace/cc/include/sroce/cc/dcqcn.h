// DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
// SIGCOMM 2015): ECN marks at the switch (CP), CNPs from the receiver (NP),
// rate control at the sender (RP). docs/cc/dcqcn.md has the state machine and
// where each default comes from.
//
// Rate-only: window_bytes() is kNoWindow. Flows start at line rate and the RP
// is inactive until the first CNP (paper, section 3.1); it goes inactive again
// once the rate is back at line rate, so an uncongested flow has no timers.
#pragma once

#include <cstdint>

#include "sroce/cc/types.h"

namespace sroce::cc {

struct DcqcnConfig {
  // --- NP (receiver): at most one CNP per flow per interval ---------------
  Duration cnp_interval = Duration::micros(4);   // CX min_time_between_cnps 4 us; paper N = 50 us
  // Marks that arrive inside the interval: true (paper, section 3.1: "at most
  // one CNP every N us for the flow, if any packet that arrives within that
  // time window was marked") = one CNP when the interval ends; false = they
  // are dropped (our reading of CX min_time_between_cnps; dcqcn.md).
  bool coalesce_marks = false;

  // --- RP (sender) --------------------------------------------------------
  double g = 5.0 / 1024;                // alpha gain: CX dce_tcp_g 1019 -> 1 - 1019/1024; paper 1/256
  Duration alpha_period = Duration::micros(1);   // CX dce_tcp_rtt 1 us; paper K = 55 us
  // true (paper): alpha rises at each CNP and decays once per alpha_period
  // without CNP, the period restarting at each CNP. false (CX): alpha is
  // sampled once per alpha_period, rising if a CNP arrived in it, else decaying.
  bool alpha_update_on_cnp = false;
  double initial_alpha = 1023.0 / 1024;          // CX initial_alpha_value 1023; paper 1
  // Minimum time between two rate decreases; CNPs inside it are folded into
  // one decrease at its end. CX rate_reduce_monitor_period 4 us; paper: 0 (every CNP).
  Duration rate_decrease_period = Duration::micros(4);
  Duration rate_increase_timer = Duration::micros(300);  // CX rpg_time_reset 300 us; paper T = 55 us
  // Byte counter B; 0 = off: the timer alone drives recovery (F fast-recovery
  // steps, one additive step, then hyper increase by R_HAI per expiry), as in
  // the Mellanox-NIC model of the HPCC artifact. Paper B = 10 MB. mlxconfig
  // reports CX rpg_byte_reset 32767, but a live 32 KB counter with F = 1
  // would move Rc half way to Rt every 32 KB sent (a few us at 100G), so the
  // CX preset keeps it off (dcqcn.md).
  uint64_t byte_counter = 0;
  uint32_t stage_threshold = 1;         // CX rpg_threshold 1; paper F = 5
  uint64_t ai_rate_bps = 5'000'000;     // CX rpg_ai_rate 5 Mb/s; paper R_AI 40 Mb/s
  uint64_t hai_rate_bps = 50'000'000;   // CX rpg_hai_rate 50 Mb/s
  uint64_t min_rate_bps = 1'000'000;    // CX rpg_min_rate 1 Mb/s
  // Largest cut of one decrease, as the fraction of the rate kept: CX
  // rpg_min_dec_fac 50 % (with alpha <= 1 the paper's cut never exceeds it).
  double min_decrease_factor = 0.5;
  // Target rate on a decrease: true = always Rt := Rc (paper; CX
  // clamp_tgt_rate 1); false = only when an increase event happened since the
  // last decrease (CX clamp_tgt_rate 0 with clamp_tgt_rate_after_time_inc 1).
  bool clamp_target_always = false;

  // The ConnectX-4+ firmware defaults (the values above).
  static DcqcnConfig connectx();
  // The values of the DCQCN paper (and its public ns-3 artifact, see dcqcn.md).
  static DcqcnConfig paper();
};

// Receiver side (NP), one per flow (QP): decides when CE-marked packets of
// the flow trigger a CNP back to its sender.
class DcqcnNotificationPoint {
 public:
  explicit DcqcnNotificationPoint(Duration interval, bool coalesce = false)
      : interval_(interval), coalesce_(coalesce) {}
  explicit DcqcnNotificationPoint(const DcqcnConfig& cfg)
      : DcqcnNotificationPoint(cfg.cnp_interval, cfg.coalesce_marks) {}

  // A data packet of this flow arrived with ECN CE. True: send a CNP now.
  bool on_marked_packet(Time now);
  // Coalescing: a mark arrived inside the interval; a CNP is due at
  // next_timer(). on_timer() says whether to send it.
  Time next_timer() const { return pending_ ? last_cnp_ + interval_ : Time::never(); }
  bool on_timer(Time now);
  uint64_t cnps_sent() const { return cnps_; }

 private:
  Duration interval_;
  bool coalesce_;
  bool pending_ = false;
  Time last_cnp_ = Time::zero();
  bool sent_any_ = false;
  uint64_t cnps_ = 0;
};

// Sender side (RP).
class Dcqcn {
 public:
  Dcqcn(const DcqcnConfig& cfg, const FlowParams& flow);

  void on_send(const SendEvent& ev);
  void on_ack(const AckEvent&) {}      // DCQCN reacts to CNPs, not ACKs
  void on_cnp(Time now);
  void on_loss(const LossEvent&) {}    // loss recovery is the transport's; rate via CNPs only
  void on_timer(Time now);
  void on_idle(Time) {}
  Time next_timer() const;

  uint64_t rate_bps() const { return static_cast<uint64_t>(rc_); }
  uint64_t window_bytes() const { return kNoWindow; }

  // Introspection for tests, stats and the lab.
  enum class Phase : uint8_t { kLineRate, kFastRecovery, kAdditive, kHyper };
  Phase phase() const;
  // Alpha as the periodic update would have it at `now` (it is advanced lazily).
  double alpha(Time now) const;
  double target_rate_bps() const { return rt_; }
  uint32_t timer_stage() const { return t_stage_; }
  uint32_t byte_stage() const { return bc_stage_; }
  uint64_t cnps() const { return cnps_; }
  uint64_t decreases() const { return decreases_; }

 private:
  void decrease(Time now);
  void increase_event();
  void advance_alpha(Time now);
  void deactivate();

  DcqcnConfig cfg_;
  double line_rate_;
  double rc_;                  // current rate
  double rt_;                  // target rate
  double alpha_;
  bool active_ = false;        // rate limited (a CNP arrived and the rate has not recovered)
  bool cnp_pending_ = false;   // a CNP arrived inside the decrease period
  bool cnp_in_alpha_period_ = false;
  // Alpha is advanced lazily, period by period, from alpha_epoch_ (no 1 us timer).
  Time alpha_epoch_ = Time::zero();
  uint32_t t_stage_ = 0;       // rate increase timer expirations since the last decrease
  uint32_t bc_stage_ = 0;      // byte counter expirations since the last decrease
  uint64_t bytes_since_stage_ = 0;
  Time last_decrease_ = Time::zero();
  bool decreased_any_ = false;
  Time increase_deadline_ = Time::never();
  Time decrease_deadline_ = Time::never();
  uint64_t cnps_ = 0;
  uint64_t decreases_ = 0;
};

}  // namespace sroce::cc
