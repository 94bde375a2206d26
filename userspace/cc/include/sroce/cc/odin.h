// Odin: HPCC refined for MoE all-to-all. The paper is not public; this design
// follows its one-line description ("a shared-buffer flag from switches, a
// NIC-level ratio that coordinates all flows of the host, and a compensation
// step") and docs/cc/odin.md gives the reasoning, the mechanisms and their
// parameters. Each part can be switched off for the ablation; with all three
// off Odin is exactly HPCC.
//
//  1. Shared-buffer flag: a switch sets IntHop::buffer_flag while its shared
//     buffer is above a threshold. A flow whose flagged hop holds a queue of
//     its own (>= flag_min_qlen) aims at eta x (1 - flag_decrease) instead of
//     eta and does not probe (no additive increase) until the flag clears.
//  2. NIC-level ratio: every active flow of a NIC declares its HPCC rate W/T
//     to the shared NicState; each flow sends ratio = min(1, C / sum) of its
//     rate (and of its window, with headroom). The host never injects more
//     than its line rate, nor much more than one BDP of windows, however many
//     flows it runs.
//  3. Compensation: the window a flow had when a flag episode began is
//     remembered; when the flag clears and the measured U is below eta, the
//     flow returns in one step to min(that window, Wc * eta / U) instead of
//     maxStage RTTs of additive steps: the flag's extra cut is paid back.
#pragma once

#include <cstdint>

#include "sroce/cc/hpcc.h"
#include "sroce/cc/int_estimator.h"
#include "sroce/cc/nic.h"
#include "sroce/cc/types.h"

namespace sroce::cc {

struct OdinConfig {
  HpccConfig hpcc;                 // eta, maxStage, W_AI, min rate: as HPCC

  bool buffer_flag = true;         // part 1
  bool nic_ratio = true;           // part 2 (needs a NicState; without one it is off)
  bool compensation = true;        // part 3

  // Part 2: the window is scaled by min(1, ratio x nic_window_headroom), the
  // rate by the ratio. The rates of a NIC's flows add up to its line rate;
  // their windows to that many base-RTT BDPs, so that queueing delay on the
  // path (RTT > T) does not make the window, rather than the rate, the limit.
  // 3 (was 1.5): with HPCC's multiplicative increase the windows track the
  // rates closely and 1.5 bound the flows below their NIC share (odin.md,
  // "Tuning the ratio").
  double nic_window_headroom = 3.0;
  // Part 2, optional: split W_AI among the NIC's active flows, so a host
  // probes like one flow (off: in the lab it helps at 16-32 hosts by <1 % and
  // slows recovery at 64; HPCC's W_AI is already sized for many flows per link).
  bool nic_share_ai = false;
  // Part 2: a flow never gets less than min(its own rate, C / n_active) (the
  // NIC's equal share), so a flow held below that share by its own path (a
  // hot receiver) is not scaled down further by the other flows' demand;
  // only flows above the equal share are scaled by the ratio (odin.md,
  // "The ratio's floor"). false = every flow is scaled by the ratio.
  bool nic_fair_floor = true;
  // Part 1: while a queued hop is flagged the target utilisation is
  // eta x (1 - flag_decrease) (odin.md has the sweep behind 0.05).
  double flag_decrease = 0.05;
  // Part 1: a flagged hop counts only if this flow's egress port there holds
  // at least this many bytes (0 = one MTU of the flow): a port with no queue
  // is not what fills the shared buffer.
  uint32_t flag_min_qlen = 0;
};

class Odin {
 public:
  // `nic` may be null (then part 2 is off). The flow joins the NIC's demand
  // on its first send and leaves it on on_idle() or destruction.
  Odin(const OdinConfig& cfg, const FlowParams& flow, NicState* nic);
  ~Odin();
  Odin(const Odin&) = delete;
  Odin& operator=(const Odin&) = delete;
  Odin(Odin&& o) noexcept;
  Odin& operator=(Odin&&) = delete;

  void on_send(const SendEvent& ev);
  void on_ack(const AckEvent& ev);
  void on_cnp(Time) {}
  void on_loss(const LossEvent& ev);
  void on_timer(Time) {}
  void on_idle(Time now);
  Time next_timer() const { return Time::never(); }

  uint64_t rate_bps() const;
  uint64_t window_bytes() const;

  // Introspection.
  double window() const { return w_; }               // uncoordinated HPCC window
  double reference_window() const { return wc_; }
  double utilisation() const { return est_.u(); }
  uint32_t inc_stage() const { return inc_stage_; }
  double nic_ratio() const;
  bool in_flag_episode() const { return flag_episode_; }
  uint64_t flagged_acks() const { return flagged_acks_; }
  uint64_t compensations() const { return compensations_; }
  double w_ai() const;

 private:
  void set_window(double w);
  // Part 2: the fraction of its own HPCC rate the flow may send (<= 1).
  double nic_scale() const;
  uint64_t demand() const { return static_cast<uint64_t>(rate_of(w_, flow_.base_rtt)); }

  OdinConfig cfg_;
  FlowParams flow_;
  NicState* nic_;
  IntEstimator est_;
  double w_max_;
  double w_min_;
  double w_ai_;
  uint32_t queue_floor_;
  double w_;
  double wc_;
  uint32_t inc_stage_ = 0;
  uint64_t sent_new_ = 0;
  uint64_t acked_ = 0;
  uint64_t last_update_mark_ = 0;
  bool registered_ = false;        // counted in nic_'s demand
  uint64_t declared_bps_ = 0;      // what nic_ holds for this flow
  bool flag_episode_ = false;
  double w_before_flag_ = 0;
  uint64_t flagged_acks_ = 0;
  uint64_t compensations_ = 0;
};

}  // namespace sroce::cc
