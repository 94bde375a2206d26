// The telemetry programs loaded from their skeleton (not pinned, not
// attached), for BPF_PROG_TEST_RUN: run a crafted frame through the ingress or
// egress program and read back the maps.
#pragma once

#include <cstdint>
#include <vector>

#include "telemetry_view.h"

struct sroce_tm;

namespace sroce::tmtest {

using telemetry::Dir;
using telemetry::PathRow;
using telemetry::Snapshot;

class Progs {
 public:
  explicit Progs(uint32_t max_paths = 1024, uint32_t max_pending = 1024);
  ~Progs();
  Progs(const Progs&) = delete;
  Progs& operator=(const Progs&) = delete;

  // The program's return value; gso_segs/gso_size go into the skb (ctx_in).
  int run(Dir dir, const std::vector<uint8_t>& frame, uint32_t gso_segs = 0, uint32_t gso_size = 0);
  Snapshot snap() const;
  int pending_fd() const;

 private:
  sroce_tm* skel_ = nullptr;
};

// The path (dir, sport, dqpn) in s, or null.
const PathRow* find(const Snapshot& s, Dir dir, uint16_t sport, uint32_t dqpn);
uint64_t stat(const Snapshot& s, unsigned slot);
// Sum of the per-skb result slots (every skb lands in exactly one).
uint64_t result_sum(const Snapshot& s);

}  // namespace sroce::tmtest
