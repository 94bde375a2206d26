// A unidirectional link: a drop-tail transmit queue (in frame bytes) at the
// sender, a serializer at `rate_bps`, a propagation delay, and impairments
// applied to each frame as it leaves the serializer. A cable is two Links;
// giving them different configs makes an asymmetric path.
//
// Timeline of one frame:
//   enqueue (t0) -> [waits behind earlier frames] -> serialization starts (ts)
//   -> last bit out at ts + wire_bits/rate (kTxDone: impairments decide)
//   -> last bit arrives at + delay (+ reorder delay) (kDeliver: pcap, receiver)
//
// A link leaving a switch whose shared-buffer model is on (switch.h) has an
// EgressPolicy: the switch admits (or trims, or drops) each frame instead of the
// link's own drop-tail limit, and sees each frame as it starts serialization
// (ECN marking and INT stamping at dequeue, buffer release). Such a link has a
// second, strict-priority FIFO for trimmed headers and control packets, and can
// be paused by PFC from the node it feeds (IEEE 802.1Qbb; modelled as XOFF/XON
// signals that take the link delay to arrive).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sroce/sim/impairment.h"
#include "sroce/sim/packet.h"
#include "sroce/sim/simulator.h"

namespace sroce::sim {

class Network;
class Node;

using LinkId = uint32_t;

struct LinkConfig {
  uint64_t rate_bps = 100'000'000'000ull;
  Duration delay = Duration::micros(1);
  uint64_t queue_bytes = 1u << 20;   // drop-tail capacity, frame bytes waiting (not in service)
  uint64_t ecn_threshold_bytes = 0;  // mark CE on ECT frames above this backlog; 0 = never
  Impairments impair;
};

class Link;

// The switch side of an egress port (switch.h implements it).
class EgressPolicy {
 public:
  enum class Admit : uint8_t { kQueue, kPriority, kDrop };
  // Decides where `p` waits; may trim it (shorten p.len) before it is queued.
  virtual Admit admit(Link& link, Packet& p, Time now) = 0;
  // `p` left the queue and starts serialization now.
  virtual void dequeued(Link& link, Packet& p, Time now) = 0;

 protected:
  ~EgressPolicy() = default;
};

struct LinkStats {
  uint64_t enqueued = 0;
  uint64_t tx_frames = 0;      // frames fully serialized
  uint64_t tx_wire_bytes = 0;  // including preamble, FCS and inter-frame gap
  uint64_t delivered = 0;      // frames handed to the receiving node (duplicates included)
  uint64_t max_queue_bytes = 0;  // of the data queue
  uint64_t queue_drops = 0;
  uint64_t lost_random = 0;
  uint64_t lost_burst = 0;
  uint64_t lost_down = 0;
  uint64_t lost_forced = 0;
  uint64_t corrupted = 0;
  uint64_t duplicated = 0;
  uint64_t reordered = 0;
  uint64_t ecn_marked = 0;
  // Switch model (only on links with an EgressPolicy / PFC).
  uint64_t trimmed = 0;        // frames cut to their headers on admission
  uint64_t prio_frames = 0;    // frames sent from the priority queue
  uint64_t pfc_pauses = 0;     // XOFF signals that paused this link
  uint64_t paused_ps = 0;      // total time paused (closed intervals)

  uint64_t lost() const { return lost_random + lost_burst + lost_down + lost_forced; }
};

// Ethernet framing around a RoCEv2 UDP payload.
inline constexpr uint32_t kEthHeader = 14;
inline constexpr uint32_t kEthFcs = 4;
inline constexpr uint32_t kEthPreambleIfg = 8 + 12;  // preamble+SFD, minimum inter-frame gap
inline constexpr uint32_t kUdpHeader = 8;

class Link final : public EventSink {
 public:
  Link(Network& net, LinkId id, Node& from, Node& to, const LinkConfig& cfg, Rng rng);
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Takes ownership of `pkt`. Returns false if the frame was dropped (queue
  // full or link down); the packet is freed then.
  bool enqueue(PacketId pkt, Time now);

  LinkId id() const { return id_; }
  Node& from() const { return from_; }
  Node& to() const { return to_; }
  const LinkConfig& config() const { return cfg_; }
  uint64_t rate_bps() const { return rate_bps_; }
  // The live impairments, to change at once (the link looks at them again at
  // its next frame; do not keep the reference to change them later).
  Impairments& impairments() {
    impaired_ = -1;
    return imp_.config();
  }
  const LinkStats& stats() const { return stats_; }
  LinkStats& stats_mut() { return stats_; }  // for the egress policy's counters
  std::string name() const;

  // Frames and frame bytes waiting (both FIFOs), not counting the one in service.
  size_t queued_packets() const { return q_.size() + pq_.size(); }
  uint64_t queued_bytes() const { return q_bytes_ + pq_bytes_; }
  uint64_t data_queue_bytes() const { return q_bytes_; }
  uint64_t prio_queue_bytes() const { return pq_bytes_; }
  bool busy() const { return busy_; }
  bool paused() const { return paused_; }

  void set_policy(EgressPolicy* policy, uint32_t port_index) {
    policy_ = policy;
    port_index_ = port_index;
  }
  uint32_t port_index() const { return port_index_; }
  // PFC: the receiving node asks this link to stop (xoff) or go on (xon); the
  // signal takes the link delay to reach the sender.
  void signal_pfc(bool xoff, Time now);
  // Applies a pause/resume at once (what the signal does when it arrives).
  void set_paused(bool paused, Time now);
  bool up_at(Time t) const { return !imp_.down_at(t); }

  // Ethernet frame bytes (header .. FCS excluded) for a packet, and what it
  // occupies on the wire.
  static uint32_t frame_bytes(const Packet& p);
  static uint32_t wire_bytes(const Packet& p) { return frame_bytes(p) + kEthFcs + kEthPreambleIfg; }
  // Time to clock `bytes` out at `rate_bps`, rounded up to the next picosecond.
  static Duration serialization(uint64_t bytes, uint64_t rate_bps);

  void on_event(uint32_t kind, uint64_t arg, Time now) override;

 private:
  enum : uint32_t { kTxDone = 1, kDeliver = 2, kPauseOn = 3, kPauseOff = 4 };

  // FIFO ring of packet ids; grows (at warm-up) by doubling. 24 bytes, so
  // both FIFOs share a line with the link's other hot fields.
  class Fifo {
   public:
    Fifo() : ring_(new PacketId[16]) {}
    void push(PacketId p);
    PacketId pop();
    size_t size() const { return count_; }
    bool empty() const { return count_ == 0; }

   private:
    std::unique_ptr<PacketId[]> ring_;
    uint32_t mask_ = 15;  // the ring's size - 1 (a power of two)
    uint32_t head_ = 0;
    uint32_t count_ = 0;
  };

  void start_next(Time now);
  void corrupt(Packet& p, uint32_t bit);

  // Whether any impairment is configured (Impairments::any), found again
  // at the next frame after impairments() hands out the config to change.
  bool impaired() {
    if (impaired_ < 0) impaired_ = imp_.config().any() ? 1 : 0;
    return impaired_ != 0;
  }

  // Laid out by use: a frame's enqueue, start and tx-done (and the
  // simulator's prefetch of the sink's first line) read the first three
  // lines and nothing else of the link unless impairments are configured.
  // At 1024 hosts there are 4096 links; each used to touch 6-7 lines of
  // 720 bytes per frame (docs/sim.md, "Scale").
  Network& net_;
  Node& from_;
  Node& to_;
  EgressPolicy* policy_ = nullptr;
  uint64_t rate_bps_;  // cfg_'s, which never changes
  Duration delay_;
  // Frame bytes waiting in q_ and pq_: data, and the strict-priority FIFO of
  // trimmed headers and control packets (not including the one in service).
  uint64_t q_bytes_ = 0;
  // line 1
  Fifo q_;
  Fifo pq_;
  uint64_t pq_bytes_ = 0;
  uint64_t ordinal_ = 0;  // frames serialized so far (for Impairments::drop_frames)
  // line 2
  bool busy_ = false;
  bool paused_ = false;
  int8_t impaired_ = -1;  // impaired(): -1 until known
  uint32_t port_index_ = 0;
  uint64_t queue_bytes_;
  uint64_t ecn_threshold_bytes_;
  LinkStats stats_;  // its first five counters are the hot ones
  // Cold: set-up, impairments, pauses.
  LinkId id_;
  Time paused_since_;
  LinkConfig cfg_;
  Impairer imp_;
};

}  // namespace sroce::sim
