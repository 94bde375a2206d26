// A host: one sroce::Engine, the memory it serves (an ArenaMemory), and the
// driver loop a real datapath would run around it, with the simulator as the
// clock and the host's uplink as the NIC:
//
//   frame arrives        -> engine.on_packet(payload, meta, now)
//   next_deadline() due  -> engine.on_timer(now)
//   after either, and whenever the uplink has room:
//     poll_transmit(now) -> hold until send_at (pacing), then onto the uplink
//   completions          -> poll_cq on watched CQs, handed to the callback
//
// The NIC has a small transmit ring (HostConfig::tx_ring frames on the uplink
// queue): the engine is polled only when the ring has room, so the engine,
// not the host's own queue, decides what waits, as with a real NIC.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "sroce/engine/engine.h"
#include "sroce/sim/memory.h"
#include "sroce/sim/network.h"
#include "sroce/sim/node.h"

namespace sroce::sim {

struct HostConfig {
  EngineConfig engine;           // `gids` is filled by the host with its address
  uint64_t arena_bytes = 64ull << 20;
  uint32_t tx_ring = 4;
  // The engine moves no payload bytes (a NullMemory behind the arena's
  // addresses): for large workloads whose data is not checked. Saves the two
  // copies per packet and the arena's pages; the packets are the same. With
  // the ICRC offloaded as well, the host's packets carry no payload bytes
  // (headers and lengths only, packet.h): the fabric sees the same packets.
  bool discard_payload = false;
};

struct HostStats {
  uint64_t rx_frames = 0;
  uint64_t rx_corrupted = 0;  // delivered with a flipped bit: the engine must drop each
  uint64_t rx_duplicates = 0;
  // Switch signals on arriving frames (switch.h), for congestion control to
  // come: ECN CE, trimmed headers, the shared-buffer flag, INT-stamped frames.
  uint64_t rx_ecn_ce = 0;
  uint64_t rx_trimmed = 0;
  uint64_t rx_sb_flag = 0;
  uint64_t rx_int = 0;
  uint64_t tx_frames = 0;
  uint64_t tx_dropped = 0;    // refused by the uplink (link down)
  uint64_t paced = 0;         // frames held for a future send_at
  uint64_t timer_calls = 0;
  uint64_t wakes = 0;
  uint64_t stalls = 0;        // next_deadline() <= now with nothing to do (engine bug)
  uint64_t completions = 0;
  uint64_t async_events = 0;
};

class Host final : public Node, private EventSink {
 public:
  using CompletionFn = std::function<void(Host&, Handle cq, const Wc&, Time)>;
  using AsyncFn = std::function<void(Host&, const AsyncEvent&, Time)>;
  // Sees every arriving frame before the engine does, with its fabric-side
  // state (INT records, shared-buffer flag, trimmed): where a congestion
  // control integration reads what the engine's wire does not carry yet.
  using RxFn = std::function<void(Host&, const Packet&, Time)>;

  Host(Network& net, NodeId id, std::string name, Gid addr, const HostConfig& cfg);
  ~Host() override;

  Engine& engine() { return *engine_; }
  ArenaMemory& memory() { return mem_; }
  Simulator& sim();
  const HostStats& stats() const { return stats_; }
  Link* uplink() const { return out_links().empty() ? nullptr : out_links().front(); }

  // Completions of these CQs are polled after every engine interaction and
  // handed to on_completion (in CQ order).
  void watch_cq(Handle cq) {
    cqs_.push_back(cq);
    drained_seq_ = kNotDrained;
  }
  void on_completion(CompletionFn fn) { on_wc_ = std::move(fn); }
  void on_async_event(AsyncFn fn) { on_async_ = std::move(fn); }
  void on_rx_packet(RxFn fn) { on_rx_ = std::move(fn); }

  // Data-path verbs through the host, so the driver loop runs right after
  // (as a doorbell would wake the datapath).
  int post_send(Qpn qpn, const SendWr& wr);
  int post_recv(Qpn qpn, const RecvWr& wr);
  int post_srq_recv(Handle srq, const RecvWr& wr);

  // Runs the driver loop now (after control-path calls that may create work).
  void kick() { pump(sim().now()); }

  void receive(PacketId pkt, Link& from, Time now) override;
  void on_link_ready(Link& link, Time now) override;

 private:
  enum : uint32_t { kWake = 1 };
  void on_event(uint32_t kind, uint64_t arg, Time now) override;
  void pump(Time now);
  void transmit(Time now);
  void drain_completions(Time now);
  void schedule_wake(Time now);
  bool ring_full() const;

  // Laid out by use: the fields every wake, arrival and pump reads come
  // first, right after the EventSink's vptr (the line the simulator
  // prefetches with the event); the configuration, the arena and poll_cq's
  // buffer after them. ~Host destroys the engine first (it refers to cfg_ and
  // the memories declared after it).
  std::unique_ptr<Engine> engine_;
  Time wake_at_ = Time::never();
  // Engine::output_seq when the last drain began (kNotDrained: none since
  // the watched CQs last changed): while it holds, the engine has produced
  // nothing that drain did not take, and the polls are skipped.
  static constexpr uint64_t kNotDrained = UINT64_MAX;
  uint64_t drained_seq_ = kNotDrained;
  std::optional<PacketId> held_;  // polled but its send_at is in the future
  Time held_until_;
  uint32_t tx_ring_;  // cfg_.tx_ring
  bool in_pump_ = false;
  bool repump_ = false;
  bool carry_payload_ = true;
  std::vector<Handle> cqs_;
  HostStats stats_;
  CompletionFn on_wc_;
  RxFn on_rx_;
  AsyncFn on_async_;
  HostConfig cfg_;
  Gid gids_[1];
  ArenaMemory mem_;
  NullMemory null_mem_;
  // poll_cq's buffer: built once (a Wc has member initializers, so a local
  // array was 16 of them zeroed at every drain, after every engine call).
  std::array<Wc, 16> wcs_;
};

}  // namespace sroce::sim
