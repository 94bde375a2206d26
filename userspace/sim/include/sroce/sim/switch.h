// A switch: routing (BFS tables, ECMP by the 5-tuple) and, when
// SwitchConfig::mmu is on, an output-queued shared-buffer model of a
// datacenter switch ASIC on every egress port:
//
//  - shared buffer with dynamic thresholds (Choudhury and Hahne, "Dynamic
//    queue length thresholds for shared-memory packet switches", IEEE/ACM ToN
//    1998): a data queue may grow while it is below alpha x (free buffer);
//  - trimming (DCP, SIGCOMM 2025; Ultra Ethernet packet trimming): a data
//    packet the buffer refuses is cut to its headers and sent in a strict-
//    priority queue, so the receiver learns of the loss one queueing delay
//    early instead of a timeout later;
//  - a strict-priority queue also for control packets (ACK, NAK, CNP, READ
//    request): HPCC and DCQCN assume feedback is not stuck behind data;
//  - ECN marking, RED-style (Kmin, Kmax, Pmax, as DCQCN, SIGCOMM 2015) at
//    dequeue on the queue left behind (docs/cc/README.md, Integration, item 1);
//  - INT stamping at dequeue (HPCC, SIGCOMM 2019, section 3.2) and the
//    shared-buffer-filling flag (Odin), in the packet slot;
//  - PFC (IEEE 802.1Qbb) per ingress port: the bytes a port's arrivals hold
//    in the buffer above xoff pause the upstream sender, below xon resume it.
//    With PFC on, the egress threshold does not drop (the lossless class is
//    admitted by ingress accounting; headroom is what the buffer has left).
//
// With mmu off (the default) egress is the link's plain drop-tail queue, as
// before this model existed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "sroce/sim/histogram.h"
#include "sroce/sim/link.h"
#include "sroce/sim/node.h"
#include "sroce/sim/rng.h"

namespace sroce::sim {

struct GidHash {
  size_t operator()(const Gid& g) const;
};

// The ECMP hash of a switch: the 5-tuple (source and destination IP, protocol
// UDP, source and destination port) mixed with a per-switch seed, so that the
// UDP source port (the engine's lane) decides the path.
uint64_t ecmp_hash(const PacketMeta& m, uint64_t seed);

struct EcnConfig {
  bool enabled = false;
  // DCQCN (Zhu et al., SIGCOMM 2015, section 5/6: Kmin 5 KB, Kmax 200 KB,
  // Pmax 1 % at 40 Gbit/s). Scale with the link rate for faster links.
  uint64_t kmin_bytes = 5'000;
  uint64_t kmax_bytes = 200'000;
  double pmax = 0.01;
  // Marking probability for a queue of q bytes: 0 up to Kmin, rising
  // linearly to Pmax at Kmax, 1 above Kmax.
  double probability(uint64_t q) const {
    if (q <= kmin_bytes) return 0.0;
    if (q > kmax_bytes) return 1.0;
    return pmax * static_cast<double>(q - kmin_bytes) /
           static_cast<double>(kmax_bytes - kmin_bytes);
  }
};

struct PfcConfig {
  bool enabled = false;
  // Per ingress port: pause the upstream sender when the bytes that arrived
  // on the port and still sit in this switch exceed xoff; resume below xon.
  // Ours: lossless needs N_ports x (xoff + headroom) < buffer; headroom per
  // port is about 2 x delay x rate + 2 MTU (about 34 KB at 100 Gbit/s, 1 us).
  uint64_t xoff_bytes = 256u << 10;
  uint64_t xon_bytes = 224u << 10;
};

struct SwitchConfig {
  bool mmu = false;  // off: plain per-link drop-tail (LinkConfig::queue_bytes)
  // Shared buffer. 32 MB as in HPCC's simulations (Li et al., SIGCOMM 2019).
  uint64_t buffer_bytes = 32ull << 20;
  // Dynamic threshold alpha (Choudhury-Hahne): one congested queue settles at
  // alpha/(1+alpha) of the buffer; 1 is the common ASIC default.
  double dt_alpha = 1.0;
  // Trimming (DCP): keep max(BTH + extension headers, trim_keep_bytes) of the
  // RoCE payload (UDP payload), drop the rest, and send it at strict priority.
  bool trim = false;
  uint32_t trim_keep_bytes = 64;
  // Strict-priority queue capacity per port (trimmed headers and control
  // packets; not part of the shared buffer).
  uint64_t prio_queue_bytes = 256u << 10;
  bool control_priority = true;
  EcnConfig ecn;
  bool int_stamp = false;
  // Shared-buffer flag (Odin): set on data packets enqueued while occupancy is
  // above this fraction of the buffer; 0 = off. 0.5 as docs/cc/README.md
  // ("Integration", simulator item 3) suggests.
  double sb_flag_fraction = 0.0;
  PfcConfig pfc;
};

struct SwitchStats {
  uint64_t forwarded = 0;
  uint64_t no_route = 0;
  uint64_t ttl_expired = 0;
  uint64_t egress_drops = 0;  // refused by the egress (buffer, priority queue or link down)
  uint64_t trimmed = 0;
  uint64_t ecn_marked = 0;
  uint64_t int_stamped = 0;
  uint64_t sb_flagged = 0;
  uint64_t pfc_xoff = 0;  // pause signals sent upstream
  uint64_t pfc_xon = 0;
  uint64_t buffer_bytes = 0;  // shared buffer in use now
  uint64_t max_buffer_bytes = 0;
};

class Switch final : public Node, public EgressPolicy {
 public:
  Switch(Network& net, NodeId id, std::string name, uint64_t ecmp_seed);
  void receive(PacketId pkt, Link& from, Time now) override;

  // Applies to every egress port (present and future).
  void configure(const SwitchConfig& cfg);
  const SwitchConfig& config() const { return cfg_; }
  // Called by Network::connect for each new out-link.
  void attach_port(Link& out);

  // Routes by destination index (Network::dest_of): `by_dest[d]` names one of
  // `hop_sets` (set 0 is empty: unreachable). Switches hold few distinct sets,
  // so the table is 4 bytes per destination.
  void set_routes(const std::vector<std::vector<Link*>>& hop_sets, std::vector<uint32_t> by_dest);
  // The next hops toward `dst` (empty if unreachable).
  std::span<Link* const> next_hops(const Gid& dst) const;
  std::span<Link* const> next_hops(uint32_t dest) const {
    if (dest >= route_of_.size()) return {};
    const HopSet& h = sets_[route_of_[dest]];
    return {hops_.data() + h.first, h.count};
  }
  // The egress link a packet with this addressing takes (`dest`: the
  // destination's index, if known).
  Link* select(const PacketMeta& m) const { return select(m, kNoDest); }
  Link* select(const PacketMeta& m, uint32_t dest) const;
  const SwitchStats& stats() const { return stats_; }
  // Data-queue length an arriving data packet found at its egress port, bytes.
  const LogHistogram& queue_histogram() const { return qlen_; }
  // Bytes that arrived on link `in` and are still in this switch's buffer.
  uint64_t ingress_bytes(LinkId in) const { return in < ingress_.size() ? ingress_[in].bytes : 0; }

  Admit admit(Link& link, Packet& p, Time now) override;
  void dequeued(Link& link, Packet& p, Time now) override;

  // Cuts a data packet to its headers (see SwitchConfig::trim); false if it
  // has nothing to cut (an ACK, or already that short).
  static bool trim_packet(Packet& p, uint32_t keep_bytes);
  // Header-only packets (ACK, NAK, CNP, READ request, atomic ACK ...).
  static bool is_control(const Packet& p);

 private:
  struct Ingress {
    uint64_t bytes = 0;
    bool paused = false;
  };
  Admit admit_priority(Link& link, const Packet& p);

  // A next-hop set: hops_[first, first + count). The sets and their links
  // sit in two short arrays (a leaf: one set per local host and its
  // uplinks), so a lookup is the destination's entry and two hot lines.
  struct HopSet {
    uint32_t first = 0;
    uint32_t count = 0;
  };
  std::vector<HopSet> sets_;
  std::vector<Link*> hops_;
  std::vector<uint32_t> route_of_;  // by destination index: into sets_
  uint64_t seed_;
  SwitchConfig cfg_;
  SwitchStats stats_;
  Rng rng_;
  std::vector<Ingress> ingress_;  // by LinkId (grown at first use of a link)
  LogHistogram qlen_;
};

}  // namespace sroce::sim
