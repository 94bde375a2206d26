// How long the loop keeps polling after its last work before it sleeps
// (datapath.busy_poll_us is the most): adaptive, so a daemon spins only where
// spinning pays and no one else wants the CPU.
//
//  * A spin that ends without work (the loop goes to sleep) halves the budget;
//    an idle daemon is down to sleeping at once after a few sleeps.
//  * Work that comes while spinning doubles it (up to the maximum); so does a
//    wake-up that comes sooner than the maximum after the loop fell asleep:
//    spinning that long would have caught it without the wake-up.
//  * No spin at all while more tasks are runnable than there are CPUs (the
//    caller looks, e.g. /proc/loadavg): a spinning daemon would keep a program
//    spinning on its CQ, or any other task, off the core. That is the common
//    case on a shared host, where sleeping and being woken is the faster way
//    (docs/sroced.md, "Latency").
//
// Pure logic on the loop's clock, no system calls (tests/daemon/test_spin.cc).
#pragma once

#include <algorithm>
#include <cstdint>

#include "sroce/engine/types.h"  // Time, Duration

namespace sroce::daemon {

class AdaptiveSpin {
 public:
  static constexpr int64_t kMinGrowPs = 2'000'000;  // 2 us: the first step up from 0

  explicit AdaptiveSpin(uint32_t max_us) : max_ps_(int64_t{max_us} * 1'000'000), spin_ps_(max_ps_) {}

  // A pass that did something.
  void on_work() {
    if (spinning_) grow();  // work came while spinning: the spin paid
    spinning_ = false;
    idle_ = false;
  }
  // An idle pass `idle` after the last work: true to keep polling, false to
  // sleep. `crowded()` (more tasks runnable than CPUs) is asked once per idle
  // stretch, and only when there is a budget to spend.
  template <typename Crowded>
  bool keep_spinning(Duration idle, Crowded&& crowded) {
    if (!idle_) {
      idle_ = true;
      crowded_ = spin_ps_ > 0 && crowded();
    }
    if (!crowded_ && idle.ps < spin_ps_) {
      spinning_ = true;
      return true;
    }
    if (spinning_ || crowded_) spin_ps_ /= 2;  // a spin that caught nothing, or could not run
    spinning_ = false;
    crowded_ = false;
    return false;
  }
  // The loop woke after sleeping `slept`: a gap the maximum spin would have bridged.
  void on_wake(Duration slept) {
    if (slept.ps < max_ps_) grow();
  }

  int64_t spin_ps() const { return spin_ps_; }
  int64_t max_ps() const { return max_ps_; }

 private:
  void grow() { spin_ps_ = std::min(max_ps_, std::max(2 * spin_ps_, kMinGrowPs)); }

  int64_t max_ps_;
  int64_t spin_ps_;
  bool spinning_ = false;
  bool crowded_ = false;
  bool idle_ = false;  // crowded_ was looked at for this idle stretch
};

}  // namespace sroce::daemon
