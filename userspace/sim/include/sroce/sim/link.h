// A unidirectional link: a drop-tail transmit queue (in frame bytes) at the
// sender, a serializer at `rate_bps`, a propagation delay, and impairments
// applied to each frame as it leaves the serializer. A cable is two Links;
// giving them different configs makes an asymmetric path.
//
// Timeline of one frame:
//   enqueue (t0) -> [waits behind earlier frames] -> serialization starts (ts)
//   -> last bit out at ts + wire_bits/rate (kTxDone: impairments decide)
//   -> last bit arrives at + delay (+ reorder delay) (kDeliver: pcap, receiver)
#pragma once

#include <cstdint>
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

struct LinkStats {
  uint64_t enqueued = 0;
  uint64_t tx_frames = 0;      // frames fully serialized
  uint64_t tx_wire_bytes = 0;  // including preamble, FCS and inter-frame gap
  uint64_t delivered = 0;      // frames handed to the receiving node (duplicates included)
  uint64_t queue_drops = 0;
  uint64_t lost_random = 0;
  uint64_t lost_burst = 0;
  uint64_t lost_down = 0;
  uint64_t lost_forced = 0;
  uint64_t corrupted = 0;
  uint64_t duplicated = 0;
  uint64_t reordered = 0;
  uint64_t ecn_marked = 0;
  uint64_t max_queue_bytes = 0;

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
  Impairments& impairments() { return imp_.config(); }
  const LinkStats& stats() const { return stats_; }
  std::string name() const;

  size_t queued_packets() const { return q_count_; }
  uint64_t queued_bytes() const { return q_bytes_; }
  bool busy() const { return busy_; }
  bool up_at(Time t) const { return !imp_.down_at(t); }

  // Ethernet frame bytes (header .. FCS excluded) for a packet, and what it
  // occupies on the wire.
  static uint32_t frame_bytes(const Packet& p);
  static uint32_t wire_bytes(const Packet& p) { return frame_bytes(p) + kEthFcs + kEthPreambleIfg; }
  // Time to clock `bytes` out at `rate_bps`, rounded up to the next picosecond.
  static Duration serialization(uint64_t bytes, uint64_t rate_bps);

  void on_event(uint32_t kind, uint64_t arg, Time now) override;

 private:
  enum : uint32_t { kTxDone = 1, kDeliver = 2 };

  void start_next(Time now);
  void push(PacketId p);
  PacketId pop();
  void corrupt(Packet& p, uint32_t bit);

  Network& net_;
  LinkId id_;
  Node& from_;
  Node& to_;
  LinkConfig cfg_;
  Impairer imp_;
  LinkStats stats_;
  // FIFO ring of waiting packets (not including the one in service).
  std::vector<PacketId> ring_;
  size_t q_head_ = 0;
  size_t q_count_ = 0;
  uint64_t q_bytes_ = 0;
  bool busy_ = false;
  uint64_t ordinal_ = 0;  // frames serialized so far (for Impairments::drop_frames)
};

}  // namespace sroce::sim
