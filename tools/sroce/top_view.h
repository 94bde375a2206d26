// One frame of `sroce top`: plain text tables (no curses, so it works over ssh
// in any terminal), ranked worst first. Pure function of two snapshots.
#pragma once

#include <string>

#include "telemetry_view.h"

namespace sroce::telemetry {

struct TopOptions {
  bool peers = true;   // a section per peer (dir, local, peer)
  bool lanes = true;   // a section per lane (+ UDP source port)
  bool paths = false;  // a section per path (+ destination QP)
  size_t limit = 20;   // rows per section
  std::string title = "sroce top: RoCEv2 on the wire (tc eBPF)";
};

// `before` may be null (no rates yet); seconds is the time between the two.
std::string render_top(const Snapshot& now, const Snapshot* before, double seconds,
                       const TopOptions& opt);

// 1234567 -> "1.23M"; below 10000 printed as is.
std::string human(double v);

}  // namespace sroce::telemetry
