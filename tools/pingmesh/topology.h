// The fabric as pingmesh needs it: hosts (address, ToR), the node behind every interface
// address a TTL-limited probe can hear from, and the ECMP width between ToRs. Read from its
// own JSON or from `sroce-fabric status --json` (docs/pingmesh.md), and the pinglist each
// agent gets from it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sroce/engine/result.h"

namespace sroce::pingmesh {

struct TopoHost {
  std::string name;
  std::string addr;
  std::string tor;
};

struct Topology {
  std::vector<TopoHost> hosts;
  std::map<std::string, std::string> node_of_addr;  // interface address -> node name
  unsigned ecmp_width = 1;                           // equal-cost paths between two ToRs

  const TopoHost* host_by_name(const std::string& n) const;
  const TopoHost* host_by_addr(const std::string& a) const;
  // The node name of an address (a host, leaf or spine), or the address itself.
  std::string node(const std::string& addr) const;
  nlohmann::json to_json() const;
};

// Either {"hosts": {NAME: {"addr", "tor"}}, "nodes": {ADDR: NAME}, "ecmp_width": N} or the
// output of `sroce-fabric status --json` (hosts with "leaf", links with both ends' addresses).
Result<Topology> topology_from_json(const nlohmann::json& j);
Result<Topology> load_topology(const std::string& path);

// Probes per target for `coverage` probability of having hit each of `paths` equal-cost paths
// at least once when each probe's source port lands on a uniformly random path: the smallest m
// with P(all covered) = sum_j (-1)^j C(n,j) (1 - j/n)^m >= coverage (coupon collector).
unsigned coupon_ports(unsigned paths, double coverage);

struct PinglistOptions {
  double coverage = 0.99;
  unsigned max_inter_peers = 8;  // inter-ToR peers per host (a symmetric sample when more)
  double tor_rate = 10;          // probes/s to each ToR-mesh peer (R-Pingmesh: ~10/s)
  double inter_rate = 0;         // probes/s over all inter-ToR targets; 0: 10 per ECMP uplink
  double service_rate = 10;      // probes/s over all service targets
  double trace_rate = 30;        // TTL-limited traces/s (one target, every TTL up to max_ttl)
  unsigned timeout_ms = 1000;
  nlohmann::json services = nlohmann::json::array();  // `sroce telemetry services --json`
};

// The pinglist of host `name`: its ToR-mesh peers (one source port: one path under a ToR),
// inter-ToR peers with coupon_ports(ecmp_width) source ports each, and the live 5-tuples of
// `services` whose source is this host. Peer sets and ports are symmetric (a pair's ports are
// a function of the pair), so each responder traces the reverse path of every probe it gets.
Result<nlohmann::json> make_pinglist(const Topology& t, const std::string& name,
                                     const PinglistOptions& o);

// The source ports of an unordered host pair: k distinct ports in 0xC001..0xFFFF.
std::vector<uint16_t> pair_ports(const std::string& a, const std::string& b, unsigned k);

}  // namespace sroce::pingmesh
