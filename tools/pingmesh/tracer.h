// TTL-limited UDP probes on the exact 5-tuple of a probe (source address, source port,
// destination, 4791): the router where the TTL runs out answers with ICMP time exceeded
// (RFC 792) from its own address, so each TTL names one hop of that source port's ECMP path
// (Paris-traceroute style: the flow identifier never changes within a trace). IPv4 only;
// needs CAP_NET_RAW.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sroce/engine/result.h"

namespace sroce::pingmesh {

struct HopAnswer {
  uint16_t id = 0;        // the IPv4 identification of the probe it answers
  std::string hop;        // the router's address
  bool exceeded = false;  // ICMP time exceeded (else destination unreachable)
  uint32_t dst = 0;       // the probe's destination (network order)
  uint16_t sport = 0;
};

class Tracer {
 public:
  Tracer() = default;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;
  ~Tracer();

  Result<void> open(const std::string& src_addr);
  bool is_open() const { return send_fd_ >= 0; }
  int recv_fd() const { return recv_fd_; }
  // One datagram to dst:4791 from src:sport with the given TTL and IPv4 id. 0 or an errno.
  int send(uint32_t dst, uint16_t sport, uint8_t ttl, uint16_t id);
  // Every ICMP answer to one of our probes waiting on the socket.
  void drain(std::vector<HopAnswer>& out);

 private:
  int send_fd_ = -1;
  int recv_fd_ = -1;
  uint32_t src_ = 0;
};

}  // namespace sroce::pingmesh
