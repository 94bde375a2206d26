#include "sroce/sim/impairment.h"

namespace sroce::sim {

ImpairDecision Impairer::decide(uint64_t ordinal, Time now, uint32_t corruptible_bits) {
  ImpairDecision d;
  if (down_at(now)) {
    d.lost = true;
    d.cause = ImpairDecision::Cause::kDown;
    return d;
  }
  // drop_frames is sorted by the Link before the Impairer is built.
  while (next_forced_ < cfg_.drop_frames.size() && cfg_.drop_frames[next_forced_] < ordinal)
    ++next_forced_;
  if (next_forced_ < cfg_.drop_frames.size() && cfg_.drop_frames[next_forced_] == ordinal) {
    d.lost = true;
    d.cause = ImpairDecision::Cause::kForced;
    return d;
  }
  if (cfg_.burst.enabled()) {
    // Loss is drawn in the current state, then the chain steps.
    const bool lost = rng_.chance(bad_ ? cfg_.burst.loss_bad : cfg_.burst.loss_good);
    bad_ = bad_ ? !rng_.chance(cfg_.burst.p_bad_good) : rng_.chance(cfg_.burst.p_good_bad);
    if (lost) {
      d.lost = true;
      d.cause = ImpairDecision::Cause::kBurst;
      return d;
    }
  }
  if (rng_.chance(cfg_.loss)) {
    d.lost = true;
    d.cause = ImpairDecision::Cause::kRandom;
    return d;
  }
  if (corruptible_bits > 0 && rng_.chance(cfg_.corrupt)) {
    d.corrupt = true;
    d.corrupt_bit = static_cast<uint32_t>(rng_.below(corruptible_bits));
  }
  d.duplicate = rng_.chance(cfg_.duplicate);
  if (rng_.chance(cfg_.reorder)) d.extra_delay = cfg_.reorder_delay;
  while (next_delayed_ < cfg_.delay_frames.size() && cfg_.delay_frames[next_delayed_] < ordinal)
    ++next_delayed_;
  if (next_delayed_ < cfg_.delay_frames.size() && cfg_.delay_frames[next_delayed_] == ordinal)
    d.extra_delay = cfg_.reorder_delay;
  return d;
}

}  // namespace sroce::sim
