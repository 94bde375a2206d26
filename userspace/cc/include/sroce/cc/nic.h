// The NIC-level view: one object per host NIC (per sroced port), shared by the
// congestion controllers of all flows (QPs, lanes) that leave through it.
//
// The daemon sees every flow of its NIC (DESIGN.md, "cc"); this is where that
// view lives. Odin's NIC-level ratio uses it (docs/cc/odin.md): each active
// flow declares the rate its own controller asks for (its demand), and the NIC
// scales all of them by ratio() = min(1, line rate / total demand), so that
// the flows of one host never ask for more than the NIC can send and split it
// in proportion to what their paths allow.
//
// Demands are kept in integer bit/s so that adding and removing flows in any
// order leaves no rounding residue. Single-threaded, like the engine.
#pragma once

#include <algorithm>
#include <cstdint>

namespace sroce::cc {

class NicState {
 public:
  explicit NicState(uint64_t line_rate_bps) : line_rate_bps_(line_rate_bps) {}
  NicState(const NicState&) = delete;
  NicState& operator=(const NicState&) = delete;

  uint64_t line_rate_bps() const { return line_rate_bps_; }

  // A flow became active (has data to send) asking for `rate_bps`.
  void add_flow(uint64_t rate_bps) {
    ++active_flows_;
    demand_bps_ += rate_bps;
  }
  // An active flow's own controller changed its rate.
  void change_demand(uint64_t old_bps, uint64_t new_bps) {
    demand_bps_ = demand_bps_ - old_bps + new_bps;
  }
  // An active flow went idle or was destroyed.
  void remove_flow(uint64_t rate_bps) {
    --active_flows_;
    demand_bps_ -= rate_bps;
  }

  uint32_t active_flows() const { return active_flows_; }
  uint64_t demand_bps() const { return demand_bps_; }

  // Share of its demand each flow may actually use: min(1, C / sum of demands).
  double ratio() const {
    if (demand_bps_ <= line_rate_bps_) return 1.0;
    return static_cast<double>(line_rate_bps_) / static_cast<double>(demand_bps_);
  }

 private:
  uint64_t line_rate_bps_;
  uint64_t demand_bps_ = 0;
  uint32_t active_flows_ = 0;
};

}  // namespace sroce::cc
