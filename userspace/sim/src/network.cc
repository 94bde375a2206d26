#include "sroce/sim/network.h"

#include <cstring>
#include <algorithm>
#include <deque>
#include <limits>
#include <map>


namespace sroce::sim {

// --- Endpoint ----------------------------------------------------------------

void Endpoint::receive(PacketId pkt, Link& from, Time now) {
  auto& pool = net_.pool();
  const Packet& p = pool[pkt];
  Arrival a{now, p.serial, p.meta, {}, p.corrupted, p.duplicate, from.id()};
  a.trimmed = p.trimmed;
  a.sb_flag = p.sb_flag;
  a.int_count = int_hops_of(p, a.int_hops);
  if (keep_payloads) {
    a.payload.resize(p.len);
    pool.copy_out(p, a.payload);
  }
  arrivals_.push_back(std::move(a));
  pool.free(pkt);
}

bool Endpoint::send(std::span<const std::byte> payload, const PacketMeta& meta, Time now,
                    bool carry) {
  if (out_links().empty() || payload.size() > kMaxPacketBytes) return false;
  auto& pool = net_.pool();
  const PacketId id = pool.store(payload, carry);
  pool[id].meta = meta;
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
    if (from.kind() == NodeKind::kSwitch) static_cast<Switch&>(from).attach_port(*links_.back());
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

  // Destinations numbered in node order (stable across recomputations: nodes
  // are only ever appended).
  dest_index_.clear();
  std::vector<const Node*> dests;
  for (const auto& node : nodes_)
    if (node->addressable() && dest_index_.emplace(node->addr(), static_cast<uint32_t>(dests.size())).second)
      dests.push_back(node.get());
  // Per switch: its distinct next-hop sets (a leaf has one per local host and
  // one for every remote host: its uplinks), and per destination the set.
  struct Table {
    std::vector<std::vector<Link*>> sets;
    std::map<std::vector<Link*>, uint32_t> index;
    std::vector<uint32_t> by_dest;
  };
  std::vector<Table> tables(n);
  for (const auto& node : nodes_)
    if (node->kind() == NodeKind::kSwitch) {
      tables[node->id()].sets.emplace_back();  // set 0: unreachable
      tables[node->id()].index.emplace(std::vector<Link*>{}, 0);
      tables[node->id()].by_dest.assign(dests.size(), 0);
    }
  constexpr uint32_t kInf = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> dist(n);
  std::deque<NodeId> q;
  std::vector<Link*> hops;
  for (uint32_t di = 0; di < dests.size(); ++di) {
    const Node* dst = dests[di];
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
      hops.clear();
      for (Link* l : node->out_links())
        if (usable(l) && dist[l->to().id()] + 1 == dist[node->id()]) hops.push_back(l);
      Table& t = tables[node->id()];
      auto [it, fresh] = t.index.emplace(hops, static_cast<uint32_t>(t.sets.size()));
      if (fresh) t.sets.push_back(hops);
      t.by_dest[di] = it->second;
    }
  }
  for (const auto& node : nodes_)
    if (node->kind() == NodeKind::kSwitch) {
      Table& t = tables[node->id()];
      static_cast<Switch&>(*node).set_routes(std::move(t.sets), std::move(t.by_dest));
    }
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
    t.trimmed += s.trimmed;
    t.prio_frames += s.prio_frames;
    t.pfc_pauses += s.pfc_pauses;
    t.paused_ps += s.paused_ps;
  }
  return t;
}

}  // namespace sroce::sim
