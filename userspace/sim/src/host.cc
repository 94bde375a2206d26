#include "sroce/sim/host.h"

#include <algorithm>
#include <array>

namespace sroce::sim {

namespace {
// Each host's arena sits at its own virtual base, 64 GiB apart, so an address
// that belongs to another host is out of range here.
constexpr uint64_t kArenaBase = 0x100000000000ull;
constexpr uint64_t kArenaStride = 0x1000000000ull;
}  // namespace

Host::Host(Network& net, NodeId id, std::string name, Gid addr, const HostConfig& cfg)
    : Node(net, id, std::move(name), NodeKind::kHost, addr),
      tx_ring_(cfg.tx_ring),
      // Nobody reads a payload the engine neither copies nor checks (ICRC).
      carry_payload_(!cfg.discard_payload || !cfg.engine.icrc_offload),
      cfg_(cfg),
      gids_{addr},
      mem_(kArenaBase + kArenaStride * id, cfg.arena_bytes) {
  cfg_.engine.gids = std::span<const Gid>(gids_, 1);
  engine_ = cfg.discard_payload ? std::make_unique<Engine>(cfg_.engine, null_mem_)
                                : std::make_unique<Engine>(cfg_.engine, mem_);
}

Host::~Host() { engine_.reset(); }

// Lives here, not in network.cc, so the fabric library does not need the engine.
Host& Network::add_host(std::string name, Gid addr, const HostConfig& cfg) {
  const auto id = static_cast<NodeId>(nodes_.size());
  auto h = std::make_unique<Host>(*this, id, std::move(name), addr, cfg);
  Host& ref = *h;
  nodes_.push_back(std::move(h));
  return ref;
}

std::vector<Host*> Network::hosts() const {
  std::vector<Host*> out;
  for (const auto& n : nodes_)
    if (n->kind() == NodeKind::kHost) out.push_back(static_cast<Host*>(n.get()));
  return out;
}

Simulator& Host::sim() { return net_.sim(); }

int Host::post_send(Qpn qpn, const SendWr& wr) {
  const Time now = sim().now();
  const int rc = engine_->post_send(qpn, wr, now);
  pump(now);
  return rc;
}

int Host::post_recv(Qpn qpn, const RecvWr& wr) {
  const int rc = engine_->post_recv(qpn, wr);
  pump(sim().now());
  return rc;
}

int Host::post_srq_recv(Handle srq, const RecvWr& wr) {
  const int rc = engine_->post_srq_recv(srq, wr);
  pump(sim().now());
  return rc;
}

void Host::receive(PacketId pkt, Link&, Time now) {
  auto& pool = net_.pool();
  const Packet& p = pool[pkt];
  ++stats_.rx_frames;
  if (p.corrupted) ++stats_.rx_corrupted;
  if (p.duplicate) ++stats_.rx_duplicates;
  if ((p.meta.traffic_class & 3) == 3) ++stats_.rx_ecn_ce;
  if (p.trimmed) ++stats_.rx_trimmed;
  if (p.sb_flag) ++stats_.rx_sb_flag;
  if (sroce_int_present(p.bytes(), p.head) && p.head > 4 && p.bytes()[4] != 0) ++stats_.rx_int;
  if (on_rx_) on_rx_(*this, p, now);
  // INT is in the bytes (docs/wire.md). A packet without its payload is
  // handed over at full length; the engine discards the payload anyway.
  engine_->on_packet(pool.contiguous(p), p.meta, now);
  pool.free(pkt);
  pump(now);
}

void Host::on_link_ready(Link&, Time now) {
  if (!in_pump_) pump(now);
}

void Host::on_event(uint32_t kind, uint64_t, Time now) {
  if (kind != kWake || now != wake_at_) return;  // superseded by a later schedule_wake
  wake_at_ = Time::never();
  ++stats_.wakes;
  pump(now);
}

bool Host::ring_full() const {
  const Link* up = uplink();
  if (up == nullptr) return true;
  return up->queued_packets() + (up->busy() ? 1 : 0) >= tx_ring_;
}

void Host::pump(Time now) {
  if (in_pump_) {
    repump_ = true;
    return;
  }
  in_pump_ = true;
  do {
    repump_ = false;
    if (engine_->next_deadline() <= now) {
      ++stats_.timer_calls;
      engine_->on_timer(now);
    }
    transmit(now);
    drain_completions(now);
  } while (repump_);
  in_pump_ = false;
  schedule_wake(now);
}

void Host::transmit(Time now) {
  auto& pool = net_.pool();
  while (!ring_full()) {
    if (held_) {
      if (held_until_ > now) break;
      const PacketId id = *held_;
      held_.reset();
      ++stats_.tx_frames;
      if (!uplink()->enqueue(id, now)) ++stats_.tx_dropped;
      continue;
    }
    PacketId id;
    std::optional<TxPacket> tx;
    if (carry_payload_) {
      // Written into a full-size slot; the engine writes at most kMaxPacket,
      // the rest is room for the hop records switches push (proto/int.h).
      id = pool.alloc(kMaxPacketBytes);
      tx = engine_->poll_transmit(pool[id].buffer().first(Engine::kMaxPacket), now);
      if (!tx) {
        pool.free(id);
        break;
      }
      pool[id].set_len(static_cast<uint32_t>(std::min<size_t>(tx->len, Engine::kMaxPacket)));
      pool.fit(id);  // ACKs and other short packets go back to an inline slot
    } else {
      // No payload bytes to keep (packet.h): the headers and tail are.
      const auto scratch = pool.tx_scratch();
      tx = engine_->poll_transmit(scratch.first(Engine::kMaxPacket), now);
      if (!tx) break;
      id = pool.store(scratch.first(std::min<size_t>(tx->len, Engine::kMaxPacket)), false);
    }
    Packet& p = pool[id];
    p.meta = tx->meta;
    if (tx->send_at > now) {
      // Pacing: the frame leaves at send_at; nothing behind it may pass it.
      held_ = id;
      held_until_ = tx->send_at;
      ++stats_.paced;
      break;
    }
    ++stats_.tx_frames;
    if (!uplink()->enqueue(id, now)) ++stats_.tx_dropped;
  }
}

void Host::drain_completions(Time now) {
  // Nothing written, queued or raised since the last drain began, and that
  // drain took everything there was then: the polls would all come back
  // empty. What the callbacks below make bumps the sequence past this.
  const uint64_t seq = engine_->output_seq();
  if (seq == drained_seq_) return;
  drained_seq_ = seq;
  auto& wcs = wcs_;
  for (size_t i = 0; i < cqs_.size(); ++i) {
    const Handle cq = cqs_[i];
    for (;;) {
      const int n = engine_->poll_cq(cq, wcs);
      if (n <= 0) break;
      stats_.completions += static_cast<uint64_t>(n);
      for (int k = 0; k < n; ++k)
        if (on_wc_) on_wc_(*this, cq, wcs[static_cast<size_t>(k)], now);
      if (static_cast<size_t>(n) < wcs.size()) break;
    }
  }
  while (auto ev = engine_->poll_async_event()) {
    ++stats_.async_events;
    if (on_async_) on_async_(*this, *ev, now);
  }
  while (engine_->poll_cq_notification()) {
  }
}

void Host::schedule_wake(Time now) {
  Time t = engine_->next_deadline();
  if (held_) t = std::min(t, held_until_);
  if (t == Time::never()) return;
  if (t <= now) {
    // Work is due now but the pass above did not do it: either the ring is
    // full (on_link_ready will run the loop) or the engine reported a
    // deadline it does not act on. Step past it rather than spin.
    if (ring_full()) return;
    ++stats_.stalls;
    t = now + Duration::nanos(1);
  }
  if (wake_at_ != Time::never() && wake_at_ > now && wake_at_ <= t) return;
  wake_at_ = t;
  sim().schedule(t, static_cast<EventSink*>(this), kWake);
}

}  // namespace sroce::sim
