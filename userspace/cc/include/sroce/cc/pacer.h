// Pacing helper for whoever puts a flow's packets on the wire (the engine's
// requester computes TxPacket::send_at with it; the lab model uses it too).
//
// The next packet may leave `wire_bytes * 8 / rate` after the previous one.
// An idle flow earns no credit: after a pause it starts at `now`, never with a
// burst.
#pragma once

#include <algorithm>
#include <cstdint>

#include "sroce/cc/types.h"

namespace sroce::cc {

class Pacer {
 public:
  // Earliest time the next packet may leave at the flow's current rate
  // (> 0). The gap after the previous packet is recomputed from the current
  // rate, so a rate change applies at once, as in a hardware rate limiter
  // (a cut to 1 Mb/s must not leave a 33 ms gap pending after the rate
  // recovered).
  Time next_send(Time now, uint64_t rate_bps) const {
    if (!sent_any_) return now;
    return std::max(now, last_sent_ + tx_time(last_wire_bytes_, static_cast<double>(rate_bps)));
  }

  // A packet of `wire_bytes` (frame bytes on the wire) left at `sent_at`.
  void on_sent(Time sent_at, uint32_t wire_bytes) {
    last_sent_ = sent_at;
    last_wire_bytes_ = wire_bytes;
    sent_any_ = true;
  }

 private:
  Time last_sent_ = Time::zero();
  uint32_t last_wire_bytes_ = 0;
  bool sent_any_ = false;
};

}  // namespace sroce::cc
