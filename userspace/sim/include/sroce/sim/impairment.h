// What a link does to the frames it carries, beyond queueing and delay. Each
// impairment draws from the link's own RNG stream (forked from the simulator's
// seed when the link is created), so enabling one impairment on one link does
// not change the random choices anywhere else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sroce/engine/types.h"
#include "sroce/sim/rng.h"

namespace sroce::sim {

// Gilbert-Elliott two-state burst loss: in state Good a frame is lost with
// probability loss_good, in Bad with loss_bad; after each frame the state flips
// Good->Bad with p_good_bad and Bad->Good with p_bad_good. Mean burst length is
// 1 / p_bad_good frames; the stationary share of Bad is p_gb / (p_gb + p_bg).
struct GilbertElliott {
  double p_good_bad = 0;
  double p_bad_good = 0;
  double loss_good = 0;
  double loss_bad = 1;
  bool enabled() const { return p_good_bad > 0; }
};

// A window during which the link is dead: every frame that starts
// serialization, is queued, or would arrive in [down, up) is lost.
struct Outage {
  Time down;
  Time up;
};

struct Impairments {
  double loss = 0;             // Bernoulli loss per frame
  GilbertElliott burst;        // burst loss (in addition to `loss`)
  double reorder = 0;          // fraction of frames delayed by reorder_delay extra
  Duration reorder_delay = Duration::micros(5);
  double duplicate = 0;        // fraction of frames delivered twice
  Duration duplicate_gap = Duration::nanos(100);
  double corrupt = 0;          // fraction of frames with one bit flipped in the RoCE payload
  std::vector<Outage> outages;
  // Deterministic drops: ordinal numbers (0-based, in transmission order) of
  // frames this link loses. Used by scenarios to force one NAK.
  std::vector<uint64_t> drop_frames;
  // Deterministic reordering: these frame ordinals get reorder_delay extra.
  std::vector<uint64_t> delay_frames;

  bool any() const {
    return loss > 0 || burst.enabled() || reorder > 0 || duplicate > 0 || corrupt > 0 ||
           !outages.empty() || !drop_frames.empty() || !delay_frames.empty();
  }
};

// Per-frame decision of one link, drawn in a fixed order.
struct ImpairDecision {
  bool lost = false;
  enum class Cause : uint8_t { kNone, kRandom, kBurst, kDown, kForced } cause = Cause::kNone;
  bool duplicate = false;
  bool corrupt = false;
  uint32_t corrupt_bit = 0;  // index into the corruptible bits (see Link)
  Duration extra_delay;      // reordering
};

class Impairer {
 public:
  Impairer(const Impairments& cfg, Rng rng) : cfg_(cfg), rng_(rng) {}

  bool down_at(Time t) const {
    for (const auto& o : cfg_.outages)
      if (t >= o.down && t < o.up) return true;
    return false;
  }
  // `ordinal` is the frame's number on this link; `corruptible_bits` is the
  // number of bits the link may flip (0: never corrupt).
  ImpairDecision decide(uint64_t ordinal, Time now, uint32_t corruptible_bits);

  const Impairments& config() const { return cfg_; }
  Impairments& config() { return cfg_; }
  bool in_bad_state() const { return bad_; }

 private:
  Impairments cfg_;
  Rng rng_;
  bool bad_ = false;
  size_t next_forced_ = 0;   // drop_frames is kept sorted
  size_t next_delayed_ = 0;  // delay_frames too
};

}  // namespace sroce::sim
