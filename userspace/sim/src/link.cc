#include "sroce/sim/link.h"

#include <algorithm>

#include "sroce/sim/network.h"
#include "sroce/sim/node.h"

namespace sroce::sim {

namespace {
Impairments sorted(Impairments imp) {
  std::sort(imp.drop_frames.begin(), imp.drop_frames.end());
  std::sort(imp.delay_frames.begin(), imp.delay_frames.end());
  return imp;
}
}  // namespace

Link::Link(Network& net, LinkId id, Node& from, Node& to, const LinkConfig& cfg, Rng rng)
    : net_(net), id_(id), from_(from), to_(to), cfg_(cfg), imp_(sorted(cfg.impair), rng) {
  ring_.resize(16);
}

std::string Link::name() const { return from_.name() + "->" + to_.name(); }

uint32_t Link::frame_bytes(const Packet& p) {
  const uint32_t ip = p.meta.dst.is_ipv4() && p.meta.src.is_ipv4() ? 20 : 40;
  return kEthHeader + ip + kUdpHeader + p.len;
}

Duration Link::serialization(uint64_t bytes, uint64_t rate_bps) {
  if (rate_bps == 0) return Duration::picos(0);
  const __int128 bits = static_cast<__int128>(bytes) * 8;
  const __int128 ps = (bits * 1'000'000'000'000 + rate_bps - 1) / rate_bps;
  return Duration::picos(static_cast<int64_t>(ps));
}

void Link::push(PacketId p) {
  if (q_count_ == ring_.size()) {
    std::vector<PacketId> bigger(ring_.size() * 2);
    for (size_t i = 0; i < q_count_; ++i) bigger[i] = ring_[(q_head_ + i) % ring_.size()];
    ring_ = std::move(bigger);
    q_head_ = 0;
  }
  ring_[(q_head_ + q_count_) % ring_.size()] = p;
  ++q_count_;
}

PacketId Link::pop() {
  const PacketId p = ring_[q_head_];
  q_head_ = (q_head_ + 1) % ring_.size();
  --q_count_;
  return p;
}

bool Link::enqueue(PacketId pkt, Time now) {
  auto& pool = net_.pool();
  Packet& p = pool[pkt];
  ++stats_.enqueued;
  // Carrier down: the sender's port drops at once.
  if (imp_.down_at(now)) {
    ++stats_.lost_down;
    pool.free(pkt);
    return false;
  }
  const uint32_t bytes = frame_bytes(p);
  if (busy_ && q_bytes_ + bytes > cfg_.queue_bytes) {
    ++stats_.queue_drops;
    pool.free(pkt);
    return false;
  }
  // ECN (RFC 3168): mark CE on ECN-capable frames when the backlog is past the
  // threshold. The IP TOS is masked out of the ICRC (Annex A17.3.3), so
  // marking in the fabric keeps the packet valid.
  if (cfg_.ecn_threshold_bytes != 0 && q_bytes_ >= cfg_.ecn_threshold_bytes &&
      (p.meta.traffic_class & 3) != 0 && (p.meta.traffic_class & 3) != 3) {
    p.meta.traffic_class |= 3;
    ++stats_.ecn_marked;
  }
  push(pkt);
  q_bytes_ += bytes;
  stats_.max_queue_bytes = std::max(stats_.max_queue_bytes, q_bytes_);
  if (!busy_) start_next(now);
  return true;
}

void Link::start_next(Time now) {
  if (q_count_ == 0) {
    busy_ = false;
    return;
  }
  const PacketId p = pop();
  const Packet& pk = net_.pool()[p];
  q_bytes_ -= frame_bytes(pk);
  busy_ = true;
  net_.sim().schedule(now + serialization(wire_bytes(pk), cfg_.rate_bps), this, kTxDone, p);
}

void Link::corrupt(Packet& p, uint32_t bit) {
  // Corruptible bits skip BTH byte 4 (Resv8a), which the ICRC masks
  // (Annex A17.3.3): every flip we make must be one the receiver can detect.
  uint32_t byte = bit / 8;
  if (byte >= 4) ++byte;
  p.data[byte] ^= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
  p.corrupted = true;
}

void Link::on_event(uint32_t kind, uint64_t arg, Time now) {
  const auto pkt = static_cast<PacketId>(arg);
  auto& pool = net_.pool();
  if (kind == kTxDone) {
    Packet& p = pool[pkt];
    ++stats_.tx_frames;
    stats_.tx_wire_bytes += wire_bytes(p);
    const uint32_t bits = p.len > 1 ? (p.len - 1) * 8 : 0;
    const ImpairDecision d = imp_.decide(ordinal_++, now, bits);
    if (d.lost) {
      switch (d.cause) {
        case ImpairDecision::Cause::kRandom: ++stats_.lost_random; break;
        case ImpairDecision::Cause::kBurst: ++stats_.lost_burst; break;
        case ImpairDecision::Cause::kDown: ++stats_.lost_down; break;
        case ImpairDecision::Cause::kForced: ++stats_.lost_forced; break;
        case ImpairDecision::Cause::kNone: break;
      }
      pool.free(pkt);
    } else {
      if (d.corrupt) {
        corrupt(p, d.corrupt_bit);
        ++stats_.corrupted;
      }
      if (d.extra_delay.ps > 0) ++stats_.reordered;
      const Time arrive = now + cfg_.delay + d.extra_delay;
      net_.sim().schedule(arrive, this, kDeliver, pkt);
      if (d.duplicate) {
        const PacketId dup = pool.clone(pkt);
        pool[dup].duplicate = true;
        ++stats_.duplicated;
        net_.sim().schedule(arrive + imp_.config().duplicate_gap, this, kDeliver, dup);
      }
    }
    start_next(now);
    from_.on_link_ready(*this, now);
    return;
  }
  if (kind == kDeliver) {
    // Cut while the frame was on the wire.
    if (imp_.down_at(now)) {
      ++stats_.lost_down;
      pool.free(pkt);
      return;
    }
    ++stats_.delivered;
    if (FrameTap* tap = net_.tap()) tap->on_frame(*this, pool[pkt], now);
    to_.receive(pkt, *this, now);
  }
}

}  // namespace sroce::sim
