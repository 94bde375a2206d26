// The DPDK poll-mode datapath for sroced (docs/dpdk.md): the daemon's
// Datapath interface (userspace/daemon/src/datapath.h) over a DPDK ethdev
// port, selected with datapath.kind = "dpdk" and configured by [dpdk].
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "config.h"
#include "datapath.h"

namespace sroce::dpdk {

// Initialises EAL (once per process), the port, its queues and the mbuf
// pool, and starts the neighbour resolver. `netdev` is the daemon's
// interface (the af_xdp / af_packet shorthands attach to it); `local_addrs`
// are the host-order IPv4 addresses the daemon serves (its GIDs), `local_addrs6` its IPv6 ones.
Result<std::unique_ptr<daemon::Datapath>> create_datapath(const daemon::Config& cfg, const std::string& netdev,
                                                          std::span<const uint32_t> local_addrs,
                                                          std::span<const Gid> local_addrs6 = {});

}  // namespace sroce::dpdk
