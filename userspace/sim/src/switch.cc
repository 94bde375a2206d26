#include "sroce/sim/switch.h"

#include <algorithm>
#include <cstring>

#include "proto/roce.h"
#include "sroce/sim/network.h"

namespace sroce::sim {

size_t GidHash::operator()(const Gid& g) const {
  uint64_t a, b;
  std::memcpy(&a, g.raw, 8);
  std::memcpy(&b, g.raw + 8, 8);
  return static_cast<size_t>(Rng::mix(a ^ Rng::mix(b)));
}

uint64_t ecmp_hash(const PacketMeta& m, uint64_t seed) {
  uint64_t s0, s1, d0, d1;
  std::memcpy(&s0, m.src.raw, 8);
  std::memcpy(&s1, m.src.raw + 8, 8);
  std::memcpy(&d0, m.dst.raw, 8);
  std::memcpy(&d1, m.dst.raw + 8, 8);
  constexpr uint64_t kProtoUdp = 17;
  uint64_t h = Rng::mix(seed ^ s0);
  h = Rng::mix(h ^ s1);
  h = Rng::mix(h ^ d0);
  h = Rng::mix(h ^ d1);
  h = Rng::mix(h ^ (kProtoUdp << 32 | uint64_t{m.src_port} << 16 | m.dst_port));
  return h;
}

namespace {
// PacketMeta::trimmed is the engine's contract for "the fabric cut this packet"
// (lossy mode). Set it when the engine has it; until then the slot's own flag
// (Packet::trimmed) is the only record.
template <typename M>
void mark_meta_trimmed(M& m) {
  if constexpr (requires { m.trimmed; }) m.trimmed = true;
}
}  // namespace

Switch::Switch(Network& net, NodeId id, std::string name, uint64_t ecmp_seed)
    : Node(net, id, std::move(name), NodeKind::kSwitch, Gid{}),
      seed_(ecmp_seed),
      // Own stream for RED draws: (run seed, node id) only, so marking on one
      // switch never shifts any link's impairment draws.
      rng_(Rng::mix(net.sim().seed() ^ Rng::mix(0x5717c400ull + id))) {}

void Switch::configure(const SwitchConfig& cfg) {
  cfg_ = cfg;
  for (Link* l : out_links()) attach_port(*l);
}

void Switch::attach_port(Link& out) {
  uint32_t index = 0;
  for (const Link* l : out_links()) {
    if (l == &out) break;
    ++index;
  }
  out.set_policy(cfg_.mmu ? this : nullptr, index);
  // Ingress state is indexed by link id: size it now (Network::connect makes
  // the reverse link next to this one), not on the packet path.
  const size_t need = static_cast<size_t>(out.id()) + 2;
  if (ingress_.size() < need) ingress_.resize(need);
}

void Switch::set_routes(const std::vector<std::vector<Link*>>& hop_sets, std::vector<uint32_t> by_dest) {
  sets_.clear();
  hops_.clear();
  for (const auto& set : hop_sets) {
    sets_.push_back(HopSet{static_cast<uint32_t>(hops_.size()), static_cast<uint32_t>(set.size())});
    hops_.insert(hops_.end(), set.begin(), set.end());
  }
  route_of_ = std::move(by_dest);
}

std::span<Link* const> Switch::next_hops(const Gid& dst) const {
  return next_hops(net_.dest_of(dst));
}

Link* Switch::select(const PacketMeta& m, uint32_t dest) const {
  const auto hops = next_hops(dest == kNoDest ? net_.dest_of(m.dst) : dest);
  if (hops.empty()) return nullptr;
  if (hops.size() == 1) return hops[0];
  const uint64_t h = ecmp_hash(m, seed_);
  // A power-of-two set (a leaf's uplinks, usually) takes the low bits: the
  // same choice as the modulo, without a division.
  const size_t n = hops.size();
  return hops[(n & (n - 1)) == 0 ? h & (n - 1) : h % n];
}

void Switch::receive(PacketId pkt, Link& from, Time now) {
  auto& pool = net_.pool();
  Packet& p = pool[pkt];
  // IP TTL / hop limit: a router decrements it (masked in the ICRC).
  if (p.meta.hop_limit <= 1) {
    ++stats_.ttl_expired;
    pool.free(pkt);
    return;
  }
  --p.meta.hop_limit;
  if (p.dest == kNoDest) p.dest = net_.dest_of(p.meta.dst);
  Link* out = select(p.meta, p.dest);
  if (out == nullptr) {
    ++stats_.no_route;
    pool.free(pkt);
    return;
  }
  ++stats_.forwarded;
  p.ingress = from.id();
  if (!out->enqueue(pkt, now)) ++stats_.egress_drops;
}

namespace {
// Bytes of the INT shim in front of the BTH (proto/int.h), 0 if none.
uint32_t shim_bytes(const Packet& p) {
  sroce_int_shim s{};
  if (!sroce_int_present(p.bytes(), p.head) || sroce_int_shim_parse(p.bytes(), p.head, &s) != SROCE_INT_OK)
    return 0;
  return static_cast<uint32_t>(sroce_int_shim_bytes(&s));
}
}  // namespace

bool Switch::is_control(const Packet& p) {
  if (p.len == 0) return true;
  const uint32_t off = shim_bytes(p);
  const struct sroce_opinfo* info = sroce_opinfo(p.bytes()[off]);
  return info->name == nullptr || (info->flags & SROCE_HAS_PAYLOAD) == 0;
}

bool Switch::trim_packet(Packet& p, uint32_t keep_bytes) {
  if (p.len == 0) return false;
  const uint32_t off = shim_bytes(p);
  const struct sroce_opinfo* info = sroce_opinfo(p.bytes()[off]);
  if (info->name == nullptr || (info->flags & SROCE_HAS_PAYLOAD) == 0) return false;
  // BTH and every extension header the opcode carries survive (RETH: the
  // receiver learns the address and length of what it lost), behind the
  // INT shim if there is one.
  const uint32_t keep = off + std::max<uint32_t>(info->hdr_len, keep_bytes);
  if (p.len <= keep) return false;
  p.len = keep;
  // What is left of a payload the run does not carry stays uncarried.
  p.head = std::min(p.head, keep);
  p.tail = 0;
  p.trimmed = true;
  mark_meta_trimmed(p.meta);
  return true;
}

EgressPolicy::Admit Switch::admit_priority(Link& link, const Packet& p) {
  if (link.prio_queue_bytes() + Link::frame_bytes(p) > cfg_.prio_queue_bytes) return Admit::kDrop;
  return Admit::kPriority;
}

EgressPolicy::Admit Switch::admit(Link& link, Packet& p, Time) {
  if (p.trimmed || (cfg_.control_priority && is_control(p))) {
    const Admit a = admit_priority(link, p);
    if (a == Admit::kDrop) ++stats_.egress_drops;
    return a;
  }
  const uint64_t bytes = Link::frame_bytes(p);
  const uint64_t q = link.data_queue_bytes();
  qlen_.add(q);
  const uint64_t used = stats_.buffer_bytes;
  const uint64_t free_bytes = cfg_.buffer_bytes > used ? cfg_.buffer_bytes - used : 0;
  bool fits = bytes <= free_bytes;
  // Dynamic threshold: the queue may grow while below alpha x free buffer.
  // A lossless (PFC) class is admitted on buffer space alone.
  if (fits && !cfg_.pfc.enabled)
    fits = static_cast<double>(q + bytes) <= cfg_.dt_alpha * static_cast<double>(free_bytes);
  if (!fits) {
    if (cfg_.trim && trim_packet(p, cfg_.trim_keep_bytes)) {
      ++stats_.trimmed;
      ++link.stats_mut().trimmed;
      return admit_priority(link, p);
    }
    return Admit::kDrop;
  }
  stats_.buffer_bytes += bytes;
  stats_.max_buffer_bytes = std::max(stats_.max_buffer_bytes, stats_.buffer_bytes);
  if (cfg_.sb_flag_fraction > 0 &&
      static_cast<double>(stats_.buffer_bytes) >
          cfg_.sb_flag_fraction * static_cast<double>(cfg_.buffer_bytes)) {
    p.sb_flag = true;
    ++stats_.sb_flagged;
  }
  if (p.ingress < ingress_.size()) {
    Ingress& in = ingress_[p.ingress];
    in.bytes += bytes;
    if (cfg_.pfc.enabled && !in.paused && in.bytes > cfg_.pfc.xoff_bytes) {
      in.paused = true;
      ++stats_.pfc_xoff;
      net_.links()[p.ingress]->signal_pfc(true, net_.sim().now());
    }
  }
  return Admit::kQueue;
}

void Switch::dequeued(Link& link, Packet& p, Time now) {
  if (p.priority) return;  // trimmed headers and control: outside the shared buffer
  const uint64_t bytes = Link::frame_bytes(p);
  stats_.buffer_bytes -= std::min(stats_.buffer_bytes, bytes);
  if (p.ingress < ingress_.size()) {
    Ingress& in = ingress_[p.ingress];
    in.bytes -= std::min(in.bytes, bytes);
    if (in.paused && in.bytes <= cfg_.pfc.xon_bytes) {
      in.paused = false;
      ++stats_.pfc_xon;
      net_.links()[p.ingress]->signal_pfc(false, now);
    }
  }
  // RED on the queue this packet leaves behind (marking at dequeue: the mark
  // describes the queue now, not one queueing delay ago). CE only on ECT
  // packets (RFC 3168); the ICRC masks the TOS byte (Annex A17.3.3).
  const uint64_t q = link.data_queue_bytes();
  const uint8_t ecn = p.meta.traffic_class & 3;
  if (cfg_.ecn.enabled && (ecn == 1 || ecn == 2) && q > cfg_.ecn.kmin_bytes &&
      rng_.chance(cfg_.ecn.probability(q))) {
    p.meta.traffic_class |= 3;
    ++stats_.ecn_marked;
    ++link.stats_mut().ecn_marked;
  }
  // INT (proto/int.h): push this egress port's record on the packet's shim,
  // if it has one (an engine whose peer agreed to INT sent it); a packet
  // without a shim is left as it is.
  if (cfg_.int_stamp && sroce_int_present(p.bytes(), p.head)) {
    sroce_int_hop h{};
    h.node_port = id() << 16 | link.port_index();
    h.flags = cfg_.sb_flag_fraction > 0 &&
                      static_cast<double>(stats_.buffer_bytes) >
                          cfg_.sb_flag_fraction * static_cast<double>(cfg_.buffer_bytes)
                  ? SROCE_INT_HOP_F_SB
                  : 0;
    h.link_mbps = static_cast<uint32_t>(std::min<uint64_t>(link.rate_bps() / 1'000'000, 0xffffff));
    h.qlen = static_cast<uint32_t>(std::min<uint64_t>(q, UINT32_MAX));
    h.ts_ps = static_cast<uint64_t>(now.ps);
    // The record counts itself: the link sends the longer packet.
    h.tx_bytes = link.stats().tx_wire_bytes + Link::wire_bytes(p) + SROCE_INT_HOP_LEN;
    // The record goes in after the shim: only the held front bytes move. The
    // room is that of a full-size slot whatever the packet holds (an inline
    // one grows into a body), so what is pushed does not depend on it.
    const bool room = p.len + SROCE_INT_HOP_LEN <= kMaxPacketBytes;
    if (room && p.head + SROCE_INT_HOP_LEN > p.capacity()) net_.pool().grow(p);
    size_t head = p.head;
    if (sroce_int_push(p.bytes(), &head, room ? p.capacity() : p.head, &h) == 1) {
      p.len += static_cast<uint32_t>(head - p.head);
      p.head = static_cast<uint32_t>(head);
      ++stats_.int_stamped;
    }
  }
}

}  // namespace sroce::sim
