// Transmit scheduling and timers.
//
// poll_transmit serves two FIFO lists of QPs: QPs with responder output
// (ACK/NAK, READ responses, atomic ACKs) first, so that a busy requester
// never delays the acknowledgements a peer is waiting for, then QPs with
// requests to send. A QP that produced a packet goes to the tail of its list
// (round-robin); one that produced nothing leaves it until an event (post,
// ACK, timer) puts it back. Requests go in quanta: a QP keeps its turn for
// LossyConfig::train_bytes of packets (a lane train in lossy mode), so that
// many QPs still hand the datapath runs of one flow to pack into GSO sends.
//
// Timers are deadlines in a binary heap of QP slots. Moving a deadline later
// leaves the heap entry alone (the entry fires early, finds nothing due and
// re-inserts itself); moving it earlier sifts it up.
#include <algorithm>
#include <cstring>

#include "impl.h"
#include "proto/icrc.h"

namespace sroce {

using namespace eng;

void Engine::Impl::fill_meta(const Qp& qp, PacketMeta& meta) const {
  const AhAttr& a = qp.attr.ah_attr;
  meta.src = gids_[a.sgid_index < gids_.size() ? a.sgid_index : 0];
  meta.dst = a.dgid;
  meta.src_port = qp.src_port;
  meta.dst_port = SROCE_UDP_PORT;
  meta.traffic_class = a.traffic_class;
  meta.hop_limit = a.hop_limit;
  meta.flow_label = a.flow_label;
}

// Pad to 4 bytes (IBA 9.2: PadCnt) and append the ICRC (Annex A17.3.3),
// little-endian as rxe and RNICs put it on the wire.
// A lossy-mode trailer (SROCE_LEH_LEN bytes, proto/roce.h) goes after the pad,
// inside the ICRC. With `data_crc` (the payload's CRC, taken while it was
// gathered) the ICRC covers the headers, now final (AckReq, lane port, flags),
// and the tail, and takes the payload's part by combination: no second pass.
size_t Engine::Impl::finish_packet(uint8_t* p, size_t hdr_len, uint32_t payload_len,
                                   const PacketMeta& meta, const uint8_t* trailer,
                                   const uint32_t* data_crc) const {
  const uint32_t pad = (4 - (payload_len & 3)) & 3;
  uint8_t* e = p + hdr_len + payload_len;
  for (uint32_t i = 0; i < pad; ++i) *e++ = 0;
  if (trailer) {
    std::memcpy(e, trailer, SROCE_LEH_LEN);
    e += SROCE_LEH_LEN;
  }
  const size_t n = hdr_len + payload_len + pad + (trailer ? SROCE_LEH_LEN : 0);
  uint32_t crc = 0;
  if (!cfg_.icrc_offload) {
    sroce_icrc_addr a;
    std::memcpy(a.src_gid, meta.src.raw, 16);
    std::memcpy(a.dst_gid, meta.dst.raw, 16);
    a.src_port = meta.src_port;
    a.dst_port = meta.dst_port;
    crc = data_crc ? sroce_icrc_payload_fused(&a, p, hdr_len, *data_crc, payload_len, n)
                   : sroce_icrc_payload(&a, p, n);
  }
  e[0] = static_cast<uint8_t>(crc);
  e[1] = static_cast<uint8_t>(crc >> 8);
  e[2] = static_cast<uint8_t>(crc >> 16);
  e[3] = static_cast<uint8_t>(crc >> 24);
  return n + SROCE_ICRC_LEN;
}

// ------------------------------------------------------------ lists
void Engine::Impl::sched_req(Qp& qp, bool front) {
  if (qp.in_req_list ||
      (qp.sq_next == qp.sq_tail && qp.lossy.rtx_count == 0 && qp.lossy.rd_ask_n == 0) ||
      qp.rnr_wait)
    return;
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return;
  qp.in_req_list = true;
  if (front) {  // the QP keeps its turn (poll_transmit's quantum)
    qp.req_prev = kNone;
    qp.req_next = req_head_;
    if (req_head_ != kNone)
      qps_[req_head_].req_prev = qp.slot;
    else
      req_tail_ = qp.slot;
    req_head_ = qp.slot;
    return;
  }
  qp.req_next = kNone;
  qp.req_prev = req_tail_;
  if (req_tail_ != kNone)
    qps_[req_tail_].req_next = qp.slot;
  else
    req_head_ = qp.slot;
  req_tail_ = qp.slot;
}

void Engine::Impl::sched_resp(Qp& qp) {
  if (qp.in_resp_list) return;
  qp.in_resp_list = true;
  qp.resp_next = kNone;
  qp.resp_prev = resp_tail_;
  if (resp_tail_ != kNone)
    qps_[resp_tail_].resp_next = qp.slot;
  else
    resp_head_ = qp.slot;
  resp_tail_ = qp.slot;
}

namespace {

void unlink_req(Engine::Impl& e, Qp& qp) {
  if (!qp.in_req_list) return;
  if (qp.req_prev != kNone)
    e.qps_[qp.req_prev].req_next = qp.req_next;
  else
    e.req_head_ = qp.req_next;
  if (qp.req_next != kNone)
    e.qps_[qp.req_next].req_prev = qp.req_prev;
  else
    e.req_tail_ = qp.req_prev;
  qp.in_req_list = false;
  qp.req_prev = qp.req_next = kNone;
}

void unlink_resp(Engine::Impl& e, Qp& qp) {
  if (!qp.in_resp_list) return;
  if (qp.resp_prev != kNone)
    e.qps_[qp.resp_prev].resp_next = qp.resp_next;
  else
    e.resp_head_ = qp.resp_next;
  if (qp.resp_next != kNone)
    e.qps_[qp.resp_next].resp_prev = qp.resp_prev;
  else
    e.resp_tail_ = qp.resp_prev;
  qp.in_resp_list = false;
  qp.resp_prev = qp.resp_next = kNone;
}

}  // namespace

void Engine::Impl::unsched(Qp& qp) {
  unlink_req(*this, qp);
  unlink_resp(*this, qp);
}

std::optional<TxPacket> Engine::Impl::poll_transmit(std::span<std::byte> out, Time now) {
  last_now_ = now;
  if (out.size() < mtu_max_ + 64 + (cc_.intw ? SROCE_INT_SHIM_LEN : 0)) return std::nullopt;
  auto* buf = reinterpret_cast<uint8_t*>(out.data());
  TxPacket tx;
  tx.send_at = now;
  while (resp_head_ != kNone) {
    Qp& qp = qps_[resp_head_];
    unlink_resp(*this, qp);
    size_t n = cc_build_cnp(*this, qp, buf, tx.meta);  // congestion.h: a CNP first
    if (n == 0) {
      n = resp_build(qp, buf, tx.meta);
      if (n != 0) n = cc_on_response_built(*this, qp, buf, n, tx.meta);  // INT echo
    }
    if (n == 0) continue;
    if (qp.resp_has_output() || (qp.ack_pending && qp.ack_final)) sched_resp(qp);
    ++stats_.tx_packets;
    ++qp.stats.tx_packets;
    qp.stats.tx_bytes += n;
    tx.len = n;
    return tx;
  }
  while (req_head_ != kNone) {
    Qp& qp = qps_[req_head_];
    unlink_req(*this, qp);
    if (qp.slot != req_burst_qp_) {
      // Round robin in quanta of LossyConfig::train_bytes (at least one
      // packet): a QP's consecutive packets are what the datapath packs into
      // one GSO send (one lane's train in lossy mode), however many QPs send.
      req_burst_qp_ = qp.slot;
      req_burst_left_ = std::max<uint32_t>(cfg_.lossy.train_bytes / (qp.mtu ? qp.mtu : 1), 1);
    }
    size_t n = 0;
    if (cc_may_send(*this, qp, now)) n = req_build(qp, buf, tx.meta, now);  // cc: window or pacing
    if (n == 0) {
      req_burst_qp_ = kNone;  // its turn ends; it is back in the list when it has work
      continue;
    }
    n = cc_add_shim(*this, qp, buf, n, out.size());  // INT shim (congestion.h)
    const bool keep = --req_burst_left_ > 0;
    if (!keep) req_burst_qp_ = kNone;
    sched_req(qp, keep);  // round-robin: back to the tail (or the head, within its quantum) while it has work
    ++stats_.tx_packets;
    ++qp.stats.tx_packets;
    qp.stats.tx_bytes += n;
    tx.len = n;
    return tx;
  }
  return std::nullopt;
}

// ------------------------------------------------------------ timers
Time Engine::Impl::qp_deadline(const Qp& qp) const {
  Time t = qp.retx_deadline;
  if (qp.rnr_wait && qp.rnr_deadline < t) t = qp.rnr_deadline;
  if (qp.lossy.gap_deadline < t) t = qp.lossy.gap_deadline;
  if (qp.lossy.rd_deadline < t) t = qp.lossy.rd_deadline;
  if (const Time c = cc_deadline(qp); c < t) t = c;
  return t;
}

namespace {

void heap_swap(Engine::Impl& e, uint32_t i, uint32_t j) {
  std::swap(e.heap_[i], e.heap_[j]);
  e.qps_[e.heap_[i]].heap_pos = i;
  e.qps_[e.heap_[j]].heap_pos = j;
}

void sift_up(Engine::Impl& e, uint32_t i) {
  while (i > 0) {
    const uint32_t p = (i - 1) / 2;
    if (!(e.heap_key_[e.heap_[i]] < e.heap_key_[e.heap_[p]])) break;
    heap_swap(e, i, p);
    i = p;
  }
}

void sift_down(Engine::Impl& e, uint32_t i) {
  const auto n = static_cast<uint32_t>(e.heap_.size());
  for (;;) {
    const uint32_t l = 2 * i + 1, r = l + 1;
    uint32_t m = i;
    if (l < n && e.heap_key_[e.heap_[l]] < e.heap_key_[e.heap_[m]]) m = l;
    if (r < n && e.heap_key_[e.heap_[r]] < e.heap_key_[e.heap_[m]]) m = r;
    if (m == i) return;
    heap_swap(e, i, m);
    i = m;
  }
}

void heap_push(Engine::Impl& e, Qp& qp, Time t) {
  e.heap_key_[qp.slot] = t;
  qp.heap_pos = static_cast<uint32_t>(e.heap_.size());
  e.heap_.push_back(qp.slot);  // capacity reserved for max_qps: no allocation
  sift_up(e, qp.heap_pos);
}

}  // namespace

void Engine::Impl::timer_update(Qp& qp) {
  const Time d = qp_deadline(qp);
  if (d == Time::never()) return;  // lazily removed when it fires
  if (qp.heap_pos == kNone) return heap_push(*this, qp, d);
  if (d < heap_key_[qp.slot]) {
    heap_key_[qp.slot] = d;
    sift_up(*this, qp.heap_pos);
  }
}

void Engine::Impl::timer_remove(Qp& qp) {
  if (qp.heap_pos == kNone) return;
  const uint32_t i = qp.heap_pos;
  const uint32_t last = static_cast<uint32_t>(heap_.size()) - 1;
  if (i != last) heap_swap(*this, i, last);
  heap_.pop_back();
  qp.heap_pos = kNone;
  heap_key_[qp.slot] = Time::never();
  if (i < heap_.size()) {
    sift_down(*this, i);
    sift_up(*this, i);
  }
}

void Engine::Impl::on_timer(Time now) {
  last_now_ = now;
  while (!heap_.empty() && heap_key_[heap_[0]] <= now) {
    Qp& qp = qps_[heap_[0]];
    timer_remove(qp);
    if (qp.lossy.gap_deadline <= now) lossy_rx_timer(qp, now);
    if (qp.lossy.rd_deadline <= now) lossy_read_timer(qp, now);
    if (qp_deadline(qp) <= now) comp_on_timer(qp, now);
    if (cc_deadline(qp) <= now) cc_on_timer(*this, qp, now);
    timer_update(qp);
  }
}

Time Engine::Impl::next_deadline() const {
  Time t = heap_.empty() ? Time::never() : heap_key_[heap_[0]];
  if ((resp_head_ != kNone || req_head_ != kNone) && last_now_ < t) t = last_now_;
  return t;
}

}  // namespace sroce
