#include "sroce/sim/network.h"

#include <cstring>
#include <algorithm>
#include <deque>
#include <limits>


namespace sroce::sim {

size_t GidHash::operator()(const Gid& g) const {
  uint64_t a, b;
  std::memcpy(&a, g.raw, 8);
  std::memcpy(&b, g.raw + 8, 8);
  return static_cast<size_t>(Rng::mix(a ^ Rng::mix(b)));
}

uint64_t ecmp_hash(const PacketMeta& m, uint64_t seed) {
  uint64_t s0, s1, d0, d1;
  std::memcpy(&s0, m.src.raw, 8);
  std::memcpy(&s1, m.src.raw + 8, 8);
  std::memcpy(&d0, m.dst.raw, 8);
  std::memcpy(&d1, m.dst.raw + 8, 8);
  constexpr uint64_t kProtoUdp = 17;
  uint64_t h = Rng::mix(seed ^ s0);
  h = Rng::mix(h ^ s1);
  h = Rng::mix(h ^ d0);
  h = Rng::mix(h ^ d1);
  h = Rng::mix(h ^ (kProtoUdp << 32 | uint64_t{m.src_port} << 16 | m.dst_port));
  return h;
}

// --- Switch ------------------------------------------------------------------

Switch::Switch(Network& net, NodeId id, std::string name, uint64_t ecmp_seed)
    : Node(net, id, std::move(name), NodeKind::kSwitch, Gid{}), seed_(ecmp_seed) {}

const std::vector<Link*>& Switch::next_hops(const Gid& dst) const {
  static const std::vector<Link*> kNone;
  auto it = routes_.find(dst);
  return it == routes_.end() ? kNone : it->second;
}

Link* Switch::select(const PacketMeta& m) const {
  const auto& hops = next_hops(m.dst);
  if (hops.empty()) return nullptr;
  if (hops.size() == 1) return hops[0];
  return hops[ecmp_hash(m, seed_) % hops.size()];
}

void Switch::receive(PacketId pkt, Link&, Time now) {
  auto& pool = net_.pool();
  Packet& p = pool[pkt];
  // IP TTL / hop limit: a router decrements it (masked in the ICRC).
  if (p.meta.hop_limit <= 1) {
    ++stats_.ttl_expired;
    pool.free(pkt);
    return;
  }
  --p.meta.hop_limit;
  Link* out = select(p.meta);
  if (out == nullptr) {
    ++stats_.no_route;
    pool.free(pkt);
    return;
  }
  ++stats_.forwarded;
  if (!out->enqueue(pkt, now)) ++stats_.egress_drops;
}

// --- Endpoint ----------------------------------------------------------------

void Endpoint::receive(PacketId pkt, Link& from, Time now) {
  auto& pool = net_.pool();
  const Packet& p = pool[pkt];
  Arrival a{now, p.serial, p.meta, {}, p.corrupted, p.duplicate, from.id()};
  if (keep_payloads) a.payload.assign(p.data.begin(), p.data.begin() + p.len);
  arrivals_.push_back(std::move(a));
  pool.free(pkt);
}

bool Endpoint::send(std::span<const std::byte> payload, const PacketMeta& meta, Time now) {
  if (out_links().empty() || payload.size() > Engine::kMaxPacket) return false;
  auto& pool = net_.pool();
  const PacketId id = pool.alloc();
  Packet& p = pool[id];
  std::copy(payload.begin(), payload.end(), p.data.begin());
  p.len = static_cast<uint32_t>(payload.size());
  p.meta = meta;
  return out_links().front()->enqueue(id, now);
}

// --- Network -----------------------------------------------------------------

Network::Network(Simulator& sim) : sim_(sim) {}
Network::~Network() = default;

Switch& Network::add_switch(std::string name) {
  const auto id = static_cast<NodeId>(nodes_.size());
  auto sw = std::make_unique<Switch>(*this, id, std::move(name), Rng::mix(0x5eed0000ull + id));
  Switch& ref = *sw;
  nodes_.push_back(std::move(sw));
  return ref;
}

Endpoint& Network::add_endpoint(std::string name, Gid addr) {
  const auto id = static_cast<NodeId>(nodes_.size());
  auto ep = std::make_unique<Endpoint>(*this, id, std::move(name), addr);
  Endpoint& ref = *ep;
  nodes_.push_back(std::move(ep));
  return ref;
}

std::pair<Link*, Link*> Network::connect(Node& a, Node& b, const LinkConfig& ab,
                                         const LinkConfig& ba) {
  auto make = [&](Node& from, Node& to, const LinkConfig& cfg) {
    const auto id = static_cast<LinkId>(links_.size());
    // Each link draws from its own stream, derived from the run seed and the
    // link id only: impairing one link never shifts another link's draws.
    Rng rng(Rng::mix(sim_.seed() ^ Rng::mix(0x11u + id)));
    links_.push_back(std::make_unique<Link>(*this, id, from, to, cfg, rng));
    from.add_out_link(links_.back().get());
    return links_.back().get();
  };
  Link* l1 = make(a, b, ab);
  Link* l2 = make(b, a, ba);
  return {l1, l2};
}

void Network::compute_routes(std::optional<Time> exclude_down_at) {
  const size_t n = nodes_.size();
  auto usable = [&](const Link* l) { return !exclude_down_at || l->up_at(*exclude_down_at); };
  // in_links[v]: links that end at v (to walk the graph backwards from a destination).
  std::vector<std::vector<const Link*>> in_links(n);
  for (const auto& l : links_)
    if (usable(l.get())) in_links[l->to().id()].push_back(l.get());

  std::vector<std::unordered_map<Gid, std::vector<Link*>, GidHash>> tables(n);
  constexpr uint32_t kInf = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> dist(n);
  std::deque<NodeId> q;
  for (const auto& dst : nodes_) {
    if (!dst->addressable()) continue;
    std::fill(dist.begin(), dist.end(), kInf);
    dist[dst->id()] = 0;
    q.assign(1, dst->id());
    while (!q.empty()) {
      const NodeId v = q.front();
      q.pop_front();
      // Only switches forward: paths may not transit a host or endpoint.
      if (v != dst->id() && nodes_[v]->kind() != NodeKind::kSwitch) continue;
      for (const Link* l : in_links[v]) {
        const NodeId u = l->from().id();
        if (dist[u] == kInf) {
          dist[u] = dist[v] + 1;
          q.push_back(u);
        }
      }
    }
    for (const auto& node : nodes_) {
      if (node->kind() != NodeKind::kSwitch || dist[node->id()] == kInf) continue;
      auto& hops = tables[node->id()][dst->addr()];
      for (Link* l : node->out_links())
        if (usable(l) && dist[l->to().id()] + 1 == dist[node->id()]) hops.push_back(l);
    }
  }
  for (const auto& node : nodes_)
    if (node->kind() == NodeKind::kSwitch)
      static_cast<Switch&>(*node).set_routes(std::move(tables[node->id()]));
}

void Network::reroute_at(Time t) {
  sim_.call_at(t, [this](Time now) { compute_routes(now); });
}

Node* Network::node_by_addr(const Gid& a) const {
  for (const auto& n : nodes_)
    if (n->addressable() && n->addr() == a) return n.get();
  return nullptr;
}

Link* Network::link_between(const Node& a, const Node& b) const {
  for (Link* l : a.out_links())
    if (&l->to() == &b) return l;
  return nullptr;
}

LinkStats Network::total_link_stats() const {
  LinkStats t;
  for (const auto& l : links_) {
    const LinkStats& s = l->stats();
    t.enqueued += s.enqueued;
    t.tx_frames += s.tx_frames;
    t.tx_wire_bytes += s.tx_wire_bytes;
    t.delivered += s.delivered;
    t.queue_drops += s.queue_drops;
    t.lost_random += s.lost_random;
    t.lost_burst += s.lost_burst;
    t.lost_down += s.lost_down;
    t.lost_forced += s.lost_forced;
    t.corrupted += s.corrupted;
    t.duplicated += s.duplicated;
    t.reordered += s.reordered;
    t.ecn_marked += s.ecn_marked;
    t.max_queue_bytes = std::max(t.max_queue_bytes, s.max_queue_bytes);
  }
  return t;
}

}  // namespace sroce::sim
