// Ready-made fabrics. Hosts get 10.0.0.1, 10.0.0.2, ... in creation order
// (past 254 the count carries into the higher octets: host n is 10.0.0.0 + n).
#pragma once

#include <cstdint>
#include <vector>

#include "sroce/sim/host.h"
#include "sroce/sim/network.h"
#include "sroce/sim/switch.h"

namespace sroce::sim {

// 10.0.0.n as an IPv4-mapped GID.
inline Gid host_gid(uint32_t n) { return Gid::from_ipv4((10u << 24) + (n & 0xffffff)); }

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
  // Per-spine overrides (index = spine; missing entries use uplink/downlink):
  // paths of different delay, rate or loss, e.g. for reordering experiments.
  std::vector<LinkConfig> uplink_per_spine;
  std::vector<LinkConfig> downlink_per_spine;
  SwitchConfig sw;         // every leaf and spine
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

// A 3-tier fat-tree of k-port switches (Al-Fares et al., SIGCOMM 2008): k
// pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores, k^3/4 hosts
// (k = 4: 16, k = 8: 128, k = 16: 1024). Edge e of a pod serves k/2 hosts and
// connects to every aggregation switch of its pod; aggregation switch a of
// each pod connects to cores a*k/2 .. a*k/2 + k/2 - 1. Full bisection: two
// hosts in different pods have (k/2)^2 equal-cost paths.
struct FatTreeConfig {
  uint32_t k = 4;             // even
  LinkConfig host_link;       // host <-> edge, both directions
  LinkConfig edge_agg;        // both directions
  LinkConfig agg_core;        // both directions
  SwitchConfig sw;            // every switch
};

struct FatTree {
  std::vector<Host*> hosts;    // pod-major, then edge, then port
  std::vector<Switch*> edges;  // pod-major: edges[p * k/2 + e]
  std::vector<Switch*> aggs;   // aggs[p * k/2 + a]
  std::vector<Switch*> cores;  // cores[a * k/2 + c]
  std::vector<Link*> agg_up;   // every agg -> core link
};
FatTree build_fat_tree(Network& net, const FatTreeConfig& cfg, const HostConfig& hc);

// Links (host uplink first, the last one into `dst`) of one shortest path
// from `src` to `dst`, following each switch's first next hop. All ECMP
// alternatives have the same length; in the fabrics above also the same rates
// and delays. Empty if there is no route.
std::vector<const Link*> first_path(const Network& net, const Node& src, const Node& dst);

}  // namespace sroce::sim
