// DpdkDatapath: the hot path (dpdk_datapath.h). Set-up, shutdown and
// statistics are in dpdk_port.cc.
#include "dpdk_datapath.h"

#include <sched.h>
#include <sys/timerfd.h>

#include <algorithm>
#include <cstring>

#include <rte_cycles.h>

namespace sroce::dpdk {

using daemon::RxPacket;

namespace {

// How long a packet waits for its next hop's MAC before it is dropped. RC
// retransmits it later; the resolver usually answers within milliseconds.
constexpr uint64_t kParkSeconds = 3;

uint8_t* data_of(rte_mbuf* m) { return rte_pktmbuf_mtod(m, uint8_t*); }

}  // namespace

bool DpdkDatapath::is_local(uint32_t ip) const {
  for (uint32_t a : local_addrs_)
    if (a == ip) return true;
  return false;
}

bool DpdkDatapath::is_local6(const uint8_t* ip) const {
  for (const Gid& a : local_addrs6_)
    if (memcmp(a.raw, ip, 16) == 0) return true;
  return false;
}

// ------------------------------------------------------------------- receive

// A received frame the datapath does not hand on: counted under `why` and as a drop.
bool DpdkDatapath::drop_rx(Queue& q, rte_mbuf* m, uint64_t& why) {
  ++why;
  ++q.st.rx_dropped;
  rte_pktmbuf_free(m);
  return false;
}

bool DpdkDatapath::accept(Queue& q, rte_mbuf* m, RxPacket& out) {
  RxVerdict v = RxVerdict::kOk;
  const uint64_t csum = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
  if (m->nb_segs != 1) {
    ++rx_multi_seg_;  // larger than one mbuf: not a frame of ours (MTU)
    v = RxVerdict::kLength;
  } else if (csum == RTE_MBUF_F_RX_IP_CKSUM_BAD) {
    v = RxVerdict::kIpHeader;
  }
  if (v == RxVerdict::kOk && !local_addrs6_.empty() && rte_pktmbuf_data_len(m) >= kEthHeader &&
      data_of(m)[12] == (kEtherTypeIpv6 >> 8) && data_of(m)[13] == (kEtherTypeIpv6 & 0xff))
    return accept6(q, m, out);
  RxFrame f;
  if (v == RxVerdict::kOk)
    v = parse_frame({data_of(m), rte_pktmbuf_data_len(m)}, udp_port_, csum == RTE_MBUF_F_RX_IP_CKSUM_GOOD, f);
  if (v != RxVerdict::kOk) {
    return drop_rx(q, m, rx_verdicts_[static_cast<size_t>(v)]);
  }
  if (!is_local(f.dst)) {  // af_packet sees every frame of the interface
    return drop_rx(q, m, rx_not_local_);
  }
  out.payload = {reinterpret_cast<const std::byte*>(data_of(m) + f.payload_off), f.payload_len};
  out.meta = PacketMeta{};
  out.meta.src = Gid::from_ipv4(f.src);
  out.meta.dst = Gid::from_ipv4(f.dst);
  out.meta.src_port = f.sport;
  out.meta.dst_port = f.dport;
  out.meta.traffic_class = f.tos;  // ECN CE = 3 in the low bits (RFC 3168)
  out.meta.ipv4_id = f.ip_id;      // the ICRC is checked with the peer's own id (docs/wire.md)
  held_[held_n_++] = m;
  ++q.st.rx_packets;
  q.st.rx_bytes += f.payload_len;
  return true;
}

// RoCEv2 over IPv6 (Annex A17.4.5.1): the IPv6 header's traffic class, flow label and hop
// limit are the GRH fields the engine reports to a UD receiver.
bool DpdkDatapath::accept6(Queue& q, rte_mbuf* m, RxPacket& out) {
  RxFrame6 f;
  const RxVerdict v = parse_frame6({data_of(m), rte_pktmbuf_data_len(m)}, udp_port_, f);
  if (v != RxVerdict::kOk) {
    return drop_rx(q, m, rx_verdicts_[static_cast<size_t>(v)]);
  }
  if (!is_local6(f.dst)) {
    return drop_rx(q, m, rx_not_local_);
  }
  out.payload = {reinterpret_cast<const std::byte*>(data_of(m) + f.payload_off), f.payload_len};
  out.meta = PacketMeta{};
  memcpy(out.meta.src.raw, f.src, 16);
  memcpy(out.meta.dst.raw, f.dst, 16);
  out.meta.src_port = f.sport;
  out.meta.dst_port = f.dport;
  out.meta.traffic_class = f.tclass;
  out.meta.flow_label = f.flow_label;
  out.meta.hop_limit = f.hop_limit;
  held_[held_n_++] = m;
  ++q.st.rx_packets;
  q.st.rx_bytes += f.payload_len;
  return true;
}

size_t DpdkDatapath::rx_burst(std::span<RxPacket> out) {
  // The views handed out by the previous call end here.
  if (held_n_) {
    rte_pktmbuf_free_bulk(held_.data(), held_n_);
    held_n_ = 0;
  }
  // One call per loop pass. After idle_yield_passes passes that moved no
  // packet either way, give the CPU to whatever else is runnable on it (the
  // application, a peer daemon): on a core of its own sched_yield returns at
  // once; on a shared one, spinning through our slice would only delay the
  // packets we wait for.
  if (moved_) {
    idle_passes_ = 0;
  } else if (yield_after_ && ++idle_passes_ >= yield_after_) {
    idle_passes_ = 0;
    ++yields_;
    sched_yield();
  }
  moved_ = false;
  if (out.size() > held_.size()) out = out.first(held_.size());
  size_t n = 0;
  // Our own packets first: they were sent in the previous pass.
  uint32_t taken = 0;
  for (; taken < looped_n_ && n < out.size(); ++taken, ++n) {
    Looped& l = looped_[taken];
    out[n].payload = {reinterpret_cast<const std::byte*>(data_of(l.m) + kTxPayloadOff), l.len};
    out[n].meta = l.meta;
    held_[held_n_++] = l.m;
    rx_looped_bytes_ += l.len;
  }
  if (taken) {
    rx_looped_ += taken;
    std::move(looped_.begin() + taken, looped_.begin() + looped_n_, looped_.begin());
    looped_n_ -= taken;
  }
  for (uint16_t k = 0; k < nq_ && n < out.size(); ++k) {
    Queue& q = queues_[(rx_next_ + k) % nq_];
    while (q.stash_pos < q.stash_n && n < out.size()) n += accept(q, q.stash[q.stash_pos++], out[n]);
    if (q.stash_pos < q.stash_n) break;  // out is full
    q.stash_pos = q.stash_n = 0;
    if (n == out.size()) break;
    rte_mbuf* bufs[kMaxBurst];
    const auto want = static_cast<uint16_t>(std::min<size_t>(kMaxBurst, out.size() - n));
    const uint16_t got = rte_eth_rx_burst(port_, q.id, bufs, want);
    if (got == 0) continue;
    ++q.st.rx_bursts;
    for (uint16_t i = 0; i < got; ++i) n += accept(q, bufs[i], out[n]);
  }
  rx_next_ = static_cast<uint16_t>((rx_next_ + 1) % nq_);
  if (n) {
    sleep_us_ = std::min(kFirstSleepUs, cfg_.dpdk.sleep_poll_us);
    moved_ = true;
  }
  return n;
}

// ------------------------------------------------------------------ transmit

std::span<std::byte> DpdkDatapath::tx_buffer() {
  if (!tx_cur_) {
    if (pending_total_ >= pending_cap_ || looped_n_ >= kMaxLoopback) {
      flush_queues();  // make room if the PMD takes some now
      if (pending_total_ >= pending_cap_ || looped_n_ >= kMaxLoopback) {
        ++stats_.tx_full;
        return {};
      }
    }
    if (alloc_n_ == 0) {
      if (rte_pktmbuf_alloc_bulk(pool_, alloc_.data(), kAllocBatch) != 0) {
        // Pool empty (every mbuf in rings, in flight or held): not fatal,
        // the engine keeps the packet and the next pass tries again.
        ++tx_alloc_failures_;
        ++stats_.tx_full;
        return {};
      }
      alloc_n_ = kAllocBatch;
    }
    tx_cur_ = alloc_[--alloc_n_];
  }
  return {reinterpret_cast<std::byte*>(data_of(tx_cur_) + kTxPayloadOff), tx_room_};
}

void DpdkDatapath::count_lane(const Gid& src, uint16_t sport, uint32_t bytes) {
  int32_t i = -1;
  if (last_lane_ >= 0 && src == last_lane_src_ && sport == last_lane_sport_) {
    i = last_lane_;
  } else {
    const size_t mask = lane_hash_.size() - 1;
    uint32_t w[4];
    memcpy(w, src.raw, 16);
    size_t h = ((w[0] ^ w[1] ^ w[2] ^ w[3]) * 0x9E3779B1u ^ sport * 0x85EBCA6Bu) & mask;
    for (;; h = (h + 1) & mask) {
      int32_t x = lane_hash_[h];
      if (x >= 0 && lanes_[x].local == src && lanes_[x].port == sport) {
        i = x;
        break;
      }
      if (x < 0) {
        if (lane_count_ == lanes_.size()) return;  // table full: not counted per lane
        i = static_cast<int32_t>(lane_count_++);
        lanes_[i] = daemon::PortStats{};
        lanes_[i].port = sport;
        lanes_[i].local = src;
        lane_hash_[h] = i;
        break;
      }
    }
    last_lane_ = i;
    last_lane_src_ = src;
    last_lane_sport_ = sport;
  }
  ++lanes_[i].tx_packets;
  lanes_[i].tx_bytes += bytes;
  ++lanes_[i].tx_sends;
}

void DpdkDatapath::enqueue(uint16_t queue, rte_mbuf* m) {
  Queue& q = queues_[queue];
  q.pending[q.pending_n++] = m;
  ++pending_total_;
}

void DpdkDatapath::send_resolved(rte_mbuf* m, const MacAddr& mac, uint16_t queue) {
  memcpy(data_of(m), mac.b, 6);
  enqueue(queue, m);
}

void DpdkDatapath::tx_commit(size_t len, const PacketMeta& meta) {
  rte_mbuf* m = tx_cur_;
  if (!m || len == 0) return;  // nothing written: the mbuf stays for the next packet
  tx_cur_ = nullptr;
  moved_ = true;
  const bool v4 = meta.dst.is_ipv4();
  if (len > tx_room_ || v4 != meta.src.is_ipv4() || (!v4 && local_addrs6_.empty())) {
    ++stats_.tx_errors;  // mixed families, or IPv6 without an IPv6 address of ours
    rte_pktmbuf_free(m);
    return;
  }
  count_lane(meta.src, meta.src_port, static_cast<uint32_t>(len));
  if (v4 ? is_local(meta.dst.ipv4()) : is_local6(meta.dst.raw)) {
    // Another QP of this daemon: straight back to our receive side.
    looped_[looped_n_++] = Looped{m, static_cast<uint32_t>(len), meta};
    ++tx_looped_;
    return;
  }
  // The neighbour table's key: the IPv4 address, or an IPv6 address's handle.
  uint32_t dst = 0;
  if (v4) {
    dst = meta.dst.ipv4();
    TxAddr a;
    a.src_mac = src_mac_;
    a.src = meta.src.ipv4();
    a.dst = dst;
    a.sport = meta.src_port;
    a.dport = meta.dst_port;
    a.tos = meta.traffic_class;
    // The host's TTL, not the AV's hop limit: the UDP datapath's kernel
    // sockets send with the default TTL too, so both datapaths put the same
    // wire on a routed fabric. (Unchanged programs such as ibv_rc_pingpong set
    // hop_limit 1, which would die at the first router.)
    a.ttl = kHostTtl;
    // The engine wrote behind IPv6-sized room: the IPv4 frame starts 20 bytes in.
    m->data_off = static_cast<uint16_t>(m->data_off + (kFrameHeaders6 - kFrameHeaders));
    write_headers(data_of(m), a, static_cast<uint16_t>(len), ip_csum_offload_);
    m->data_len = static_cast<uint16_t>(kFrameHeaders + len);
    m->pkt_len = m->data_len;
    if (ip_csum_offload_) {
      m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
      m->l2_len = kEthHeader;
      m->l3_len = kIpv4Header;
    }
  } else {
    dst = neigh_->handle6(meta.dst.raw);
    TxAddr6 a;
    a.src_mac = src_mac_;
    memcpy(a.src, meta.src.raw, 16);
    memcpy(a.dst, meta.dst.raw, 16);
    a.sport = meta.src_port;
    a.dport = meta.dst_port;
    a.tclass = meta.traffic_class;
    // The AV's label, else one per (QP, lane), as the UDP datapath does (docs/sroced.md).
    a.flow_label = meta.flow_label & 0xfffff;
    if (a.flow_label == 0 && len >= 8) {
      const uint8_t* b = data_of(m) + kTxPayloadOff;
      a.flow_label = daemon::derive_flow_label((uint32_t{b[5]} << 16) | (uint32_t{b[6]} << 8) | b[7], meta.src_port);
    }
    a.hop_limit = kHostTtl;  // as IPv4's TTL, above
    write_headers6(data_of(m), a, static_cast<uint16_t>(len));
    m->data_len = static_cast<uint16_t>(kFrameHeaders6 + len);
    m->pkt_len = m->data_len;
  }
  // One queue per lane (source port), so a lane's packets stay in order.
  const auto queue = static_cast<uint16_t>(nq_ == 1 ? 0 : meta.src_port % nq_);
  if (parked_n_) retry_parked();  // earlier packets to a destination go first
  // tx_buffer() checked for room before the parked packets took theirs: the
  // queues hold pending_cap_ packets and no more (else park this one too).
  if (pending_total_ >= pending_cap_) flush_queues();
  MacAddr mac;
  if (pending_total_ < pending_cap_ && neigh_->lookup(dst, mac)) {
    send_resolved(m, mac, queue);
    return;
  }
  if (parked_n_ == kMaxParked) {
    ++tx_no_neighbour_;
    ++stats_.tx_errors;
    rte_pktmbuf_free(m);
    return;
  }
  parked_[parked_n_++] = Parked{m, dst, rte_rdtsc(), queue};
  ++tx_parked_;
}

bool DpdkDatapath::retry_parked() {
  if (parked_n_ == 0) return false;
  const uint64_t now = rte_rdtsc();
  uint32_t keep = 0;
  bool moved = false;
  for (uint32_t i = 0; i < parked_n_; ++i) {
    Parked& p = parked_[i];
    MacAddr mac;
    if (pending_total_ < pending_cap_ && neigh_->lookup(p.dst, mac)) {
      send_resolved(p.m, mac, p.queue);
      moved = true;
    } else if (now - p.since > kParkSeconds * tsc_hz_) {
      ++tx_no_neighbour_;
      ++stats_.tx_errors;
      rte_pktmbuf_free(p.m);
      moved = true;
    } else {
      parked_[keep++] = p;  // in order
    }
  }
  parked_n_ = keep;
  return moved;
}

bool DpdkDatapath::flush_queues() {
  bool moved = false;
  for (Queue& q : queues_) {
    if (q.pending_n == 0) continue;
    // The PMD may free what it took before returning: count bytes first.
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < q.pending_n; ++i) bytes += q.pending[i]->pkt_len;
    const uint16_t n = static_cast<uint16_t>(std::min<uint32_t>(q.pending_n, UINT16_MAX));
    const uint16_t sent = rte_eth_tx_burst(port_, q.id, q.pending.data(), n);
    if (sent == 0) {
      ++q.st.tx_short;
      continue;
    }
    moved = true;
    uint64_t unsent_bytes = 0;
    for (uint32_t i = sent; i < q.pending_n; ++i) unsent_bytes += q.pending[i]->pkt_len;
    ++q.st.tx_bursts;
    q.st.tx_packets += sent;
    q.st.tx_bytes += bytes - unsent_bytes;
    if (sent < q.pending_n) {
      // Ring full: the rest waits, in order, for the next flush.
      ++q.st.tx_short;
      std::move(q.pending.begin() + sent, q.pending.begin() + q.pending_n, q.pending.begin());
    }
    q.pending_n -= sent;
    pending_total_ -= sent;
  }
  return moved;
}

void DpdkDatapath::tx_flush() { flush_queues(); }

// ----------------------------------------------------------------- the loop

bool DpdkDatapath::poll() {
  bool moved = retry_parked();
  if (pending_total_) moved |= flush_queues();
  return moved;
}

bool DpdkDatapath::has_pending() {
  if (pending_total_ || looped_n_) return true;
  for (const Queue& q : queues_)
    if (q.stash_pos < q.stash_n) return true;
  // A busy core (the default): never sleep.
  if (cfg_.dpdk.sleep_poll_us == 0) return true;
  // One more look at the rings; what arrives is kept for rx_burst.
  for (Queue& q : queues_) {
    q.stash_n = rte_eth_rx_burst(port_, q.id, q.stash.data(), kMaxBurst);
    q.stash_pos = 0;
    if (q.stash_n) {
      sleep_us_ = std::min(kFirstSleepUs, cfg_.dpdk.sleep_poll_us);
      return true;
    }
  }
  // Nothing: the daemon sleeps on wait_fd(), which becomes readable when
  // the rings are to be looked at again: soon after traffic, then at
  // doubling intervals up to sleep_poll_us (an idle daemon wakes rarely, a
  // ping-pong's next packet waits little). Only on the way to sleep, never
  // while packets flow.
  itimerspec its{};
  its.it_value.tv_sec = sleep_us_ / 1'000'000;
  its.it_value.tv_nsec = static_cast<long>(sleep_us_ % 1'000'000) * 1000;
  timerfd_settime(timer_fd_, 0, &its, nullptr);
  sleep_us_ = std::min(sleep_us_ * 2, cfg_.dpdk.sleep_poll_us);
  return false;
}

}  // namespace sroce::dpdk
