// HPCC (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019):
// a window controller driven by per-hop INT. docs/cc/hpcc.md has the details.
//
//   U from INT (IntEstimator), target utilisation eta;
//   if U >= eta or incStage >= maxStage:  W = Wc / (U/eta) + W_AI, incStage = 0
//   else:                                 W = Wc + W_AI,           incStage++
// on every ACK ("fast reaction"), but the reference window Wc and incStage
// only change once per RTT: on the first ACK that acknowledges data sent
// after the previous update. Outputs both a window (W bytes in flight) and a
// pacing rate W / T.
#pragma once

#include <cstdint>

#include "sroce/cc/int_estimator.h"
#include "sroce/cc/types.h"

namespace sroce::cc {

struct HpccConfig {
  double eta = 0.95;                    // target utilisation (paper, section 4.3)
  // Additive-only reference updates below eta before a multiplicative one.
  // 0: every update is multiplicative (W = Wc / (U / eta) + W_AI), the
  // default of the authors' ns-3 artifact (run.py, MI_THRESH 0). With 5 the
  // law is asymmetric under per-ACK noise in U (cuts at once, grows only
  // after 5 quiet updates) and held a 15-to-1 incast at 84 % instead of 92 %
  // (hpcc.md, "maxStage").
  uint32_t max_stage = 0;
  // Additive increase as a rate, W_AI = ai_rate * T. HPCC's public ns-3
  // artifact (run.py): 10 Mb/s per 25 Gb/s of line rate, 40 Mb/s at 100G.
  // 0 = scale with the line rate that way.
  uint64_t ai_rate_bps = 0;
  uint64_t min_rate_bps = 100'000'000;  // floor of W / T (ours: 0.1 % of 100G)
  // Ignore one MTU of every queue sample (ours; false = the paper). A packet
  // departing finds the packets that arrived during its own service behind
  // it, more often the faster the other flows are: a slow flow then reads a
  // one-packet "queue" most of the time, a fast one rarely, and HPCC drives
  // the slow flow down (hpcc.md, "Deviations").
  bool ignore_one_packet_queue = true;
};

class Hpcc {
 public:
  Hpcc(const HpccConfig& cfg, const FlowParams& flow);

  void on_send(const SendEvent& ev);
  void on_ack(const AckEvent& ev);
  void on_cnp(Time) {}
  void on_loss(const LossEvent& ev);
  void on_timer(Time) {}
  void on_idle(Time) {}
  Time next_timer() const { return Time::never(); }

  uint64_t rate_bps() const { return static_cast<uint64_t>(rate_of(w_, flow_.base_rtt)); }
  uint64_t window_bytes() const { return static_cast<uint64_t>(w_); }

  // Introspection.
  double window() const { return w_; }
  double reference_window() const { return wc_; }
  double utilisation() const { return est_.u(); }
  uint32_t inc_stage() const { return inc_stage_; }
  uint64_t reference_updates() const { return updates_; }
  double w_ai() const { return w_ai_; }
  double max_window() const { return w_max_; }
  double min_window() const { return w_min_; }

 private:
  HpccConfig cfg_;
  FlowParams flow_;
  IntEstimator est_;
  double w_max_;           // W_init = line rate x T (one BDP)
  double w_min_;           // min_rate x T
  double w_ai_;
  uint32_t queue_floor_;   // bytes of each queue sample ignored
  double w_;               // current window (bytes)
  double wc_;              // reference window
  uint32_t inc_stage_ = 0;
  uint64_t sent_new_ = 0;  // cumulative new bytes sent
  uint64_t acked_ = 0;     // cumulative bytes acknowledged
  uint64_t last_update_mark_ = 0;  // sent_new_ at the last reference update
  uint64_t updates_ = 0;
};

}  // namespace sroce::cc
