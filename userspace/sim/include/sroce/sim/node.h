// Nodes of the fabric graph: hosts (which run an engine), switches, and raw
// endpoints (synthetic traffic for tests of the fabric itself).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sroce/engine/types.h"
#include "sroce/sim/link.h"

namespace sroce::sim {

using NodeId = uint32_t;

enum class NodeKind : uint8_t { kHost, kSwitch, kEndpoint };

class Node {
 public:
  Node(Network& net, NodeId id, std::string name, NodeKind kind, Gid addr)
      : net_(net), id_(id), name_(std::move(name)), kind_(kind), addr_(addr) {}
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // A frame arrived on `from`. The node owns `pkt` now.
  virtual void receive(PacketId pkt, Link& from, Time now) = 0;
  // `link` (one of ours) finished serializing a frame: room in its queue.
  virtual void on_link_ready(Link& link, Time now) {
    (void)link;
    (void)now;
  }

  NodeId id() const { return id_; }
  const std::string& name() const { return name_; }
  NodeKind kind() const { return kind_; }
  bool addressable() const { return kind_ != NodeKind::kSwitch; }
  // The node's IP address as a GID (IPv4-mapped); zero for switches.
  const Gid& addr() const { return addr_; }
  // Locally administered MAC 02:00:00:00:hi:lo from the node id.
  std::array<uint8_t, 6> mac() const {
    return {0x02, 0, 0, static_cast<uint8_t>(id_ >> 16), static_cast<uint8_t>(id_ >> 8),
            static_cast<uint8_t>(id_)};
  }

  const std::vector<Link*>& out_links() const { return out_; }
  void add_out_link(Link* l) { out_.push_back(l); }

 protected:
  Network& net_;

 private:
  NodeId id_;
  std::string name_;
  NodeKind kind_;
  Gid addr_;
  std::vector<Link*> out_;
};

}  // namespace sroce::sim
