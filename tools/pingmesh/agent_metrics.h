// The agent's counters and its Prometheus text file (exposition format 0.0.4; a node
// exporter's textfile collector, or any scraper of files, serves it).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace sroce::pingmesh {

struct TargetStats {
  std::string kind;
  uint64_t sent = 0, ok = 0, timeout = 0, ack2_lost = 0, no_peer = 0;
  // The last kRing answered probes: quantiles of the three delays over them.
  static constexpr size_t kRing = 64;
  std::array<int64_t, kRing> rtt{}, resp{}, prober{};
  size_t n = 0;
  void add_sample(int64_t r, int64_t re, int64_t p) {
    rtt[n % kRing] = r;
    resp[n % kRing] = re;
    prober[n % kRing] = p;
    ++n;
  }
};

struct Metrics {
  std::map<std::string, TargetStats> targets;  // by target name
  uint64_t answered = 0, bad_packets = 0, late_acks = 0, resp_busy = 0, slot_busy = 0;
  uint64_t send_errors = 0, trace_sent = 0, trace_answered = 0, trace_lost = 0, peer_restarts = 0;

  TargetStats& target(const std::string& name, const std::string& kind) {
    TargetStats& t = targets[name];
    if (t.kind.empty()) t.kind = kind;
    return t;
  }
  // Writes FILE.tmp then renames it over FILE (a scraper never reads half a file).
  void write(const std::string& path, const std::string& host, const std::string& addr) const;
};

}  // namespace sroce::pingmesh
