// Next-hop MAC addresses from the kernel (neighbour.h).
#include "neighbour.h"

#include <arpa/inet.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

namespace sroce::dpdk {

// ---------------------------------------------------------------- the table

NeighbourTable::NeighbourTable(uint32_t capacity) {
  uint32_t cap = 16;
  while (cap < capacity) cap <<= 1;
  slots_ = std::make_unique<Slot[]>(cap);
  mask_ = cap - 1;
  keys6_ = std::make_unique<std::array<uint8_t, 16>[]>(cap);
  index6_ = std::make_unique<int32_t[]>(cap);
  for (uint32_t i = 0; i < cap; ++i) index6_[i] = -1;
}

uint32_t NeighbourTable::handle6(const uint8_t dst[16]) {
  uint64_t a, b;
  memcpy(&a, dst, 8);
  memcpy(&b, dst + 8, 8);
  uint32_t h = static_cast<uint32_t>(((a ^ (b * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull) >> 40) & mask_;
  for (uint32_t n = 0; n <= mask_; ++n, h = (h + 1) & mask_) {
    const int32_t i = index6_[h];
    if (i >= 0 && memcmp(keys6_[i].data(), dst, 16) == 0) return kHandle6 | static_cast<uint32_t>(i);
    if (i < 0) {
      if (count6_ > mask_) return 0;
      const uint32_t k = count6_++;
      memcpy(keys6_[k].data(), dst, 16);  // before the handle is published by lookup()
      index6_[h] = static_cast<int32_t>(k);
      return kHandle6 | k;
    }
  }
  return 0;
}

NeighbourTable::Slot* NeighbourTable::find(uint32_t ip, bool insert) {
  uint32_t h = static_cast<uint32_t>((uint64_t{ip} * 0x9E3779B97F4A7C15ull) >> 40) & mask_;
  for (uint32_t n = 0; n <= mask_; ++n, h = (h + 1) & mask_) {
    uint32_t k = slots_[h].ip.load(std::memory_order_acquire);
    if (k == ip) return &slots_[h];
    if (k == 0) {
      if (!insert) return nullptr;
      // Only the loop thread inserts (and add_static before it runs), so
      // the empty slot cannot be taken under us.
      slots_[h].ip.store(ip, std::memory_order_release);
      used_.fetch_add(1, std::memory_order_relaxed);
      return &slots_[h];
    }
  }
  return nullptr;  // full
}

bool NeighbourTable::lookup(uint32_t dst, MacAddr& mac) {
  if (dst == 0) return false;
  Slot* s = find(dst, true);
  if (!s) return false;
  uint64_t v = s->mac.load(std::memory_order_acquire);
  if (!(v & kValid)) return false;
  mac = MacAddr::unpack(v & 0xffff'ffff'ffffull);
  return true;
}

bool NeighbourTable::add_static(uint32_t dst, const MacAddr& mac) {
  Slot* s = find(dst, true);
  if (!s) return false;
  s->mac.store(kValid | kStatic | mac.packed(), std::memory_order_release);
  return true;
}

bool NeighbourTable::set(uint32_t dst, const MacAddr& mac) {
  Slot* s = find(dst, false);
  if (!s) return false;
  const uint64_t old = s->mac.load(std::memory_order_relaxed);
  const uint64_t v = kValid | mac.packed();
  if ((old & kStatic) || old == v) return false;
  s->mac.store(v, std::memory_order_release);
  return true;
}

bool parse_static_neighbour(const std::string& s, uint32_t& ip, MacAddr& mac) {
  auto eq = s.find('=');
  if (eq == std::string::npos) return false;
  in_addr a{};
  if (inet_pton(AF_INET, s.substr(0, eq).c_str(), &a) != 1) return false;
  unsigned b[6];
  char tail;
  if (sscanf(s.c_str() + eq + 1, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6)
    return false;
  ip = ntohl(a.s_addr);
  for (int i = 0; i < 6; ++i) mac.b[i] = static_cast<uint8_t>(b[i]);
  return true;
}

// ------------------------------------------------------------- the resolver

namespace {

constexpr auto kTick = std::chrono::milliseconds(2);
constexpr uint64_t kRefreshTicks = 500;          // re-read every entry each second
constexpr uint64_t kProbeUnresolvedTicks = 50;   // 100 ms between probes of a missing entry
constexpr uint64_t kProbeStaleTicks = 2500;      // 5 s between probes of a stale one
constexpr uint16_t kDiscardPort = 9;             // RFC 863
// The kernel's NUD_VALID (include/net/neighbour.h; not in the uapi headers):
// states in which the entry's link-layer address may be used.
constexpr uint16_t kNudValid = NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | NUD_STALE | NUD_DELAY;

void add_attr(nlmsghdr* h, uint16_t type, const void* data, uint16_t len) {
  auto* a = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(h) + NLMSG_ALIGN(h->nlmsg_len));
  a->rta_type = type;
  a->rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
  memcpy(RTA_DATA(a), data, len);
  h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len);
}

}  // namespace

NeighbourResolver::NeighbourResolver(NeighbourTable& table, int ifindex) : table_(table), ifindex_(ifindex) {
  // In the caller's network namespace (the thread inherits it too).
  nl_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  udp_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  udp6_ = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);  // -1 without IPv6: fine
  if (nl_ >= 0) {
    timeval tv{0, 200'000};
    setsockopt(nl_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
}

NeighbourResolver::~NeighbourResolver() {
  stop();
  if (nl_ >= 0) close(nl_);
  if (udp_ >= 0) close(udp_);
  if (udp6_ >= 0) close(udp6_);
}

bool NeighbourResolver::start(std::string& error) {
  if (nl_ < 0 || udp_ < 0) {
    error = std::string("neighbour resolver: cannot open its netlink and UDP sockets: ") + strerror(errno);
    return false;
  }
  // The thread takes no signals: the daemon's signalfd must see them all.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  thread_ = std::thread([this] { run(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_setname_np(thread_.native_handle(), "sroced-neigh");
  return true;
}

void NeighbourResolver::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

bool NeighbourResolver::request(void* msg, size_t len, void* reply, size_t cap, size_t& got) {
  auto* h = static_cast<nlmsghdr*>(msg);
  h->nlmsg_seq = ++seq_;
  sockaddr_nl k{};
  k.nl_family = AF_NETLINK;
  if (sendto(nl_, msg, len, 0, reinterpret_cast<sockaddr*>(&k), sizeof k) < 0) return false;
  for (;;) {
    ssize_t n = recv(nl_, reply, cap, 0);
    if (n < 0) return false;  // timeout or error
    auto* r = static_cast<nlmsghdr*>(reply);
    if (!NLMSG_OK(r, static_cast<size_t>(n))) return false;
    if (r->nlmsg_seq != h->nlmsg_seq) continue;  // a late answer to an earlier request
    got = static_cast<size_t>(n);
    if (r->nlmsg_type == NLMSG_ERROR) return false;  // ENOENT, ENETUNREACH, ...
    return true;
  }
}

// The kernel's route to `dst` (4 or 16 bytes, network order, by `family`): the next hop
// (the gateway, else `dst` itself) and the output interface.
bool NeighbourResolver::route_any(int family, const uint8_t* dst, uint8_t* next_hop, int& oif) {
  const uint16_t alen = family == AF_INET6 ? 16 : 4;
  struct {
    nlmsghdr h;
    rtmsg r;
    char attrs[32];
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
  req.h.nlmsg_type = RTM_GETROUTE;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.r.rtm_family = static_cast<unsigned char>(family);
  req.r.rtm_dst_len = static_cast<unsigned char>(alen * 8);
  add_attr(&req.h, RTA_DST, dst, alen);
  alignas(nlmsghdr) char buf[4096];
  size_t got = 0;
  ++stats_.lookups;
  if (!request(&req, req.h.nlmsg_len, buf, sizeof buf, got)) return false;
  auto* h = reinterpret_cast<nlmsghdr*>(buf);
  if (h->nlmsg_type != RTM_NEWROUTE) return false;
  auto* r = static_cast<rtmsg*>(NLMSG_DATA(h));
  if (r->rtm_type != RTN_UNICAST) return false;  // local, unreachable, blackhole, ...
  memcpy(next_hop, dst, alen);
  oif = 0;
  int len = static_cast<int>(RTM_PAYLOAD(h));
  for (auto* a = RTM_RTA(r); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if (a->rta_type == RTA_GATEWAY && RTA_PAYLOAD(a) == alen) {
      memcpy(next_hop, RTA_DATA(a), alen);
    } else if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) == 4) {
      memcpy(&oif, RTA_DATA(a), 4);
    }
  }
  return true;
}

bool NeighbourResolver::route(uint32_t dst, uint32_t& next_hop, int& oif) {
  const uint32_t be = htonl(dst);
  uint32_t nh = be;
  if (!route_any(AF_INET, reinterpret_cast<const uint8_t*>(&be), reinterpret_cast<uint8_t*>(&nh), oif)) return false;
  next_hop = ntohl(nh);
  return true;
}

// The kernel's neighbour entry for `ip` (4 or 16 bytes by `family`) on `oif`: ARP for IPv4,
// neighbour discovery (RFC 4861) for IPv6, one table and one query for both.
bool NeighbourResolver::neighbour_any(int family, const uint8_t* ip, int oif, MacAddr& mac, uint16_t& state) {
  struct {
    nlmsghdr h;
    ndmsg n;
    char attrs[32];
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(ndmsg));
  req.h.nlmsg_type = RTM_GETNEIGH;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.n.ndm_family = static_cast<uint8_t>(family);
  req.n.ndm_ifindex = oif;
  add_attr(&req.h, NDA_DST, ip, family == AF_INET6 ? 16 : 4);
  alignas(nlmsghdr) char buf[4096];
  size_t got = 0;
  if (!request(&req, req.h.nlmsg_len, buf, sizeof buf, got)) return false;
  auto* h = reinterpret_cast<nlmsghdr*>(buf);
  if (h->nlmsg_type != RTM_NEWNEIGH) return false;
  auto* n = static_cast<ndmsg*>(NLMSG_DATA(h));
  state = n->ndm_state;
  int len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(ndmsg)));
  for (auto* a = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(n) + NLMSG_ALIGN(sizeof(ndmsg)));
       RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6) {
      memcpy(mac.b, RTA_DATA(a), 6);
      return true;
    }
  }
  return false;  // an entry without a link-layer address (INCOMPLETE, FAILED)
}

bool NeighbourResolver::neighbour(uint32_t ip, int oif, MacAddr& mac, uint16_t& state) {
  const uint32_t be = htonl(ip);
  return neighbour_any(AF_INET, reinterpret_cast<const uint8_t*>(&be), oif, mac, state);
}

std::optional<MacAddr> NeighbourResolver::query6(const uint8_t dst[16], bool* need_probe, bool* stale) {
  *need_probe = false;
  *stale = false;
  uint8_t nh[16];
  int oif = 0;
  if (!route_any(AF_INET6, dst, nh, oif) || (ifindex_ > 0 && oif != ifindex_)) {
    ++stats_.unroutable;
    return std::nullopt;
  }
  MacAddr mac;
  uint16_t state = 0;
  if (!neighbour_any(AF_INET6, nh, oif, mac, state) || !(state & kNudValid)) {
    *need_probe = true;
    return std::nullopt;
  }
  *stale = (state & NUD_STALE) != 0;
  return mac;
}

void NeighbourResolver::probe6(const uint8_t dst[16]) {
  // As probe(): a datagram to the discard port makes the kernel solicit the next hop.
  if (udp6_ < 0) return;
  sockaddr_in6 to{};
  to.sin6_family = AF_INET6;
  to.sin6_port = htons(kDiscardPort);
  memcpy(&to.sin6_addr, dst, 16);
  sendto(udp6_, "", 0, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), sizeof to);
  ++stats_.probes;
}

std::optional<MacAddr> NeighbourResolver::query(uint32_t dst, bool* need_probe, bool* stale) {
  *need_probe = false;
  *stale = false;
  uint32_t nh = 0;
  int oif = 0;
  if (!route(dst, nh, oif) || (ifindex_ > 0 && oif != ifindex_)) {
    ++stats_.unroutable;
    return std::nullopt;
  }
  MacAddr mac;
  uint16_t state = 0;
  if (!neighbour(nh, oif, mac, state) || !(state & kNudValid)) {
    *need_probe = true;
    return std::nullopt;
  }
  // STALE: the kernel has not confirmed it lately (it does not see our
  // traffic); still the best address there is, and a probe refreshes it.
  *stale = (state & NUD_STALE) != 0;
  return mac;
}

void NeighbourResolver::probe(uint32_t dst) {
  // Any datagram to the destination makes the kernel resolve its next hop
  // (ARP, or re-confirm a STALE entry); the discard port (RFC 863) is the
  // one meant for traffic nobody wants.
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(kDiscardPort);
  to.sin_addr.s_addr = htonl(dst);
  sendto(udp_, "", 0, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), sizeof to);
  ++stats_.probes;
}

void NeighbourResolver::run() {
  std::vector<uint32_t> todo;
  while (!stop_.load(std::memory_order_relaxed)) {
    ++tick_;
    const bool refresh = tick_ % kRefreshTicks == 0;
    todo.clear();
    table_.for_each([&](uint32_t ip, bool resolved, bool is_static) {
      if (!is_static && (!resolved || refresh)) todo.push_back(ip);
    });
    for (uint32_t ip : todo) {
      bool need_probe = false, stale = false;
      const bool v6 = NeighbourTable::is_handle6(ip);
      auto mac = v6 ? query6(table_.key6(ip), &need_probe, &stale) : query(ip, &need_probe, &stale);
      if (mac && table_.set(ip, *mac)) ++stats_.resolved;
      if (need_probe || stale) {
        uint64_t every = need_probe ? kProbeUnresolvedTicks : kProbeStaleTicks;
        auto it = last_probe_.find(ip);
        if (it == last_probe_.end() || tick_ - it->second >= every) {
          if (v6) {
            probe6(table_.key6(ip));
          } else {
            probe(ip);
          }
          last_probe_[ip] = tick_;
        }
      }
    }
    std::this_thread::sleep_for(kTick);
  }
}

}  // namespace sroce::dpdk
