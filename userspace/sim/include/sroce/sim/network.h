// The fabric: nodes joined by links, routing tables computed by BFS
// (shortest paths in hops) with ECMP over all equal-cost next hops, and an
// optional tap that sees every frame any link delivers (pcap).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sroce/sim/link.h"
#include "sroce/sim/node.h"
#include "sroce/sim/packet.h"
#include "sroce/sim/simulator.h"
#include "sroce/sim/switch.h"

namespace sroce::sim {

class Host;
struct HostConfig;

// Sees every frame a link delivers, at its arrival time (after impairments:
// lost frames are not seen, corrupted ones are seen corrupted).
class FrameTap {
 public:
  virtual void on_frame(const Link& link, const Packet& pkt, Time now) = 0;

 protected:
  ~FrameTap() = default;
};

// A synthetic traffic endpoint: sends caller-built packets, counts and keeps
// what arrives. Used to test the fabric without an engine.
class Endpoint final : public Node {
 public:
  Endpoint(Network& net, NodeId id, std::string name, Gid addr) : Node(net, id, std::move(name), NodeKind::kEndpoint, addr) {}
  void receive(PacketId pkt, Link& from, Time now) override;
  // Queues a copy of `payload` on the uplink (dropped if the queue is full).
  // `carry` false: as a host that carries no payload sends it (packet.h).
  bool send(std::span<const std::byte> payload, const PacketMeta& meta, Time now,
            bool carry = true);

  struct Arrival {
    Time at;
    uint64_t serial;
    PacketMeta meta;
    std::vector<std::byte> payload;
    bool corrupted;
    bool duplicate;
    LinkId via;
    bool trimmed = false;
    bool sb_flag = false;
    uint8_t int_count = 0;
    std::array<IntHop, kMaxIntHops> int_hops{};
  };
  const std::vector<Arrival>& arrivals() const { return arrivals_; }
  bool keep_payloads = true;

 private:
  std::vector<Arrival> arrivals_;
};

class Network {
 public:
  explicit Network(Simulator& sim);
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  Simulator& sim() { return sim_; }
  PacketPool& pool() { return pool_; }

  Switch& add_switch(std::string name);
  Endpoint& add_endpoint(std::string name, Gid addr);
  Host& add_host(std::string name, Gid addr, const HostConfig& cfg);

  // Two links a->b and b->a.
  std::pair<Link*, Link*> connect(Node& a, Node& b, const LinkConfig& ab, const LinkConfig& ba);
  std::pair<Link*, Link*> connect(Node& a, Node& b, const LinkConfig& both) {
    return connect(a, b, both, both);
  }

  // Fills every switch's routing table: for each addressable node, BFS from it
  // over reversed links gives each node's hop distance to it; a switch's next
  // hops are its out-links to neighbours one hop closer. With
  // `exclude_down_at`, links that are down at that time are left out (a fabric
  // that reroutes around a failure).
  void compute_routes(std::optional<Time> exclude_down_at = std::nullopt);
  // Recompute routes at t (and at each given time) - models routing
  // convergence after an outage begins/ends.
  void reroute_at(Time t);

  void set_tap(FrameTap* tap) { tap_ = tap; }
  FrameTap* tap() const { return tap_; }

  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<std::unique_ptr<Link>>& links() const { return links_; }
  std::vector<Host*> hosts() const;
  Node* node_by_addr(const Gid& a) const;
  // The dense index of the addressable node with address `a` (its rank among
  // the addressable nodes, as compute_routes numbers them), kNoDest if none.
  // Switches index their routes by it; a packet caches it (Packet::dest).
  uint32_t dest_of(const Gid& a) const {
    auto it = dest_index_.find(a);
    return it == dest_index_.end() ? kNoDest : it->second;
  }
  Link* link_between(const Node& a, const Node& b) const;

  // Sum of LinkStats over all links.
  LinkStats total_link_stats() const;

 private:
  Simulator& sim_;
  PacketPool pool_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Link>> links_;
  std::unordered_map<Gid, uint32_t, GidHash> dest_index_;
  FrameTap* tap_ = nullptr;
  uint64_t rng_stream_ = 0;
};

}  // namespace sroce::sim
