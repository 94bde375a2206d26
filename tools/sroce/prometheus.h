// The wire telemetry in the Prometheus text exposition format (version 0.0.4):
// HELP and TYPE before each family, `_total` counters, base units (seconds,
// bytes), cumulative `le` histogram buckets.
//
// Label cardinality is bounded: per-peer families carry (dir, local, peer) for
// at most max_peers peers (the rest fold into local="other", peer="other");
// per-path families carry sport and dqpn too, for the max_paths worst paths
// in `sroce top` order only. sroce_telemetry_series_omitted says how many
// were left out.
#pragma once

#include <string>

#include "telemetry_view.h"

namespace sroce::telemetry {

struct PromOptions {
  unsigned max_peers = 256;
  unsigned max_paths = 32;
};

std::string render_prometheus(const Snapshot& s, const PromOptions& opt);

// Escape a label value: backslash, double quote and line feed (the spec's three).
std::string prom_escape(const std::string& v);

}  // namespace sroce::telemetry
