// What the telemetry maps say, as C++ values: one snapshot of every path and
// the global counters, groupings (per peer, per lane, per path), rates between
// two snapshots, and the JSON of `sroce telemetry dump`. No BPF calls here
// except in read_snapshot(): the rest works on values, so it is unit-tested
// without a kernel.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sroce/engine/result.h"
#include "telemetry/telemetry.h"

namespace sroce::telemetry {

using Addr = std::array<uint8_t, 16>;

// The counters that add up when paths are grouped.
struct Counters {
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t ce = 0;
  uint64_t cnp = 0;
  uint64_t retx = 0;
  uint64_t ooo = 0;
  uint64_t acks = 0;
  std::array<uint64_t, SROCE_TM_NAK_SLOTS> nak{};
  std::array<uint64_t, SROCE_TM_RTT_BUCKETS> rtt_hist{};
  uint64_t rtt_sum_ns = 0;

  void add(const Counters& o);
  uint64_t naks() const;         // all NAK slots
  uint64_t rtt_samples() const;  // sum of the histogram
  // Quantile q in [0, 1] of the RTT in ns, interpolated inside its log2
  // bucket; 0 when there is no sample.
  double rtt_quantile_ns(double q) const;
  // Retransmitted share of the packets: the loss this path suffered as its
  // sender saw it (0 when no packets).
  double loss_ratio() const;
};

enum class Dir : uint8_t { kIngress = SROCE_TM_INGRESS, kEgress = SROCE_TM_EGRESS };

struct PathRow {
  Dir dir = Dir::kIngress;
  Addr local{};
  Addr peer{};
  uint16_t sport = 0;
  uint32_t dqpn = 0;
  Counters c;
  uint64_t first_ns = 0;  // CLOCK_MONOTONIC
  uint64_t last_ns = 0;
  uint32_t paths = 1;  // paths folded into this row (groups)

  static PathRow from_bpf(const sroce_tm_path_key& k, const sroce_tm_path& v);
};

struct AttachmentRow {
  std::string ifname;
  uint32_t ifindex = 0;
  uint64_t netns_ino = 0;
};

struct Snapshot {
  std::vector<PathRow> paths;
  std::array<uint64_t, SROCE_TM_STAT_COUNT> stats{};
  std::vector<AttachmentRow> attachments;
  uint32_t max_paths = 0;
  uint32_t max_pending = 0;
  uint64_t taken_ns = 0;  // CLOCK_MONOTONIC

  // LRU evictions: paths created minus paths still there (the maps are never
  // deleted from by user space, so this is exact).
  uint64_t evicted() const;
};

// Read everything pinned in pin_dir (SROCE_TM_DEFAULT_PIN_DIR when empty).
Result<Snapshot> read_snapshot(const std::string& pin_dir);
// The same from map fds (tests with an unpinned skeleton); attach_fd may be -1.
Result<Snapshot> read_snapshot_fds(int paths_fd, int stats_fd, int attach_fd);

enum class GroupBy { kPath, kLane, kPeer };
const char* group_by_name(GroupBy g);

// Fold paths into rows per (dir, local, peer) [kPeer], + sport [kLane], or
// leave them [kPath]. Rows come out in a stable order (by key).
std::vector<PathRow> group(const std::vector<PathRow>& paths, GroupBy by);

// The ranking of `sroce top`: loss ratio, then retransmissions, then RTT p99,
// then packets, all descending.
void rank(std::vector<PathRow>& rows);

// Rows of `now` matched by key with `before`: per-second rates of packets and
// bytes (0 for rows that are new).
struct Rate {
  double pps = 0;
  double bps = 0;  // bytes per second
};
std::vector<Rate> rates(const std::vector<PathRow>& now, const std::vector<PathRow>& before,
                        GroupBy by, double seconds);

// Paths whose last packet is at most window_ns old: the live 5-tuples and QPs
// (the service view pingmesh probes).
std::vector<PathRow> live_paths(const Snapshot& s, uint64_t window_ns);

std::string format_addr(const Addr& a);  // dotted quad for IPv4-mapped, else RFC 5952
const char* dir_name(Dir d);
const char* nak_slot_name(unsigned slot);  // "psn_seq_err", ..., "" for unused slots
extern const unsigned kNakSlotsUsed;       // slots 0 .. kNakSlotsUsed-1 have names

nlohmann::json path_json(const PathRow& r);
nlohmann::json paths_json(const Snapshot& s);  // the array `telemetry dump --json` prints
nlohmann::json stats_json(const Snapshot& s);

}  // namespace sroce::telemetry
