// Helpers of the live tests and the benchmark: the sroce CLI against a
// private pin directory, UDP sockets in a namespace, RoCEv2 datagrams.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frames.h"
#include "netns.h"

namespace sroce::tmtest {

// `sroce ... --pin-dir <pin>`; the last detach (or the destructor) unpins.
class Cli {
 public:
  explicit Cli(std::string bin) : bin_(std::move(bin)), pin_(unique_pin_dir()) {}
  ~Cli();  // detach --all: no hook or pin outlives the test
  Cli(const Cli&) = delete;
  Cli& operator=(const Cli&) = delete;

  int run(std::vector<std::string> args, std::string* out = nullptr) const;
  // Attach to both ends of the pair; REQUIREs success.
  void attach_pair(const NetnsPair& n) const;
  nlohmann::json dump() const;   // telemetry dump --json
  nlohmann::json stats() const;  // telemetry stats --json
  const std::string& pin() const { return pin_; }

 private:
  std::string bin_;
  std::string pin_;
};

class UdpSock {
 public:
  // A socket made in netns, bound to addr:port (IPv4 if addr has a dot).
  UdpSock(const std::string& netns, const std::string& addr, uint16_t port);
  ~UdpSock();
  UdpSock(const UdpSock&) = delete;
  UdpSock& operator=(const UdpSock&) = delete;

  void connect_to(const std::string& addr, uint16_t port);
  void set_ecn(uint8_t ecn);       // IP_TOS / IPV6_TCLASS low bits: 3 = CE
  void set_gso(uint16_t segment);  // UDP_SEGMENT
  void send(const std::vector<uint8_t>& payload);
  // Receive one datagram (timeout ms); empty when none came.
  std::vector<uint8_t> recv(int timeout_ms = 2000);
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  bool v6_ = false;
};

std::vector<uint8_t> roce_payload(const Roce& r);

// Frame bytes of a RoCEv2 datagram on a veth: Ethernet + IP + UDP + payload.
size_t wire_bytes(bool ipv6, const Roce& r);

}  // namespace sroce::tmtest
