// QP1's IPv6 socket (gsi_socket.h).
#include "gsi_socket.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sroce::daemon {

Gsi6Socket::~Gsi6Socket() {
  if (fd_ >= 0) close(fd_);
}

Result<std::unique_ptr<Gsi6Socket>> Gsi6Socket::open(uint16_t port, const std::string& netdev) {
  std::unique_ptr<Gsi6Socket> s(new Gsi6Socket());
  s->port_ = port;
  s->fd_ = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->fd_ < 0) return Error{errno, fmt::format("QP1 IPv6 socket: {}", strerror(errno))};
  int one = 1;
  // The IPv4 side of the port is the datapath's.
  if (setsockopt(s->fd_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0 ||
      setsockopt(s->fd_, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one) != 0 ||
      setsockopt(s->fd_, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one) != 0 ||
      setsockopt(s->fd_, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &one, sizeof one) != 0)
    return Error{errno, fmt::format("QP1 IPv6 socket options: {}", strerror(errno))};
  if (!netdev.empty() && setsockopt(s->fd_, SOL_SOCKET, SO_BINDTODEVICE, netdev.c_str(),
                                    static_cast<socklen_t>(netdev.size())) != 0)
    return Error{errno, fmt::format("QP1 IPv6 socket: bind to {}: {}", netdev, strerror(errno))};
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  a.sin6_addr = in6addr_any;
  if (bind(s->fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return Error{errno, fmt::format("QP1 IPv6 socket: bind [::]:{}: {}", port, strerror(errno))};
  return s;
}

int Gsi6Socket::send(std::span<const std::byte> payload, const PacketMeta& meta) {
  sockaddr_in6 to{};
  to.sin6_family = AF_INET6;
  to.sin6_port = htons(meta.dst_port);
  memcpy(&to.sin6_addr, meta.dst.raw, 16);
  iovec iov{const_cast<std::byte*>(payload.data()), payload.size()};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(in6_pktinfo)) + 2 * CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_name = &to;
  m.msg_namelen = sizeof to;
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  // The source address is the AV's source GID: the ICRC covers it.
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = IPPROTO_IPV6;
  c->cmsg_type = IPV6_PKTINFO;
  c->cmsg_len = CMSG_LEN(sizeof(in6_pktinfo));
  in6_pktinfo pi{};
  memcpy(&pi.ipi6_addr, meta.src.raw, 16);
  memcpy(CMSG_DATA(c), &pi, sizeof pi);
  c = CMSG_NXTHDR(&m, c);
  c->cmsg_level = IPPROTO_IPV6;
  c->cmsg_type = IPV6_TCLASS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  int tclass = meta.traffic_class;
  memcpy(CMSG_DATA(c), &tclass, sizeof tclass);
  c = CMSG_NXTHDR(&m, c);
  c->cmsg_level = IPPROTO_IPV6;
  c->cmsg_type = IPV6_HOPLIMIT;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  int hops = meta.hop_limit ? meta.hop_limit : 64;
  memcpy(CMSG_DATA(c), &hops, sizeof hops);
  if (sendmsg(fd_, &m, 0) < 0) return -errno;
  return 0;
}

ssize_t Gsi6Socket::recv(std::span<std::byte> buf, PacketMeta& meta) {
  sockaddr_in6 from{};
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(in6_pktinfo)) + 2 * CMSG_SPACE(sizeof(int))];
  msghdr m{};
  m.msg_name = &from;
  m.msg_namelen = sizeof from;
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  ssize_t n = recvmsg(fd_, &m, MSG_DONTWAIT);
  if (n < 0) return -errno;
  if (m.msg_flags & MSG_TRUNC) return -EMSGSIZE;
  meta = PacketMeta{};
  memcpy(meta.src.raw, &from.sin6_addr, 16);
  meta.src_port = ntohs(from.sin6_port);
  meta.dst_port = port_;
  bool have_dst = false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != IPPROTO_IPV6) continue;
    if (c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo pi;
      memcpy(&pi, CMSG_DATA(c), sizeof pi);
      memcpy(meta.dst.raw, &pi.ipi6_addr, 16);
      have_dst = true;
    } else if (c->cmsg_type == IPV6_TCLASS) {
      int v;
      memcpy(&v, CMSG_DATA(c), sizeof v);
      meta.traffic_class = static_cast<uint8_t>(v);
    } else if (c->cmsg_type == IPV6_HOPLIMIT) {
      int v;
      memcpy(&v, CMSG_DATA(c), sizeof v);
      meta.hop_limit = static_cast<uint8_t>(v);
    }
  }
  if (!have_dst) return -EPROTO;  // without it the ICRC cannot be checked
  return n;
}

}  // namespace sroce::daemon
