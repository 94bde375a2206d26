#include "sroce/sim/topology.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace sroce::sim {

namespace {
// "edge3.1": snprintf rather than string concatenation, which trips GCC 12's
// -Wrestrict false positive at -O3.
std::string name2(const char* prefix, uint32_t a, uint32_t b) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%u.%u", prefix, a, b);
  return buf;
}
std::string name1(const char* prefix, uint32_t a) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%u", prefix, a);
  return buf;
}
}  // namespace

BackToBack build_back_to_back(Network& net, const HostConfig& hc, const LinkConfig& ab,
                              const LinkConfig& ba) {
  BackToBack t;
  t.a = &net.add_host("h1", host_gid(1), hc);
  t.b = &net.add_host("h2", host_gid(2), hc);
  auto [l1, l2] = net.connect(*t.a, *t.b, ab, ba);
  t.ab = l1;
  t.ba = l2;
  net.compute_routes();
  return t;
}

LeafSpine build_leaf_spine(Network& net, const LeafSpineConfig& cfg, const HostConfig& hc) {
  LeafSpine t;
  uint32_t n = 1;
  for (uint32_t l = 0; l < cfg.leaves; ++l) {
    t.leaves.push_back(&net.add_switch(name1("leaf", l)));
    t.leaves.back()->configure(cfg.sw);
    for (uint32_t i = 0; i < cfg.hosts_per_leaf; ++i, ++n) {
      Host& h = net.add_host(name1("h", n), host_gid(n), hc);
      t.hosts.push_back(&h);
      net.connect(h, *t.leaves.back(), cfg.host_link);
    }
  }
  for (uint32_t s = 0; s < cfg.spines; ++s) {
    t.spines.push_back(&net.add_switch(name1("spine", s)));
    t.spines.back()->configure(cfg.sw);
  }
  t.up.assign(cfg.leaves, std::vector<Link*>(cfg.spines));
  t.down.assign(cfg.spines, std::vector<Link*>(cfg.leaves));
  for (uint32_t l = 0; l < cfg.leaves; ++l)
    for (uint32_t s = 0; s < cfg.spines; ++s) {
      const LinkConfig& up = s < cfg.uplink_per_spine.size() ? cfg.uplink_per_spine[s] : cfg.uplink;
      const LinkConfig& down = s < cfg.downlink_per_spine.size() ? cfg.downlink_per_spine[s] : cfg.downlink;
      auto [u, d] = net.connect(*t.leaves[l], *t.spines[s], up, down);
      t.up[l][s] = u;
      t.down[s][l] = d;
    }
  net.compute_routes();
  return t;
}


FatTree build_fat_tree(Network& net, const FatTreeConfig& cfg, const HostConfig& hc) {
  FatTree t;
  const uint32_t k = std::max<uint32_t>(2, cfg.k & ~1u);
  const uint32_t h = k / 2;
  auto sw = [&](const std::string& name) {
    Switch& s = net.add_switch(name);
    s.configure(cfg.sw);
    return &s;
  };
  uint32_t n = 1;
  for (uint32_t p = 0; p < k; ++p) {
    for (uint32_t e = 0; e < h; ++e) {
      t.edges.push_back(sw(name2("edge", p, e)));
      for (uint32_t i = 0; i < h; ++i, ++n) {
        Host& host = net.add_host(name1("h", n), host_gid(n), hc);
        t.hosts.push_back(&host);
        net.connect(host, *t.edges.back(), cfg.host_link);
      }
    }
    for (uint32_t a = 0; a < h; ++a) t.aggs.push_back(sw(name2("agg", p, a)));
    for (uint32_t e = 0; e < h; ++e)
      for (uint32_t a = 0; a < h; ++a) net.connect(*t.edges[p * h + e], *t.aggs[p * h + a], cfg.edge_agg);
  }
  for (uint32_t c = 0; c < h * h; ++c) t.cores.push_back(sw(name1("core", c)));
  for (uint32_t p = 0; p < k; ++p)
    for (uint32_t a = 0; a < h; ++a)
      for (uint32_t c = 0; c < h; ++c)
        t.agg_up.push_back(net.connect(*t.aggs[p * h + a], *t.cores[a * h + c], cfg.agg_core).first);
  net.compute_routes();
  return t;
}

std::vector<const Link*> first_path(const Network& net, const Node& src, const Node& dst) {
  std::vector<const Link*> path;
  if (src.out_links().empty()) return path;
  const Link* l = src.out_links().front();
  for (size_t guard = 0; guard < net.nodes().size(); ++guard) {
    path.push_back(l);
    const Node& at = l->to();
    if (&at == &dst) return path;
    if (at.kind() != NodeKind::kSwitch) break;
    const auto& hops = static_cast<const Switch&>(at).next_hops(dst.addr());
    if (hops.empty()) break;
    l = hops.front();
  }
  return {};
}

}  // namespace sroce::sim
