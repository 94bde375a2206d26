// QP1 over IPv6: a UDP socket of its own for the MADs of IPv6 GIDs.
//
// sroced's datapaths carry IPv4 (udp_datapath.cc counts an IPv6 destination
// as a tx error) and its engine serves IPv4 GIDs, but ib_core's GID table
// holds the interface's IPv6 addresses too, and ib_cm / ib_umad may address
// QP1 through them. This socket carries only those datagrams: bound to
// [::]:port (IPV6_V6ONLY, so the IPv4 datapath keeps the port's IPv4 side),
// the source address chosen per datagram (IPV6_PKTINFO, the AV's source GID),
// traffic class and hop limit per datagram, and on receive the destination
// address, traffic class and hop limit from ancillary data (RFC 3542) so the
// ICRC can be checked and the GSI_RECV filled. Control-path volume (a few
// MADs per connection): plain sendmsg/recvmsg, no batching.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "sroce/engine/engine.h"

namespace sroce::daemon {

class Gsi6Socket {
 public:
  ~Gsi6Socket();
  Gsi6Socket(const Gsi6Socket&) = delete;
  Gsi6Socket& operator=(const Gsi6Socket&) = delete;

  // Opens and binds the socket; `netdev` (may be empty) limits it to that
  // interface (SO_BINDTODEVICE), as the GIDs it serves are that interface's.
  static Result<std::unique_ptr<Gsi6Socket>> open(uint16_t port, const std::string& netdev);

  int fd() const { return fd_; }
  // Sends one UDP payload (BTH .. ICRC) as `meta` says (IPv6 GIDs). 0 or -errno.
  int send(std::span<const std::byte> payload, const PacketMeta& meta);
  // Receives one datagram without blocking: its length (payload in `buf`,
  // addressing in `meta`), -EAGAIN when none waits, or another -errno.
  ssize_t recv(std::span<std::byte> buf, PacketMeta& meta);

 private:
  Gsi6Socket() = default;
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace sroce::daemon
