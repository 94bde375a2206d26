// UDP datapath over io_uring: batched receives with GRO, GSO-packed sends.
#include "udp_datapath.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/in6.h>  // after netinet/in.h: IPV6_FLOWINFO_SEND
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "copy.h"
#include "proto/int.h"

// Zero-copy usage reporting (Linux 6.2 uapi; liburing 2.3's copy of the header predates it).
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

namespace sroce::daemon {

namespace {

constexpr uint64_t kRxTag = 1ull << 32;
constexpr uint64_t kTxTag = 2ull << 32;

Error sys_error(const std::string& what) {
  int e = errno;
  return Error{e, fmt::format("{}: {}", what, strerror(e))};
}

void set_buf(int fd, int force_opt, int opt, uint32_t bytes) {
  int v = static_cast<int>(bytes);
  // The *FORCE variants pass net.core.[rw]mem_max when we are privileged.
  if (setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof v) != 0) setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v);
}

// Binds the well-known port, waiting up to 2 s while it is taken. A daemon that was killed
// leaves its sockets registered with its io_uring, and the kernel releases those only when
// the ring's deferred teardown runs, after the process has been reaped: a restart at once
// (systemd's Restart=, a test) can find the port still bound for a moment. Another sroced
// that really holds the port still gets the error, 2 s later.
int bind_when_free(int fd, const sockaddr* a, socklen_t len) {
  for (int i = 0;; ++i) {
    if (bind(fd, a, len) == 0) return 0;
    if (errno != EADDRINUSE || i == 40) return -1;
    usleep(50'000);
  }
}

size_t hash_port(const Gid& src, uint16_t sport, size_t mask) {
  uint64_t a, b;
  memcpy(&a, src.raw, 8);
  memcpy(&b, src.raw + 8, 8);
  uint64_t k = ((b << 16) ^ sport ^ (a * 0xbf58476d1ce4e5b9ull));
  k *= 0x9e3779b97f4a7c15ull;
  return static_cast<size_t>(k >> 32) & mask;
}

in6_addr to_in6(const Gid& g) {
  in6_addr a;
  memcpy(&a, g.raw, 16);
  return a;
}

}  // namespace

UdpDatapath::UdpDatapath(const Config::Datapath& cfg) : cfg_(cfg) {}

UdpDatapath::~UdpDatapath() {
  if (ring_ok_) io_uring_queue_exit(&ring_);
  for (size_t i = 0; i < port_count_; ++i)
    if (port_fd_[i] >= 0 && port_fd_[i] != rx_fd_ && port_fd_[i] != rx6_fd_) close(port_fd_[i]);
  if (rx_fd_ >= 0) close(rx_fd_);
  if (rx6_fd_ >= 0) close(rx6_fd_);
  if (event_fd_ >= 0) close(event_fd_);
}

Result<std::unique_ptr<UdpDatapath>> UdpDatapath::create(const Config::Datapath& cfg,
                                                         std::span<const uint32_t> local_addrs,
                                                         std::span<const Gid> local_addrs6) {
  std::unique_ptr<UdpDatapath> dp(new UdpDatapath(cfg));
  auto r = dp->init(local_addrs, local_addrs6);
  if (!r) return r.error();
  return dp;
}

// The IPv6 receive socket: RoCEv2 over IPv6 (Annex A17.4.5.1: the GRH is the IPv6 header).
// V6ONLY, so IPv4 keeps its own socket and its IPv4-only options (DF, identification 0).
// The traffic class (ECN), destination, hop limit and flow label of each datagram come as
// cmsgs, so the engine sees the GRH fields a UD receive reports.
Result<void> UdpDatapath::open_rx6() {
  rx6_fd_ = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (rx6_fd_ < 0) return sys_error("socket(AF_INET6, SOCK_DGRAM)");
  int one = 1;
  if (setsockopt(rx6_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0)
    return sys_error("setsockopt(IPV6_V6ONLY)");
  if (cfg_.gro && setsockopt(rx6_fd_, IPPROTO_UDP, UDP_GRO, &one, sizeof one) != 0)
    return sys_error("setsockopt(UDP_GRO) on IPv6");
  for (int opt : {IPV6_RECVTCLASS, IPV6_RECVPKTINFO, IPV6_RECVHOPLIMIT, IPV6_FLOWINFO, IPV6_FLOWINFO_SEND})
    if (setsockopt(rx6_fd_, IPPROTO_IPV6, opt, &one, sizeof one) != 0)
      return sys_error(fmt::format("setsockopt(IPPROTO_IPV6, {})", opt));
  int pmtu = IPV6_PMTUDISC_DO;
  if (setsockopt(rx6_fd_, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0)
    return sys_error("setsockopt(IPV6_MTU_DISCOVER)");
  // Linux rxe sends RoCEv2 over IPv6 with a zero UDP checksum (docs/interop.md), which
  // the kernel drops unless the socket says so (RFC 6936); the ICRC covers the payload.
  if (setsockopt(rx6_fd_, IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof one) != 0)
    return sys_error("setsockopt(UDP_NO_CHECK6_RX)");
  set_buf(rx6_fd_, SO_RCVBUFFORCE, SO_RCVBUF, cfg_.rcvbuf);
  set_buf(rx6_fd_, SO_SNDBUFFORCE, SO_SNDBUF, cfg_.sndbuf);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_port = htons(cfg_.port);
  any.sin6_addr = in6addr_any;
  if (bind_when_free(rx6_fd_, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0)
    return sys_error(fmt::format("bind([::]:{}) (datapath.port)", cfg_.port));
  return {};
}

Result<void> UdpDatapath::init(std::span<const uint32_t> local_addrs, std::span<const Gid> local_addrs6) {
  local_addrs_.assign(local_addrs.begin(), local_addrs.end());
  local_addrs6_.assign(local_addrs6.begin(), local_addrs6.end());

  // Blocking on purpose: io_uring then waits for socket-buffer space
  // instead of failing a send with EAGAIN (see the header).
  rx_fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (rx_fd_ < 0) return sys_error("socket(AF_INET, SOCK_DGRAM)");
  int one = 1;
  if (cfg_.gro && setsockopt(rx_fd_, IPPROTO_UDP, UDP_GRO, &one, sizeof one) != 0)
    return sys_error("setsockopt(UDP_GRO)");
  if (setsockopt(rx_fd_, IPPROTO_IP, IP_RECVTOS, &one, sizeof one) != 0) return sys_error("setsockopt(IP_RECVTOS)");
  if (setsockopt(rx_fd_, IPPROTO_IP, IP_PKTINFO, &one, sizeof one) != 0) return sys_error("setsockopt(IP_PKTINFO)");
  int pmtu = IP_PMTUDISC_DO;
  if (setsockopt(rx_fd_, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0)
    return sys_error("setsockopt(IP_MTU_DISCOVER)");
  set_buf(rx_fd_, SO_RCVBUFFORCE, SO_RCVBUF, cfg_.rcvbuf);
  set_buf(rx_fd_, SO_SNDBUFFORCE, SO_SNDBUF, cfg_.sndbuf);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_port = htons(cfg_.port);
  if (bind_when_free(rx_fd_, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0)
    return sys_error(fmt::format("bind(0.0.0.0:{}) (datapath.port; is another sroced running?)", cfg_.port));
  if (!local_addrs6_.empty()) {
    auto r6 = open_rx6();
    if (!r6) return r6;
  }

  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) return sys_error("eventfd");
  int rc = io_uring_queue_init(cfg_.uring_entries, &ring_, 0);
  if (rc < 0) {
    errno = -rc;
    return sys_error("io_uring_queue_init");
  }
  ring_ok_ = true;
  rc = io_uring_register_eventfd(&ring_, event_fd_);
  if (rc < 0) {
    errno = -rc;
    return sys_error("io_uring_register_eventfd");
  }

  // Ports table.
  size_t cap = 1;
  while (cap < 2u * cfg_.max_tx_ports) cap <<= 1;
  port_hash_.assign(cap, -1);
  // One more slot past the table: the fallback lane, the well-known port's
  // own socket, for packets whose source port has no socket (the table is
  // full). They leave from port 4791 (one fabric path) instead of being
  // dropped; tx_port_errors counts them. It is not in the hash nor in
  // port_stats().
  // Two more with IPv6: the IPv6 socket's own entry.
  ports_.resize(cfg_.max_tx_ports + 2);
  port_fd_.assign(cfg_.max_tx_ports + 2, -1);
  port_used_.assign(cfg_.max_tx_ports + 2, 0);
  port_src_.assign(cfg_.max_tx_ports + 2, Gid{});
  fallback_port_ = static_cast<int>(cfg_.max_tx_ports);
  ports_[fallback_port_].port = cfg_.port;
  port_fd_[fallback_port_] = rx_fd_;
  if (rx6_fd_ >= 0) {
    fallback6_port_ = fallback_port_ + 1;
    ports_[fallback6_port_].port = cfg_.port;
    port_fd_[fallback6_port_] = rx6_fd_;
  }

  // rx_buffers receives per socket.
  const uint32_t nrx = cfg_.rx_buffers * (rx6_fd_ >= 0 ? 2 : 1);
  rx_.resize(nrx);
  rx_ready_.assign(nrx, 0);
  rx_rearm_.assign(nrx, 0);
  for (uint32_t i = 0; i < nrx; ++i) {
    rx_[i].buf = std::make_unique<std::byte[]>(cfg_.rx_buffer_bytes);
    rx_[i].fd = i < cfg_.rx_buffers ? rx_fd_ : rx6_fd_;
    arm_rx(i);
  }

  size_t slot_bytes = cfg_.gso ? kGsoMaxBytes : Engine::kMaxPacket;
  tx_.resize(cfg_.tx_slots);
  tx_free_.resize(cfg_.tx_slots);
  tx_queued_.resize(cfg_.tx_slots);
  for (uint32_t i = 0; i < cfg_.tx_slots; ++i) {
    tx_[i].buf = std::make_unique<std::byte[]>(slot_bytes);
    tx_free_[i] = cfg_.tx_slots - 1 - i;
  }
  tx_free_count_ = cfg_.tx_slots;
  submit();
  return {};
}

void UdpDatapath::submit() {
  if (sqes_pending_ == 0) return;
  int rc = io_uring_submit(&ring_);
  if (rc >= 0) sqes_pending_ = 0;
}

void UdpDatapath::arm_rx(uint32_t idx) {
  RxSlot& s = rx_[idx];
  s.iov = {s.buf.get(), cfg_.rx_buffer_bytes};
  s.msg = {};
  s.msg.msg_name = &s.from;
  s.msg.msg_namelen = sizeof s.from;
  s.msg.msg_iov = &s.iov;
  s.msg.msg_iovlen = 1;
  s.msg.msg_control = s.control;
  s.msg.msg_controllen = sizeof s.control;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (!sqe) {
    io_uring_submit(&ring_);
    sqes_pending_ = 0;
    sqe = io_uring_get_sqe(&ring_);
  }
  io_uring_prep_recvmsg(sqe, s.fd, &s.msg, 0);
  io_uring_sqe_set_data64(sqe, kRxTag | idx);
  ++sqes_pending_;
  ++rx_posted_[idx < cfg_.rx_buffers ? 0 : 1];
}

bool UdpDatapath::rx_starved() const { return rx_posted_[0] == 0 || (rx6_fd_ >= 0 && rx_posted_[1] == 0); }

void UdpDatapath::parse_rx(RxSlot& s, int res) {
  s.len = 0;
  s.offset = 0;
  if (res <= 0 || (s.msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
    ++stats_.rx_errors;
    return;
  }
  s.len = static_cast<uint32_t>(res);
  s.seg = s.len;
  s.meta = PacketMeta{};
  bool have_dst = false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&s.msg); c; c = CMSG_NXTHDR(&s.msg, c)) {
    if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
      int seg;
      memcpy(&seg, CMSG_DATA(c), sizeof seg);
      if (seg > 0) s.seg = static_cast<uint32_t>(seg);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      uint8_t tos;
      memcpy(&tos, CMSG_DATA(c), 1);
      s.meta.traffic_class = tos;  // ECN CE = 3 in the low bits (RFC 3168)
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo pi;
      memcpy(&pi, CMSG_DATA(c), sizeof pi);
      s.meta.dst = Gid::from_ipv4(ntohl(pi.ipi_addr.s_addr));
      have_dst = pi.ipi_addr.s_addr != 0;
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
      int tc;
      memcpy(&tc, CMSG_DATA(c), sizeof tc);
      s.meta.traffic_class = static_cast<uint8_t>(tc);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo pi;
      memcpy(&pi, CMSG_DATA(c), sizeof pi);
      memcpy(s.meta.dst.raw, &pi.ipi6_addr, 16);
      have_dst = true;
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT) {
      int hl;
      memcpy(&hl, CMSG_DATA(c), sizeof hl);
      s.meta.hop_limit = static_cast<uint8_t>(hl);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_FLOWINFO) {
      uint32_t fi;
      memcpy(&fi, CMSG_DATA(c), sizeof fi);
      s.meta.flow_label = ntohl(fi) & 0xfffff;
    }
  }
  if (s.from.sin6_family == AF_INET) {
    sockaddr_in from4;
    memcpy(&from4, &s.from, sizeof from4);
    s.meta.src = Gid::from_ipv4(ntohl(from4.sin_addr.s_addr));
    s.meta.src_port = ntohs(from4.sin_port);
  } else if (s.from.sin6_family == AF_INET6) {
    memcpy(s.meta.src.raw, &s.from.sin6_addr, 16);
    s.meta.src_port = ntohs(s.from.sin6_port);
  } else {
    have_dst = false;
  }
  if (!have_dst) {
    ++stats_.rx_dropped;
    s.len = 0;
    return;
  }
  s.meta.dst_port = cfg_.port;
  ++stats_.rx_batches;
}

bool UdpDatapath::reap() {
  bool progressed = false;
  io_uring_cqe* cqes[64];
  for (;;) {
    unsigned got = io_uring_peek_batch_cqe(&ring_, cqes, 64);
    if (got == 0) break;
    progressed = true;
    for (unsigned i = 0; i < got; ++i) {
      uint64_t ud = io_uring_cqe_get_data64(cqes[i]);
      uint32_t idx = static_cast<uint32_t>(ud);
      int res = cqes[i]->res;
      if ((ud & ~0xffffffffull) == kRxTag) {
        --rx_posted_[idx < cfg_.rx_buffers ? 0 : 1];
        RxSlot& s = rx_[idx];
        parse_rx(s, res);
        if (s.len == 0) {
          rx_rearm_[rx_rearm_count_++] = idx;
        } else {
          rx_ready_[(rx_ready_head_ + rx_ready_count_) % rx_ready_.size()] = idx;
          ++rx_ready_count_;
        }
      } else if ((ud & ~0xffffffffull) == kTxTag) {
        TxSlot& s = tx_[idx];
        const unsigned flags = cqes[i]->flags;
        if (flags & IORING_CQE_F_NOTIF) {
          // A zero-copy send's second completion: the kernel let go of the buffer.
          if (static_cast<uint32_t>(res) & IORING_NOTIF_USAGE_ZC_COPIED) ++zc_copied_;
          tx_done(idx, s.zc_requeue);
          continue;
        }
        // Until a zero-copy send's notification (IORING_CQE_F_MORE says one follows) the
        // kernel may still read the buffer: what this completion decides waits for it.
        const bool notif = (flags & IORING_CQE_F_MORE) != 0;
        auto settle = [&](bool requeue) {  // free the slot, or send it again
          s.zc_requeue = requeue;  // read by the notification, when one follows
          if (!notif) tx_done(idx, requeue);
        };
        if (s.zc && (res == -EINVAL || res == -EOPNOTSUPP) && !zc_refused_ && !s.labelled) {
          // A kernel (or socket) without zero-copy sends: plain ones from now on.
          spdlog::warn("sroced: the kernel refuses io_uring zero-copy sends ({}); datapath.send_zc is off from now on",
                       std::strerror(-res));
          zc_refused_ = true;
          settle(true);
          continue;
        }
        if (res == -EINVAL && s.labelled) {
          // A named flow label refused: an exclusive lease exists in this namespace
          // (fl6_sock_lookup). Resend without a label; the ICRC masks the label
          // (A17.4.5.2), so the packets stay valid, only label-hashing paths change.
          if (!flow_labels_refused_)
            spdlog::warn("sroced: the kernel refuses chosen IPv6 flow labels (EINVAL: a socket holds an "
                         "exclusive label lease); IPv6 packets leave with automatic labels from now on");
          flow_labels_refused_ = true;
          ++flow_label_refused_;
          settle(true);
          continue;
        }
        if (res < 0) {
          stats_.tx_errors += s.nsegs;
        } else {
          stats_.tx_packets += s.nsegs;
          stats_.tx_bytes += s.len;
          PortStats& p = ports_[s.port_index];
          p.tx_packets += s.nsegs;
          p.tx_bytes += s.len;
          ++p.tx_sends;
        }
        settle(false);
      }
    }
    io_uring_cq_advance(&ring_, got);
  }
  return progressed;
}

void UdpDatapath::tx_done(uint32_t idx, bool requeue) {
  --tx_inflight_;
  if (requeue) {
    tx_queued_[tx_queued_count_++] = idx;
  } else {
    tx_free_[tx_free_count_++] = idx;
  }
}

size_t UdpDatapath::rx_burst(std::span<RxPacket> out) {
  // Slots handed out by the previous call are free again now. When a socket had
  // none of its receives posted, datagrams may wait in it that no receive could
  // take: post the re-armed ones at once (each completes inline on such data), so
  // the reap below finds them; that is how Daemon::pass drains a backlog.
  const bool starved = rx_starved();
  for (size_t i = 0; i < rx_rearm_count_; ++i) arm_rx(rx_rearm_[i]);
  rx_rearm_count_ = 0;
  if (starved) submit();
  reap();
  // reap() may queue slots of failed receives for re-arming; post them now.
  for (size_t i = 0; i < rx_rearm_count_; ++i) arm_rx(rx_rearm_[i]);
  rx_rearm_count_ = 0;

  size_t n = 0;
  while (n < out.size() && rx_ready_count_ > 0) {
    uint32_t idx = rx_ready_[rx_ready_head_];
    RxSlot& s = rx_[idx];
    while (s.offset < s.len && n < out.size()) {
      uint32_t l = std::min(s.seg, s.len - s.offset);
      out[n].payload = {s.buf.get() + s.offset, l};
      out[n].meta = s.meta;
      ++n;
      s.offset += l;
      ++stats_.rx_packets;
      stats_.rx_bytes += l;
    }
    if (s.offset >= s.len) {
      rx_ready_head_ = (rx_ready_head_ + 1) % rx_ready_.size();
      --rx_ready_count_;
      rx_rearm_[rx_rearm_count_++] = idx;
    }
  }
  // The re-armed receives go to the kernel with the next tx_flush() or
  // poll(): one io_uring_enter per loop pass for both directions.
  return n;
}

int UdpDatapath::find_tx_port(const Gid& src, uint16_t sport) {
  size_t mask = port_hash_.size() - 1;
  for (size_t h = hash_port(src, sport, mask);; h = (h + 1) & mask) {
    int32_t i = port_hash_[h];
    if (i < 0) return -1;
    if (ports_[i].port == sport && port_src_[i] == src) return i;
  }
}

// An IPv6 lane socket bound to [src]:sport (like the IPv4 ones below); -1 if it cannot be.
int UdpDatapath::open_socket6(const Gid& src, uint16_t sport) {
  int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1, pmtu = IPV6_PMTUDISC_DO;
  bool ok = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) == 0 &&
            setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof pmtu) == 0 &&
            setsockopt(fd, IPPROTO_IPV6, IPV6_FLOWINFO_SEND, &one, sizeof one) == 0;
  if (ok) {
    set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, cfg_.sndbuf);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(sport);
    bool local = false;
    for (const Gid& l : local_addrs6_) local = local || l == src;
    a.sin6_addr = local ? to_in6(src) : in6addr_any;
    ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  if (!ok) {
    close(fd);
    return -1;
  }
  return fd;
}

// The flow label an address vector of label 0 gets on the wire: a 20-bit hash of the
// destination QP (BTH) and the lane's source port, never 0. IBA Annex A17 asks that a zero
// flow label be replaced by one derived from the QPNs, so a fabric that hashes (source,
// destination, flow label) still tells flows apart; Linux does it with the product of both
// QPNs (rdma_calc_flow_label, mlx5 for RC) and derives the UDP source port from the label.
// Here the source port is the lane (the engine sprays a QP over several), so the label
// follows the lane too: a label-hashing fabric then spreads the lanes as a port-hashing one
// does. The destination QPN stands for the pair: the source QPN is not in the packet.
uint32_t UdpDatapath::derive_flow_label(uint32_t dqpn, uint16_t sport) {
  return daemon::derive_flow_label(dqpn, sport);  // datapath.h: the DPDK datapath uses it too
}

int UdpDatapath::evict_port() {
  std::vector<bool> held(port_count_, false);
  for (uint32_t k = 0; k < tx_open_count_; ++k)
    if (const TxSlot& t = tx_[tx_open_[k]]; t.nsegs > 0 && t.port_index < port_count_) held[t.port_index] = true;
  for (size_t k = 0; k < tx_queued_count_; ++k)
    if (const TxSlot& t = tx_[tx_queued_[k]]; t.port_index < port_count_) held[t.port_index] = true;
  int victim = -1;
  for (size_t i = 0; i < port_count_; ++i)
    if (!held[i] && (victim < 0 || port_used_[i] < port_used_[static_cast<size_t>(victim)]))
      victim = static_cast<int>(i);
  if (victim < 0) return -1;
  const int fd = port_fd_[static_cast<size_t>(victim)];
  if (fd >= 0 && fd != rx_fd_ && fd != rx6_fd_) close(fd);
  port_fd_[static_cast<size_t>(victim)] = -1;
  // Open addressing without tombstones: rebuild the hash from the entries that stay.
  std::fill(port_hash_.begin(), port_hash_.end(), -1);
  for (size_t i = 0; i < port_count_; ++i)
    if (static_cast<int>(i) != victim) hash_insert(i);
  ++stats_.tx_port_evictions;
  return victim;
}

int UdpDatapath::open_tx_port(const Gid& src, uint16_t sport) {
  // A long-lived daemon sees far more lanes than it keeps sockets for (each QP's lanes take
  // ports of their own in 0xC000-0xFFFF): a full table gives up the lane used longest ago.
  int reuse = -1;
  if (port_count_ >= cfg_.max_tx_ports && (reuse = evict_port()) < 0) return -1;
  int fd = -1;
  const bool v4 = src.is_ipv4();
  const int well_known = v4 ? rx_fd_ : rx6_fd_;
  if (sport == cfg_.port) {
    fd = well_known;
  } else if (!v4) {
    fd = open_socket6(src, sport);
    if (fd < 0) {
      fd = well_known;
      ++stats_.tx_port_errors;
    }
  } else {
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    bool ok = fd >= 0;
    int pmtu = IP_PMTUDISC_DO;
    ok = ok && setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) == 0;
    if (ok) {
      set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, cfg_.sndbuf);
      int small = 4096;  // nothing is received here; RoCE replies go to the well-known port
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(sport);
      bool local = false;
      for (uint32_t l : local_addrs_) local = local || l == src.ipv4();
      a.sin_addr.s_addr = local ? htonl(src.ipv4()) : htonl(INADDR_ANY);
      ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    }
    if (!ok) {
      // Port taken by someone else: still deliver, from the well-known
      // port (this lane then shares the path of lane 4791), and count it.
      if (fd >= 0) close(fd);
      fd = rx_fd_;
      ++stats_.tx_port_errors;
    }
  }
  const size_t i = reuse >= 0 ? static_cast<size_t>(reuse) : port_count_++;
  ports_[i] = PortStats{};
  ports_[i].port = sport;
  ports_[i].local = src;
  port_src_[i] = src;
  port_fd_[i] = fd;
  hash_insert(i);
  return static_cast<int>(i);
}

void UdpDatapath::hash_insert(size_t i) {
  const size_t mask = port_hash_.size() - 1;
  size_t h = hash_port(port_src_[i], ports_[i].port, mask);
  while (port_hash_[h] >= 0) h = (h + 1) & mask;
  port_hash_[h] = static_cast<int32_t>(i);
}

bool UdpDatapath::slot_can_append(const TxSlot& s) const {
  return cfg_.gso && !s.closed && s.nsegs > 0 && s.nsegs < kGsoMaxSegments &&
         s.len + Engine::kMaxPacket <= kGsoMaxBytes;
}

void UdpDatapath::close_slot(uint32_t i) {
  int idx = tx_open_[i];
  // Keep the open list in creation order (it is short).
  for (uint32_t k = i + 1; k < tx_open_count_; ++k) tx_open_[k - 1] = tx_open_[k];
  --tx_open_count_;
  if (tx_write_ == idx) tx_write_ = -1;
  if (tx_[idx].nsegs > 0) {
    tx_queued_[tx_queued_count_++] = static_cast<uint32_t>(idx);
  } else {
    tx_free_[tx_free_count_++] = static_cast<uint32_t>(idx);
  }
}

int UdpDatapath::open_slot() {
  if (tx_open_count_ == kMaxOpenBatches) close_slot(0);  // the oldest batch leaves
  int idx = static_cast<int>(tx_free_[--tx_free_count_]);
  TxSlot& s = tx_[idx];
  s.len = 0;
  s.nsegs = 0;
  s.closed = false;
  tx_open_[tx_open_count_++] = idx;
  return idx;
}

std::span<std::byte> UdpDatapath::tx_buffer() {
  // Most packets continue the batch the previous one went to (one QP, one
  // lane): the engine writes straight behind it. Writing behind a non-empty
  // batch needs a spare slot at hand in case the packet turns out not to
  // belong there (tx_commit then moves it).
  if (tx_write_ >= 0) {
    TxSlot& s = tx_[tx_write_];
    if (s.nsegs == 0) return {s.buf.get(), Engine::kMaxPacket};
    if (slot_can_append(s) && tx_free_count_ >= 1) return {s.buf.get() + s.len, Engine::kMaxPacket};
    if (!slot_can_append(s)) {
      for (uint32_t i = 0; i < tx_open_count_; ++i)
        if (tx_open_[i] == tx_write_) {
          close_slot(i);
          break;
        }
    }
    tx_write_ = -1;
  }
  if (tx_free_count_ == 0) {
    // Closed batches go out now (a send that fits the socket buffer
    // completes during the submit), then their buffers come back.
    send_queued();
    reap();
    if (tx_free_count_ == 0) {
      ++stats_.tx_full;
      return {};
    }
  }
  tx_write_ = open_slot();
  return {tx_[tx_write_].buf.get(), Engine::kMaxPacket};
}

// Linux numbers the segments of one UDP GSO send: the first carries the id the datagram
// got (0: DF on an unconnected socket, ip_select_ident_segs), segment i id i
// (inet_gso_segment; a NIC segmenting in hardware does the same). The engine computed each
// ICRC for id 0, which only the first segment keeps; the ICRC covers the id (A17.3.3),
// so segment i gets the ICRC of id i (docs/wire.md, "UDP GSO and the IPv4 identification").
void UdpDatapath::set_segment_id(std::byte* pkt, size_t len, uint32_t index) {
  // Only a packet too short to hold a BTH and an ICRC is left as it is (the engine builds none).
  if (index != 0) sroce_icrc_set_ip_id(reinterpret_cast<uint8_t*>(pkt), len, static_cast<uint16_t>(index), &tx_ids_);
}

uint16_t UdpDatapath::sent_port(int pi) const {
  const int fd = port_fd_[static_cast<size_t>(pi)];
  return fd == rx_fd_ || (rx6_fd_ >= 0 && fd == rx6_fd_) ? cfg_.port : ports_[static_cast<size_t>(pi)].port;
}

// The ICRC covers the UDP source port (A17.8: only the UDP checksum is masked), and the
// engine computed it for the lane's port. A packet that leaves from another one (the
// well-known port, when the port table is full or the lane's port is held by someone else)
// would arrive with a bad ICRC and be dropped on every attempt, so it is sealed again for
// the port it leaves from (IPv4 id 0; set_segment_id adjusts a GSO segment's id after).
// A packet too short for a BTH and an ICRC, or with a malformed INT shim, is left alone.
void UdpDatapath::reseal_for_port(std::byte* pkt, size_t len, const TxKey& key, uint16_t sport) {
  auto* p = reinterpret_cast<uint8_t*>(pkt);
  size_t shim = 0;
  if (sroce_int_present(p, len)) {  // the ICRC does not cover an INT shim (docs/wire.md, INT)
    sroce_int_shim sh;
    if (sroce_int_shim_parse(p, len, &sh) != SROCE_INT_OK) return;
    shim = sroce_int_shim_bytes(&sh);
  }
  if (len < shim + SROCE_BTH_LEN + SROCE_ICRC_LEN) return;
  sroce_icrc_addr a{};
  memcpy(a.src_gid, key.src.raw, sizeof a.src_gid);
  memcpy(a.dst_gid, key.dst.raw, sizeof a.dst_gid);
  a.src_port = sport;
  a.dst_port = key.dport;
  const size_t covered = len - shim - SROCE_ICRC_LEN;
  sroce_icrc_put(p + len - SROCE_ICRC_LEN, sroce_icrc_payload(&a, p + shim, covered));
}

// Segment `nsegs` of batch `t` at `pkt`: the ICRC for the port the batch leaves from, then
// for the IPv4 id the kernel gives that segment.
void UdpDatapath::seal_segment(const TxSlot& t, std::byte* pkt, size_t len, bool v4) {
  if (t.reseal) reseal_for_port(pkt, len, t.key, sent_port(static_cast<int>(t.port_index)));
  if (v4) set_segment_id(pkt, len, t.nsegs);
}

void UdpDatapath::tx_commit(size_t len, const PacketMeta& meta) {
  if (tx_write_ < 0 || len == 0 || len > Engine::kMaxPacket) return;
  const bool v4 = meta.dst.is_ipv4();
  // IPv4 to IPv6 (or the reverse), or IPv6 without an IPv6 GID of ours: nothing can carry it.
  if (v4 != meta.src.is_ipv4() || (!v4 && rx6_fd_ < 0)) {
    ++stats_.tx_errors;
    return;
  }
  uint32_t label = 0;
  if (!v4) {
    label = meta.flow_label & 0xfffff;
    if (label == 0 && len >= 8) {
      // RoCEv2's UDP payload starts with the BTH; DestQP is bytes 5-7 (IBA 9.2).
      const auto* b = reinterpret_cast<const uint8_t*>(tx_[tx_write_].buf.get() + tx_[tx_write_].len);
      label = derive_flow_label((uint32_t{b[5]} << 16) | (uint32_t{b[6]} << 8) | b[7], meta.src_port);
    }
  }
  TxKey key{meta.src, meta.dst, meta.src_port, meta.dst_port, meta.traffic_class,
            static_cast<uint8_t>(v4 ? 0 : meta.hop_limit), label};
  const int wi = tx_write_;
  TxSlot& w = tx_[wi];
  const std::byte* src = w.buf.get() + w.len;  // where the engine wrote it
  if (w.nsegs > 0 && key == w.key && len <= w.seg) {
    seal_segment(w, w.buf.get() + w.len, len, v4);
    w.len += len;
    ++w.nsegs;
    if (len < w.seg) w.closed = true;  // GSO: only the last segment may be shorter
    return;
  }
  // Another flow (another QP or lane, interleaved by the engine's
  // round-robin), or this flow at a new size. A flow has at most one open
  // batch: the packet joins it if it can, else that batch is closed first,
  // so a flow's batches are queued in packet order. Flows of one burst may
  // leave in another order than the engine produced them.
  for (uint32_t i = 0; i < tx_open_count_; ++i) {
    TxSlot& o = tx_[tx_open_[i]];
    if (o.nsegs == 0 || !(o.key == key)) continue;
    if (slot_can_append(o) && len <= o.seg) {
      copy_bytes(o.buf.get() + o.len, src, len);
      seal_segment(o, o.buf.get() + o.len, len, v4);
      o.len += len;
      ++o.nsegs;
      if (len < o.seg) o.closed = true;
      tx_write_ = tx_open_[i];
      return;
    }
    close_slot(i);  // queued, not sent: the bytes at `src` stay valid
    break;
  }
  int target = wi;
  if (w.nsegs > 0) {
    target = open_slot();  // tx_buffer() kept a free slot for this
    copy_bytes(tx_[target].buf.get(), src, len);
  }
  tx_write_ = target;
  TxSlot& t = tx_[target];
  int pi = find_tx_port(key.src, key.sport);
  if (pi < 0) pi = open_tx_port(key.src, key.sport);
  if (pi < 0) {  // table full: max_tx_ports distinct lanes already
    ++stats_.tx_port_errors;
    pi = v4 ? fallback_port_ : fallback6_port_;
  }
  port_used_[static_cast<size_t>(pi)] = ++port_tick_;
  t.reseal = sent_port(pi) != key.sport;
  t.key = key;
  t.port_index = static_cast<uint32_t>(pi);
  t.nsegs = 0;
  seal_segment(t, t.buf.get(), len, v4);  // segment 0
  t.seg = static_cast<uint32_t>(len);
  t.len = len;
  t.nsegs = 1;
  t.closed = false;
}

void UdpDatapath::tx_flush() {
  while (tx_open_count_ > 0) close_slot(0);
  tx_write_ = -1;
  send_queued();
}

void UdpDatapath::send_queued() {
  if (tx_queued_count_ == 0) {
    submit();
    return;
  }
  for (size_t i = 0; i < tx_queued_count_; ++i) {
    uint32_t idx = tx_queued_[i];
    TxSlot& s = tx_[idx];
    const bool v4 = s.key.dst.is_ipv4();
    s.to = {};
    s.labelled = false;
    if (v4) {
      sockaddr_in to4{};
      to4.sin_family = AF_INET;
      to4.sin_port = htons(s.key.dport);
      to4.sin_addr.s_addr = htonl(s.key.dst.ipv4());
      memcpy(&s.to, &to4, sizeof to4);
    } else {
      s.to.sin6_family = AF_INET6;
      s.to.sin6_port = htons(s.key.dport);
      s.to.sin6_addr = to_in6(s.key.dst);
      // The GRH's flow label (A17.4.5.1), named in sin6_flowinfo (the sockets have
      // IPV6_FLOWINFO_SEND). Linux accepts an unleased label as long as no socket of the
      // namespace holds an exclusive lease; once one does, such sends fail with EINVAL and
      // reap() resends them unlabelled (the kernel's automatic label) from then on.
      s.labelled = !flow_labels_refused_;
      if (s.labelled) s.to.sin6_flowinfo = htonl(s.key.flow_label);
    }
    s.iov = {s.buf.get(), s.len};
    s.msg = {};
    s.msg.msg_name = &s.to;
    s.msg.msg_namelen = v4 ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    s.msg.msg_iov = &s.iov;
    s.msg.msg_iovlen = 1;
    s.msg.msg_control = s.control;
    s.msg.msg_controllen = sizeof s.control;
    memset(s.control, 0, sizeof s.control);  // CMSG_NXTHDR reads the next header's length
    cmsghdr* c = CMSG_FIRSTHDR(&s.msg);
    size_t clen = 0;
    auto put_int = [&](int level, int type, int v) {
      c->cmsg_level = level;
      c->cmsg_type = type;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(c), &v, sizeof v);
      clen += CMSG_SPACE(sizeof(int));
      c = CMSG_NXTHDR(&s.msg, c);
    };
    if (v4) {
      put_int(IPPROTO_IP, IP_TOS, s.key.tos);
    } else {
      // The GRH's traffic class and hop limit (A17.4.5.1) for every segment of this send.
      put_int(IPPROTO_IPV6, IPV6_TCLASS, s.key.tos);
      put_int(IPPROTO_IPV6, IPV6_HOPLIMIT, s.key.hop_limit != 0 ? s.key.hop_limit : 64);
    }
    if (s.nsegs > 1) {
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      uint16_t seg = static_cast<uint16_t>(s.seg);
      memcpy(CMSG_DATA(c), &seg, sizeof seg);
      clen += CMSG_SPACE(sizeof(uint16_t));
    }
    s.msg.msg_controllen = clen;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {
      io_uring_submit(&ring_);
      sqes_pending_ = 0;
      sqe = io_uring_get_sqe(&ring_);
    }
    s.zc = cfg_.send_zc && !zc_refused_ && s.len >= kZcMinBytes;
    if (s.zc) {
      io_uring_prep_sendmsg_zc(sqe, port_fd_[s.port_index], &s.msg, 0);
      sqe->ioprio |= IORING_SEND_ZC_REPORT_USAGE;  // the notification says whether it copied
      ++zc_sends_;
    } else {
      io_uring_prep_sendmsg(sqe, port_fd_[s.port_index], &s.msg, 0);
    }
    io_uring_sqe_set_data64(sqe, kTxTag | idx);
    ++sqes_pending_;
    ++tx_inflight_;
    ++stats_.tx_sends;
  }
  tx_queued_count_ = 0;
  submit();
}

bool UdpDatapath::poll() {
  bool p = reap();
  submit();
  return p;
}

std::string UdpDatapath::stats_json() const {
  return nlohmann::json{{"flow_label_refused", flow_label_refused_},
                        {"flow_labels_named", !flow_labels_refused_},
                        {"zc_sends", zc_sends_},
                        {"zc_copied", zc_copied_},
                        {"zc_on", cfg_.send_zc && !zc_refused_}}
      .dump();
}

bool UdpDatapath::has_pending() { return rx_ready_count_ > 0 || io_uring_cq_ready(&ring_) > 0; }

bool UdpDatapath::rx_more() { return has_pending() || rx_starved(); }

}  // namespace sroce::daemon
