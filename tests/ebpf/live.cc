#include "live.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

namespace sroce::tmtest {

Cli::~Cli() { run({"telemetry", "detach", "--all"}); }

int Cli::run(std::vector<std::string> args, std::string* out) const {
  std::vector<std::string> argv{bin_};
  argv.insert(argv.end(), args.begin(), args.end());
  const bool takes_pin = args.size() >= 2 && args[0] == "telemetry";
  const bool top = !args.empty() && args[0] == "top";
  if (takes_pin || top) {
    argv.push_back("--pin-dir");
    argv.push_back(pin_);
  }
  return tmtest::run(argv, out);
}

void Cli::attach_pair(const NetnsPair& n) const {
  std::string out;
  for (const auto& [ns, ifc] : {std::pair{n.ns_a, n.if_a}, std::pair{n.ns_b, n.if_b}}) {
    if (run({"telemetry", "attach", "--netns", ns, ifc}, &out) != 0) {
      throw std::runtime_error("attach failed: " + out);
    }
  }
}

nlohmann::json Cli::dump() const {
  std::string out;
  if (run({"telemetry", "dump", "--json"}, &out) != 0) throw std::runtime_error("dump: " + out);
  return nlohmann::json::parse(out);
}

nlohmann::json Cli::stats() const {
  std::string out;
  if (run({"telemetry", "stats", "--json"}, &out) != 0) throw std::runtime_error("stats: " + out);
  return nlohmann::json::parse(out);
}

UdpSock::UdpSock(const std::string& netns, const std::string& addr, uint16_t port) {
  v6_ = addr.find(':') != std::string::npos;
  in_netns(netns, [&] { fd_ = socket(v6_ ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0); });
  if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  const int big = 8 << 20;
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
  sockaddr_storage ss{};
  socklen_t len;
  if (v6_) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    inet_pton(AF_INET6, addr.c_str(), &a->sin6_addr);
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    inet_pton(AF_INET, addr.c_str(), &a->sin_addr);
    len = sizeof(*a);
  }
  if (bind(fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    const int e = errno;
    close(fd_);
    throw std::runtime_error("bind " + addr + ":" + std::to_string(port) + ": " + std::strerror(e));
  }
}

UdpSock::~UdpSock() {
  if (fd_ >= 0) close(fd_);
}

void UdpSock::connect_to(const std::string& addr, uint16_t port) {
  sockaddr_storage ss{};
  socklen_t len;
  if (v6_) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    inet_pton(AF_INET6, addr.c_str(), &a->sin6_addr);
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    inet_pton(AF_INET, addr.c_str(), &a->sin_addr);
    len = sizeof(*a);
  }
  if (connect(fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
  }
}

void UdpSock::set_ecn(uint8_t ecn) {
  // UDP keeps the ECN bits of IP_TOS (only TCP masks them, ip(7)).
  const int tos = ecn & 3;
  const int rc = v6_ ? setsockopt(fd_, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos))
                     : setsockopt(fd_, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
  if (rc != 0) throw std::runtime_error(std::string("IP_TOS: ") + std::strerror(errno));
}

void UdpSock::set_gso(uint16_t segment) {
  const int v = segment;
  if (setsockopt(fd_, SOL_UDP, UDP_SEGMENT, &v, sizeof(v)) != 0) {
    throw std::runtime_error(std::string("UDP_SEGMENT: ") + std::strerror(errno));
  }
}

void UdpSock::send(const std::vector<uint8_t>& payload) {
  for (;;) {
    const ssize_t n = ::send(fd_, payload.data(), payload.size(), 0);
    if (n == static_cast<ssize_t>(payload.size())) return;
    if (n < 0 && (errno == EINTR || errno == ENOBUFS || errno == EAGAIN)) continue;
    throw std::runtime_error(std::string("send: ") + std::strerror(errno));
  }
}

std::vector<uint8_t> UdpSock::recv(int timeout_ms) {
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return {};
  std::vector<uint8_t> b(65536);
  const ssize_t n = ::recv(fd_, b.data(), b.size(), 0);
  if (n <= 0) return {};
  b.resize(static_cast<size_t>(n));
  return b;
}

std::vector<uint8_t> roce_payload(const Roce& r) {
  std::vector<uint8_t> b(roce_len(r));
  write_roce(b.data(), r);
  return b;
}

size_t wire_bytes(bool ipv6, const Roce& r) { return 14 + (ipv6 ? 40 : 20) + 8 + roce_len(r); }

}  // namespace sroce::tmtest
