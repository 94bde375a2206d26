// LTP's Bayesian filter over the network state of one flow (docs/cc/ltp.md).
//
// The state is (c, d): c the bottleneck rate available to this flow (what it
// would get if it sent faster: the bottleneck rate minus the competing load),
// as a fraction of the line rate, and d the base RTT, as a multiple of the
// configured one. The queueing delay is derived from them (RTT - d), and the
// competing load is 1 - c of the bottleneck. The filter keeps the two
// marginals on fixed log-spaced grids (a factorised grid filter; ours: the
// paper's filter is not at hand), updated once per monitor interval (MI)
// from what the flow sent, what was delivered, the RTT, ECN and loss:
//
//   predict  each marginal diffuses to its neighbours (the competing load
//            and the path may change) and mixes in a little of the uniform
//   update   saturated MI (a queue grew, ECN or loss): delivery ~ c
//            unsaturated MI: delivery ~ min(sent, c): c >= sent, no more
//            d ~ the smallest RTT seen (log-normal, tight): a queue only adds
//
// The second line is why the flow must probe: while it sends below c, the
// delivery rate only says that c is at least what it sent (the states are
// not distinguishable); only an MI above c shows c itself. The entropy of
// the marginals is what the intrinsic reward of training lowers.
//
// Fixed-size arrays (float probabilities; the grids are implicit, linear in
// log space), no allocation, no clock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace sroce::cc {

// One monitor interval as the filter and the policy see it. Rates are
// fractions of the line rate, RTTs multiples of the configured base RTT.
struct LtpObservation {
  double sent = 0;        // bytes sent over the MI / (line rate x MI)
  double delivered = 0;   // bytes acknowledged over the MI / (line rate x MI)
  double rtt_min = 0;     // smallest RTT sample of the MI (0: none)
  double rtt_mean = 0;    // mean RTT sample of the MI (0: none)
  double ecn = 0;         // fraction of the acknowledged bytes that echoed CE
  double loss = 0;        // bytes declared lost / bytes sent
  bool has_rtt() const { return rtt_min > 0 && rtt_mean > 0; }
};

struct LtpFilterConfig {
  double rate_lo = 1.0 / 512;   // smallest c on the grid (fraction of line rate)
  double rtt_lo = 0.25;         // smallest d (x configured base RTT)
  double rtt_hi = 8.0;          // largest d
  double rate_diffusion = 0.06; // mass moving to each neighbour per MI
  double rtt_diffusion = 0.01;
  double uniform_mix = 0.002;   // mixed in per MI: a change far from the estimate stays findable
  double delivery_sigma = 0.25; // log-normal noise of the delivery rate (ACK clocking, bursts)
  double rtt_sigma = 0.08;      // of the min RTT around d when no queue stands
  double saturated_queue = 0.15; // RTT above d by this fraction of d: a queue grew
  bool track_info_gain = false;  // compute info_gain() (training; costs the entropy twice per MI)
};

class LtpFilter {
 public:
  static constexpr int kRateBins = 36;
  static constexpr int kRttBins = 18;

  explicit LtpFilter(const LtpFilterConfig& cfg = {});

  // Back to the uniform prior.
  void reset();
  // The RTT unit changed by `factor` (new RTT = old RTT x factor, Ltp's
  // learned base): the floor follows, the belief over d starts over.
  void rebase(double factor);
  // One MI. Returns false when the observation was impossible under every
  // state (the filter diverged: it was reset to the prior).
  bool update(const LtpObservation& o);

  // Posterior summaries.
  double rate_mean() const;        // E[c] (geometric: exp E[log c])
  double rate_log_std() const;     // std of log2 c: the uncertainty the probing lowers
  double rtt_mean() const;         // E[d] (geometric)
  double rtt_log_std() const;      // std of log2 d
  double entropy() const;          // H(c) + H(d), nats
  // Was the last saturated decision true (the queue grew / ECN / loss)?
  bool last_saturated() const { return saturated_; }
  uint64_t divergences() const { return divergences_; }
  // Entropy the last update removed (after its predict step, before vs
  // after the observation), nats; with track_info_gain only. The intrinsic
  // reward of training: it is large when the MI probed (sent above c).
  double info_gain() const { return info_gain_; }

  // The grids: log c and log d of bin i (natural log), and the posteriors.
  double log_rate_at(int i) const { return log_rate_lo_ + i * log_rate_step_; }
  double log_rtt_at(int i) const { return log_rtt_lo_ + i * log_rtt_step_; }
  double rate_p(int i) const { return pc_[i]; }
  double rtt_p(int i) const { return pd_[i]; }

 private:
  template <std::size_t N>
  static void predict(std::array<float, N>& p, double diffusion, double mix);

  LtpFilterConfig cfg_;
  double log_rate_lo_, log_rate_step_, log_rtt_lo_, log_rtt_step_;
  std::array<float, kRateBins> pc_{};
  std::array<float, kRttBins> pd_{};
  bool saturated_ = false;
  uint64_t divergences_ = 0;
  double info_gain_ = 0;
  double rtt_floor_ = 0;  // smallest min RTT seen since the last reset
};

}  // namespace sroce::cc
