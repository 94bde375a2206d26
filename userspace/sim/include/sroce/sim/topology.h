// Ready-made fabrics. Hosts get 10.0.0.x (x = 1, 2, ... in creation order).
#pragma once

#include <cstdint>
#include <vector>

#include "sroce/sim/host.h"
#include "sroce/sim/network.h"

namespace sroce::sim {

// 10.0.0.n as an IPv4-mapped GID.
inline Gid host_gid(uint32_t n) { return Gid::from_ipv4((10u << 24) | (n & 0xff)); }

struct BackToBack {
  Host* a = nullptr;
  Host* b = nullptr;
  Link* ab = nullptr;
  Link* ba = nullptr;
};
// Two hosts joined by one cable (a->b and b->a may differ: asymmetric).
BackToBack build_back_to_back(Network& net, const HostConfig& hc, const LinkConfig& ab,
                              const LinkConfig& ba);

struct LeafSpineConfig {
  uint32_t leaves = 2;
  uint32_t spines = 4;
  uint32_t hosts_per_leaf = 1;
  LinkConfig host_link;    // host <-> leaf, both directions
  LinkConfig uplink;       // leaf -> spine
  LinkConfig downlink;     // spine -> leaf
};

struct LeafSpine {
  std::vector<Host*> hosts;       // leaf-major: hosts[l * hosts_per_leaf + i]
  std::vector<Switch*> leaves;
  std::vector<Switch*> spines;
  // up[l][s]: leaf l -> spine s; down[s][l]: spine s -> leaf l.
  std::vector<std::vector<Link*>> up;
  std::vector<std::vector<Link*>> down;
};
// A two-tier Clos: every leaf connects to every spine; routes computed.
// Two hosts on different leaves have `spines` equal-cost paths.
LeafSpine build_leaf_spine(Network& net, const LeafSpineConfig& cfg, const HostConfig& hc);

}  // namespace sroce::sim
