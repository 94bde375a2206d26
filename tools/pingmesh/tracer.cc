#include "tracer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "proto/roce.h"

namespace sroce::pingmesh {

namespace {

constexpr size_t kIpLen = 20;
constexpr size_t kUdpLen = 8;
constexpr size_t kPayload = 12;  // "SRPM-TRACE" + pad: not a BTH a responder would take

uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

}  // namespace

Tracer::~Tracer() {
  if (send_fd_ >= 0) close(send_fd_);
  if (recv_fd_ >= 0) close(recv_fd_);
}

Result<void> Tracer::open(const std::string& src_addr) {
  in_addr a{};
  if (inet_pton(AF_INET, src_addr.c_str(), &a) != 1)
    return Error{EAFNOSUPPORT, "tracer: " + src_addr + " is not an IPv4 address (traces are IPv4 only)"};
  src_ = a.s_addr;
  send_fd_ = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);  // IP_HDRINCL implied
  if (send_fd_ < 0) return Error{errno, std::string("tracer: raw socket: ") + std::strerror(errno)};
  recv_fd_ = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_ICMP);
  if (recv_fd_ < 0) return Error{errno, std::string("tracer: ICMP socket: ") + std::strerror(errno)};
  return {};
}

int Tracer::send(uint32_t dst, uint16_t sport, uint8_t ttl, uint16_t id) {
  uint8_t pkt[kIpLen + kUdpLen + kPayload] = {};
  uint8_t* ip = pkt;
  ip[0] = 0x45;
  put16(ip + 2, sizeof(pkt));
  put16(ip + 4, id);
  ip[8] = ttl;
  ip[9] = IPPROTO_UDP;
  std::memcpy(ip + 12, &src_, 4);
  std::memcpy(ip + 16, &dst, 4);  // the kernel fills the header checksum (raw(7))
  uint8_t* udp = pkt + kIpLen;
  put16(udp, sport);
  put16(udp + 2, SROCE_UDP_PORT);
  put16(udp + 4, kUdpLen + kPayload);  // checksum 0: none (RFC 768)
  std::memcpy(udp + kUdpLen, "SRPM-TRACE", 10);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = dst;
  if (sendto(send_fd_, pkt, sizeof(pkt), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)) < 0)
    return errno;
  return 0;
}

void Tracer::drain(std::vector<HopAnswer>& out) {
  uint8_t b[1500];
  for (;;) {
    sockaddr_in from{};
    socklen_t fl = sizeof(from);
    const ssize_t n = recvfrom(recv_fd_, b, sizeof(b), 0, reinterpret_cast<sockaddr*>(&from), &fl);
    if (n < 0) return;  // EAGAIN: drained
    // outer IPv4 | ICMP (8) | the probe's IPv4 header | its first 8 bytes (RFC 792)
    const size_t ohl = static_cast<size_t>(b[0] & 0xf) * 4;
    if (static_cast<size_t>(n) < ohl + 8 + kIpLen + kUdpLen) continue;
    const uint8_t* icmp = b + ohl;
    const bool exceeded = icmp[0] == 11 && icmp[1] == 0;
    if (!exceeded && icmp[0] != 3) continue;
    const uint8_t* in = icmp + 8;
    const size_t ihl = static_cast<size_t>(in[0] & 0xf) * 4;
    if (static_cast<size_t>(n) < ohl + 8 + ihl + kUdpLen || in[9] != IPPROTO_UDP) continue;
    if (std::memcmp(in + 12, &src_, 4) != 0) continue;
    const uint8_t* udp = in + ihl;
    if (get16(udp + 2) != SROCE_UDP_PORT) continue;
    HopAnswer a;
    a.id = get16(in + 4);
    char s[INET_ADDRSTRLEN] = "";
    inet_ntop(AF_INET, &from.sin_addr, s, sizeof(s));
    a.hop = s;
    a.exceeded = exceeded;
    std::memcpy(&a.dst, in + 16, 4);
    a.sport = get16(udp);
    out.push_back(a);
  }
}

}  // namespace sroce::pingmesh
