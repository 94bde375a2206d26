#include "sroce/sim/topology.h"

#include <string>

namespace sroce::sim {

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
    t.leaves.push_back(&net.add_switch("leaf" + std::to_string(l)));
    for (uint32_t i = 0; i < cfg.hosts_per_leaf; ++i, ++n) {
      Host& h = net.add_host("h" + std::to_string(n), host_gid(n), hc);
      t.hosts.push_back(&h);
      net.connect(h, *t.leaves.back(), cfg.host_link);
    }
  }
  for (uint32_t s = 0; s < cfg.spines; ++s) t.spines.push_back(&net.add_switch("spine" + std::to_string(s)));
  t.up.assign(cfg.leaves, std::vector<Link*>(cfg.spines));
  t.down.assign(cfg.spines, std::vector<Link*>(cfg.leaves));
  for (uint32_t l = 0; l < cfg.leaves; ++l)
    for (uint32_t s = 0; s < cfg.spines; ++s) {
      auto [u, d] = net.connect(*t.leaves[l], *t.spines[s], cfg.uplink, cfg.downlink);
      t.up[l][s] = u;
      t.down[s][l] = d;
    }
  net.compute_routes();
  return t;
}

}  // namespace sroce::sim
