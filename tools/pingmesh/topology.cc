#include "topology.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

namespace sroce::pingmesh {

namespace {

Error bad(const std::string& m) { return Error{EINVAL, m}; }

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

std::string pair_key(const std::string& a, const std::string& b) {
  return a < b ? a + "|" + b : b + "|" + a;
}

}  // namespace

const TopoHost* Topology::host_by_name(const std::string& n) const {
  for (const auto& h : hosts)
    if (h.name == n) return &h;
  return nullptr;
}

const TopoHost* Topology::host_by_addr(const std::string& a) const {
  for (const auto& h : hosts)
    if (h.addr == a) return &h;
  return nullptr;
}

std::string Topology::node(const std::string& addr) const {
  if (const TopoHost* h = host_by_addr(addr)) return h->name;
  auto it = node_of_addr.find(addr);
  return it == node_of_addr.end() ? addr : it->second;
}

nlohmann::json Topology::to_json() const {
  nlohmann::json h = nlohmann::json::object();
  for (const auto& x : hosts) h[x.name] = {{"addr", x.addr}, {"tor", x.tor}};
  return {{"hosts", h}, {"nodes", node_of_addr}, {"ecmp_width", ecmp_width}};
}

Result<Topology> topology_from_json(const nlohmann::json& j) {
  Topology t;
  if (!j.is_object() || !j.contains("hosts") || !j["hosts"].is_object())
    return bad("topology: expected an object with \"hosts\": {NAME: {\"addr\", \"tor\"}}");
  for (const auto& [name, h] : j["hosts"].items()) {
    if (!h.is_object() || !h.contains("addr") || !(h.contains("tor") || h.contains("leaf")))
      return bad("topology: host " + name + " needs \"addr\" and \"tor\" (or \"leaf\")");
    t.hosts.push_back({name, h["addr"].get<std::string>(),
                       h.contains("tor") ? h["tor"].get<std::string>() : h["leaf"].get<std::string>()});
  }
  std::sort(t.hosts.begin(), t.hosts.end(), [](const TopoHost& a, const TopoHost& b) {
    return a.name.size() != b.name.size() ? a.name.size() < b.name.size() : a.name < b.name;
  });
  if (j.contains("nodes")) {
    for (const auto& [addr, node] : j["nodes"].items()) t.node_of_addr[addr] = node.get<std::string>();
  }
  std::set<std::string> tors, cores;
  for (const auto& h : t.hosts) tors.insert(h.tor);
  if (j.contains("links") && j["links"].is_array()) {  // sroce-fabric status --json
    for (const auto& lk : j["links"]) {
      for (const char* end : {"a", "b"}) {
        if (!lk.contains(end)) continue;
        const auto& e = lk[end];
        if (!e.contains("addr") || !e.contains("node")) continue;
        const std::string node = e["node"].get<std::string>();
        t.node_of_addr[e["addr"].get<std::string>()] = node;
        if (!t.host_by_name(node) && !tors.count(node)) cores.insert(node);
      }
    }
  }
  if (j.contains("ecmp_width")) {
    t.ecmp_width = j["ecmp_width"].get<unsigned>();
  } else {
    for (const auto& [addr, node] : t.node_of_addr)
      if (!t.host_by_name(node) && !tors.count(node)) cores.insert(node);
    t.ecmp_width = std::max<unsigned>(1, static_cast<unsigned>(cores.size()));
  }
  if (t.hosts.empty()) return bad("topology: no hosts");
  return t;
}

Result<Topology> load_topology(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Error{ENOENT, "topology: cannot open " + path};
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded()) return bad("topology: " + path + " is not JSON");
  return topology_from_json(j);
}

unsigned coupon_ports(unsigned n, double coverage) {
  if (n <= 1) return 1;
  for (unsigned m = n; m < 10000; ++m) {
    double p = 0, c = 1;  // c = C(n, j)
    for (unsigned k = 0; k <= n; ++k) {
      p += ((k & 1) ? -1.0 : 1.0) * c * std::pow(1.0 - static_cast<double>(k) / n, m);
      c = c * (n - k) / (k + 1);
    }
    if (p >= coverage) return m;
  }
  return 10000;
}

std::vector<uint16_t> pair_ports(const std::string& a, const std::string& b, unsigned k) {
  std::vector<uint16_t> out;
  const uint64_t seed = fnv1a(pair_key(a, b));
  for (uint64_t i = 0; out.size() < k && i < 100000; ++i) {
    const auto p = static_cast<uint16_t>(0xc001 + mix(seed + i) % 0x3fff);
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

Result<nlohmann::json> make_pinglist(const Topology& t, const std::string& name,
                                     const PinglistOptions& o) {
  const TopoHost* me = t.host_by_name(name);
  if (!me) return bad("pinglist: no host " + name + " in the topology");
  nlohmann::json targets = nlohmann::json::array();
  std::vector<const TopoHost*> inter;
  for (const auto& h : t.hosts) {
    if (h.name == name) continue;
    if (h.tor == me->tor) {
      targets.push_back({{"name", h.name}, {"addr", h.addr}, {"kind", "tor"},
                         {"sports", pair_ports(name, h.name, 1)}, {"max_ttl", 1}});
    } else {
      inter.push_back(&h);
    }
  }
  // A symmetric sample: pair {a, b} is kept when its hash falls under max/candidates, so b's
  // list has a exactly when a's has b (both see the same candidate count in a uniform fabric).
  const double keep = inter.size() <= o.max_inter_peers
                          ? 1.0
                          : static_cast<double>(o.max_inter_peers) / static_cast<double>(inter.size());
  const unsigned k = coupon_ports(t.ecmp_width, o.coverage);
  unsigned n_inter = 0;
  for (const TopoHost* h : inter) {
    const double u = static_cast<double>(mix(fnv1a(pair_key(name, h->name))) % 1000000) / 1e6;
    if (u >= keep) continue;
    targets.push_back({{"name", h->name}, {"addr", h->addr}, {"kind", "inter"},
                       {"sports", pair_ports(name, h->name, k)}, {"max_ttl", 3}});
    ++n_inter;
  }
  unsigned n_service = 0;
  for (const auto& s : o.services) {
    if (!s.is_object() || s.value("src", "") != me->addr || !s.contains("sport")) continue;
    const std::string dst = s.value("dst", "");
    const TopoHost* h = t.host_by_addr(dst);
    const auto sport = s["sport"].get<unsigned>();
    if (!h || sport <= 0xc000 || sport > 0xffff) continue;  // only ports a flow label can name
    targets.push_back({{"name", h->name}, {"addr", dst}, {"kind", "service"},
                       {"sports", {sport}}, {"max_ttl", h->tor == me->tor ? 1 : 3},
                       {"dqpn", s.value("dqpn", 0u)}});
    ++n_service;
  }
  const double inter_rate = o.inter_rate > 0 ? o.inter_rate : (n_inter ? 10.0 * t.ecmp_width : 0.0);
  return nlohmann::json{{"host", name},
                        {"addr", me->addr},
                        {"tor", me->tor},
                        {"qkey", 0x50494e47},
                        {"ports_per_inter_peer", k},
                        {"coverage", o.coverage},
                        {"rates", {{"tor", o.tor_rate}, {"inter", inter_rate},
                                   {"service", n_service ? o.service_rate : 0.0},
                                   {"trace", o.trace_rate}}},
                        {"timeout_ms", o.timeout_ms},
                        {"targets", targets}};
}

}  // namespace sroce::pingmesh
