// `sroce pingmesh agent`: probes the targets of a pinglist over one UD QP, answers other
// agents' probes with two ACKs, traces each source port's path with TTL-limited probes, and
// writes every result as a JSON line plus Prometheus metrics (docs/pingmesh.md).
#pragma once

#include <string>

namespace sroce::pingmesh {

struct AgentOptions {
  std::string pinglist;      // JSON from `sroce pingmesh pinglist`
  std::string registry;      // directory where agents publish their address and QPN
  std::string out = "-";     // JSON lines ("-": stdout)
  std::string metrics;       // Prometheus text file, rewritten every second (optional)
  std::string services;      // `sroce telemetry services --json` output, re-read every 5 s
  std::string dev;           // RDMA device (empty: the first)
  int gid_index = -1;        // -1: the GID of the pinglist's address
  double duration_s = 0;     // 0: until SIGINT/SIGTERM
  unsigned timeout_ms = 0;   // 0: the pinglist's
  double rate_scale = 1.0;   // multiplies every probe rate of the pinglist
  bool trace = true;         // TTL-limited path traces (needs CAP_NET_RAW)
};

int run_agent(const AgentOptions& o);

}  // namespace sroce::pingmesh
