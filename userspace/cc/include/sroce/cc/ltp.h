// LTP, Learn-to-Probe: a Bayesian filter over the network state plus a small
// learned policy whose training rewards probing that lowers the filter's
// uncertainty (issue 17; docs/cc/ltp.md). One controller per flow, like the
// others (cc.h), rate-based with a loose window:
//
//   per ACK     accumulate the monitor interval (MI): bytes sent, acknowledged,
//               CE-echoed and lost, RTT min and mean
//   per MI      (one smoothed RTT, at least min_mi) the filter updates on the
//               MI (ltp_filter.h), the policy (ltp_policy.h) reads the
//               features and moves the rate by exp(kStep * a)
//   fallback    the delay-based rule (Swift, swift.h) drives the flow while
//               the inputs are missing (no RTT sample or no ACK for
//               `missing_mis` MIs, a timeout) or for `fallback_mis` MIs after
//               the filter diverged, and always when no weights loaded
//
// LtpCore is the per-MI part without time (filter + features + policy): the
// trainer (tools/ltp-train) runs exactly this code on its fluid model.
#pragma once

#include <array>
#include <cstdint>

#include "sroce/cc/ltp_filter.h"
#include "sroce/cc/ltp_policy.h"
#include "sroce/cc/swift.h"
#include "sroce/cc/types.h"

namespace sroce::cc {

struct LtpConfig {
  LtpVariant variant = LtpVariant::kFull;
  const LtpNet* net = nullptr;        // null: the shipped weights of `variant`
  LtpFilterConfig filter;
  SwiftConfig fallback;               // the delay-based rule used as fallback
  Duration min_mi = Duration::micros(4);
  double min_rate = 1.0 / 4096;       // fraction of the line rate
  uint32_t missing_mis = 3;
  // The base RTT the RTTs are measured in: the configured one, or, when the
  // smallest RTT over `base_window` is more than `base_slack` times it, that
  // minimum / base_slack (a windowed min RTT as BBR's min_rtt and Swift's
  // base delay; docs/cc/ltp.md "A wrong base RTT"); when that minimum is
  // below the configured base / base_slack_low, the minimum x base_slack_low
  // (a configured base far above the path's: the RTT floor fell below d's
  // grid and the filter diverged in every such MI). base_window 0:
  // configured only.
  Duration base_window = Duration::millis(10'000);
  double base_slack = 4.0;
  double base_slack_low = 2.0;
  // Rate floor: one packet per `floor_rtts` smoothed RTTs (never starve the
  // flow; 0: min_rate only).
  double floor_rtts = 4.0;
  uint32_t fallback_mis = 8;
  // A saturated MI: when the delivery was below this fraction of what was
  // sent, the next rate is at most the delivery (the bottleneck's share
  // measured, as BBR's delivery rate; ours, docs/cc/ltp.md "Issue 17, round
  // 3"). The policy alone took ~10 MIs to come down from a line-rate start
  // into a 31-to-1 incast. 0: off.
  double saturation_cut = 0.5;
  // Queue guard (ours, issue 17 round 4; docs/cc/ltp.md "The queue guard"):
  // when an MI's smallest RTT stands more than `guard_queue` above the
  // windowed min RTT, the next rate is at most rate x max(1 - guard_beta
  // (q - guard_queue) / q, 1 - guard_max_cut), whatever the policy says:
  // Swift's multiplicative decrease with an absolute queue target, once per
  // MI (one RTT). The policy's queue features are in base RTTs and cannot
  // tell 50 us of queue on a 500 us path from none. 0: off.
  Duration guard_queue = Duration::picos(0);
  double guard_beta = 0.8;
  double guard_max_cut = 0.5;
  // The MI's sent and delivered rates from the same packets (the span of
  // its ACKs with RTT samples; "Issue 17, round 3") rather than bytes sent
  // in the previous MI against bytes acknowledged in this one (false).
  bool span_rates = true;
  // The rate before the first decision (fraction of the line rate; ours,
  // docs/cc/ltp.md "A start below the line rate"). The policy was trained starting
  // at the line rate.
  double start_rate = 0.1;
  double dither = 0.03;               // uniform action noise (breaks lock-step between flows)
  uint64_t seed = 1;                  // PRNG seed of the dither (the engine mixes in the QPN)
};

// Counters of one controller.
struct LtpStats {
  uint64_t mis = 0;
  uint64_t decisions = 0;             // MIs decided by the policy
  uint64_t fallback_mis = 0;          // MIs decided by the fallback
  uint64_t divergences = 0;
  uint64_t missing = 0;               // MIs without an RTT sample or delivery
  uint64_t span_mis = 0;              // MIs whose rates came from one span of sampled ACKs
  double info_gain = 0;               // nats the filter's updates removed (filter.track_info_gain only)
  uint64_t guard_cuts = 0;            // MIs whose rate the queue guard lowered
};

class LtpCore {
 public:
  LtpCore(const LtpConfig& cfg, const LtpNet* net);

  // The features of the policy for MI `o` at the current rate (fractions of
  // the line rate). Call after filter().update(o).
  std::array<float, LtpNet::kInputs> features(const LtpObservation& o, double rate) const;
  // One decision: filter update, features, policy. Returns the next rate
  // (fraction of line rate), or a negative value when the filter diverged.
  double step(const LtpObservation& o, double rate);

  const LtpFilter& filter() const { return filter_; }
  LtpFilter& filter() { return filter_; }
  double last_action() const { return last_action_; }
  void rebase(double factor);  // LtpFilter::rebase, and the RTTs kept here
  void reseed(uint64_t s) { rng_ = s | 1; }

 private:
  double uniform();  // [-1, 1), xorshift64*

  LtpVariant variant_;
  double dither_, min_rate_;
  const LtpNet* net_;
  LtpFilter filter_;
  double prev_rtt_ = 0;
  double min_rtt_seen_ = 0;
  double last_action_ = 0;
  uint64_t rng_;
};

class Ltp {
 public:
  Ltp(const LtpConfig& cfg, const FlowParams& flow);

  void on_send(const SendEvent& ev);
  void on_ack(const AckEvent& ev);
  void on_cnp(Time) {}
  void on_loss(const LossEvent& ev);
  void on_timer(Time) {}
  void on_idle(Time) {}
  Time next_timer() const { return Time::never(); }

  uint64_t rate_bps() const;
  uint64_t window_bytes() const;

  // A PRNG stream of its own (the engine: per QP and lane).
  void reseed(uint64_t s) { core_.reseed(s * 0x9e3779b97f4a7c15ull); }

  // Introspection.
  bool in_fallback() const { return fallback_left_ > 0 || net_ == nullptr; }
  bool has_weights() const { return net_ != nullptr; }
  const LtpStats& stats() const { return stats_; }
  const LtpCore& core() const { return core_; }
  double rate_fraction() const { return rate_; }
  // The filter's estimate of the rate available to the flow, bit/s (0
  // before the first MI), as of the last MI.
  uint64_t estimate_bps() const { return est_bps_; }
  // The base RTT the MIs are measured in (configured or learned), ps.
  double base_rtt_ps() const { return base_ps_; }

 private:
  void end_mi(Time now);
  void enter_fallback(uint32_t mis);
  double fallback_rate() const;
  double floor_rate() const;
  void learn_base(Time now);

  FlowParams flow_;
  uint32_t missing_mis_, fallback_mis_;
  double min_rate_, saturation_cut_;
  Duration guard_queue_;
  double guard_beta_, guard_max_cut_;
  bool span_rates_;
  Duration min_mi_;
  const LtpNet* net_;
  LtpCore core_;
  Swift fallback_;
  double rate_ = 1.0;                 // fraction of the line rate
  double srtt_ps_;
  uint32_t fallback_left_ = 0;
  uint32_t missing_run_ = 0;
  // The current MI.
  bool mi_open_ = false;
  Time mi_start_ = Time::zero();
  uint64_t mi_sent_ = 0, mi_acked_ = 0, mi_ecn_ = 0, mi_lost_ = 0;
  double mi_rtt_min_ = 0, mi_rtt_sum_ = 0;
  uint32_t mi_rtt_n_ = 0;
  uint64_t est_bps_ = 0;
  double prev_sent_ = 0;              // sent over the previous MI (fraction of line rate)
  // Rate samples over the same packets (end_mi): the boundary is an ACK
  // with an RTT sample, when it arrived and when its packet left (now -
  // rtt); span_ are the bytes acknowledged after the MI's first boundary
  // up to its last, unsampled_ those acknowledged since the last boundary.
  Time span_ack0_ = Time::zero(), span_send0_ = Time::zero();
  Time span_ack1_ = Time::zero(), span_send1_ = Time::zero();
  bool span_open_ = false;
  uint64_t span_bytes_ = 0, unsampled_bytes_ = 0;
  Duration base_window_;
  double base_slack_, base_slack_low_, floor_rtts_;
  double base_ps_;                    // the RTT unit of the MIs (learn_base)
  double win_min_ps_ = 0;             // windowed min RTT and when it was taken
  Time win_min_at_ = Time::zero();
  LtpStats stats_;
};

}  // namespace sroce::cc
