#include "sroce/sim/link.h"

#include <algorithm>
#include <cstring>

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
    : net_(net),
      from_(from),
      to_(to),
      rate_bps_(cfg.rate_bps),
      delay_(cfg.delay),
      queue_bytes_(cfg.queue_bytes),
      ecn_threshold_bytes_(cfg.ecn_threshold_bytes),
      id_(id),
      cfg_(cfg),
      imp_(sorted(cfg.impair), rng) {}

std::string Link::name() const { return from_.name() + "->" + to_.name(); }

namespace {
// Gid::is_ipv4 with two loads instead of twelve byte tests: every hop asks
// for a frame's size several times (queues, buffer, serialization, INT),
// and that loop was 17 % of the instructions of a 1024-host run
// (cachegrind, docs/sim.md "Scale").
bool v4_mapped(const Gid& g) {
  static constexpr uint8_t kMapped[4] = {0, 0, 0xff, 0xff};  // bytes 8..11 of ::ffff:a.b.c.d
  uint64_t lo;
  uint32_t mid;
  uint32_t want;
  std::memcpy(&lo, g.raw, 8);
  std::memcpy(&mid, g.raw + 8, 4);
  std::memcpy(&want, kMapped, 4);
  return lo == 0 && mid == want;
}
}  // namespace

uint32_t Link::frame_bytes(const Packet& p) {
  const uint32_t ip = v4_mapped(p.meta.dst) && v4_mapped(p.meta.src) ? 20 : 40;
  return kEthHeader + ip + kUdpHeader + p.len;
}

Duration Link::serialization(uint64_t bytes, uint64_t rate_bps) {
  if (rate_bps == 0) return Duration::picos(0);
  // A frame's bits x 10^12 fit in 64 bits (below 2^20 bytes and 2^41 bit/s:
  // 8.4e18 + 2.2e12 < 2^64), and a 64-bit division is one instruction where
  // the 128-bit one is a call (__divti3, 1 % of a 1024-host run's
  // instructions). Same result either way.
  if (bytes < (uint64_t{1} << 20) && rate_bps < (uint64_t{1} << 41))
    return Duration::picos(static_cast<int64_t>((bytes * 8 * 1'000'000'000'000 + rate_bps - 1) / rate_bps));
  const __int128 bits = static_cast<__int128>(bytes) * 8;
  const __int128 ps = (bits * 1'000'000'000'000 + rate_bps - 1) / rate_bps;
  return Duration::picos(static_cast<int64_t>(ps));
}

// The ring's size is a power of two (16, doubled), so an index wraps with a
// mask: a division per push and pop was a visible share of a large run.
void Link::Fifo::push(PacketId p) {
  if (count_ == mask_ + 1) {
    const uint32_t size = 2 * (mask_ + 1);
    std::unique_ptr<PacketId[]> bigger(new PacketId[size]);
    for (uint32_t i = 0; i < count_; ++i) bigger[i] = ring_[(head_ + i) & mask_];
    ring_ = std::move(bigger);
    mask_ = size - 1;
    head_ = 0;
  }
  ring_[(head_ + count_) & mask_] = p;
  ++count_;
}

PacketId Link::Fifo::pop() {
  const PacketId p = ring_[head_];
  head_ = (head_ + 1) & mask_;
  --count_;
  return p;
}

bool Link::enqueue(PacketId pkt, Time now) {
  auto& pool = net_.pool();
  Packet& p = pool[pkt];
  ++stats_.enqueued;
  // Carrier down: the sender's port drops at once.
  if (impaired() && imp_.down_at(now)) {
    ++stats_.lost_down;
    pool.free(pkt);
    return false;
  }
  if (policy_ != nullptr) {
    // The switch's buffer model decides (and may trim the frame first).
    const EgressPolicy::Admit a = policy_->admit(*this, p, now);
    if (a == EgressPolicy::Admit::kDrop) {
      ++stats_.queue_drops;
      pool.free(pkt);
      return false;
    }
    const uint32_t bytes = frame_bytes(p);
    p.priority = a == EgressPolicy::Admit::kPriority;
    if (p.priority) {
      pq_.push(pkt);
      pq_bytes_ += bytes;
    } else {
      q_.push(pkt);
      q_bytes_ += bytes;
    }
    stats_.max_queue_bytes = std::max(stats_.max_queue_bytes, q_bytes_);
    if (!busy_) start_next(now);
    return true;
  }
  const uint32_t bytes = frame_bytes(p);
  if ((busy_ || paused_) && q_bytes_ + bytes > queue_bytes_) {
    ++stats_.queue_drops;
    pool.free(pkt);
    return false;
  }
  // ECN (RFC 3168): mark CE on ECN-capable frames when the backlog is past the
  // threshold. The IP TOS is masked out of the ICRC (Annex A17.3.3), so
  // marking in the fabric keeps the packet valid.
  if (ecn_threshold_bytes_ != 0 && q_bytes_ >= ecn_threshold_bytes_ &&
      (p.meta.traffic_class & 3) != 0 && (p.meta.traffic_class & 3) != 3) {
    p.meta.traffic_class |= 3;
    ++stats_.ecn_marked;
  }
  q_.push(pkt);
  q_bytes_ += bytes;
  stats_.max_queue_bytes = std::max(stats_.max_queue_bytes, q_bytes_);
  if (!busy_) start_next(now);
  return true;
}

void Link::start_next(Time now) {
  busy_ = false;
  if (paused_ || (q_.empty() && pq_.empty())) return;
  // Strict priority: trimmed headers and control packets first (DCP).
  const bool prio = !pq_.empty();
  const PacketId p = prio ? pq_.pop() : q_.pop();
  Packet& pk = net_.pool()[p];
  (prio ? pq_bytes_ : q_bytes_) -= frame_bytes(pk);
  if (prio) ++stats_.prio_frames;
  if (policy_ != nullptr) policy_->dequeued(*this, pk, now);
  busy_ = true;
  net_.sim().schedule(now + serialization(wire_bytes(pk), rate_bps_), this, kTxDone, p, &pk);
}

void Link::signal_pfc(bool xoff, Time now) {
  // The PAUSE frame crosses the cable back to us; its own 64-byte
  // serialization on the reverse link is not modelled.
  net_.sim().schedule(now + delay_, this, xoff ? kPauseOn : kPauseOff);
}

void Link::set_paused(bool paused, Time now) {
  if (paused == paused_) return;
  paused_ = paused;
  if (paused) {
    ++stats_.pfc_pauses;
    paused_since_ = now;
    return;
  }
  stats_.paused_ps += static_cast<uint64_t>((now - paused_since_).ps);
  if (!busy_) start_next(now);
}

void Link::corrupt(Packet& p, uint32_t bit) {
  // Corruptible bits skip BTH byte 4 (Resv8a), which the ICRC masks
  // (Annex A17.3.3): every flip we make must be one the receiver can detect.
  uint32_t byte = bit / 8;
  if (byte >= 4) ++byte;
  // A bit of a payload the run does not carry (packet.h) flips nothing
  // anyone reads: the receiving engine neither keeps nor checks it.
  if (std::byte* b = p.byte_at(byte)) *b ^= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
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
    // Without impairments decide() draws nothing and decides nothing.
    const ImpairDecision d = impaired() ? imp_.decide(ordinal_, now, bits) : ImpairDecision{};
    ++ordinal_;
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
      const Time arrive = now + delay_ + d.extra_delay;
      net_.sim().schedule(arrive, this, kDeliver, pkt, &p);
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
  if (kind == kPauseOn || kind == kPauseOff) {
    set_paused(kind == kPauseOn, now);
    return;
  }
  if (kind == kDeliver) {
    // Cut while the frame was on the wire.
    if (impaired() && imp_.down_at(now)) {
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
