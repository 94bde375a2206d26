// What sroce-run needs to know about a device to describe it to libibverbs: asked of the
// daemon when it runs (so that GID indices mean the same thing to the app and to sroced), or
// read off a network interface when only discovery is wanted.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace sroce::run {

struct DeviceInfo {
  uint64_t node_guid_be = 0;  // as struct ibv_device_attr carries it (big-endian)
  uint64_t sys_image_guid_be = 0;
  uint64_t fw_ver = 0;
  uint32_t port_state = 4;  // IBV_PORT_ACTIVE
  uint32_t active_mtu = 5;  // IBV_MTU_4096
  uint8_t active_width = 2;
  uint8_t active_speed = 32;
  std::vector<std::array<uint8_t, 16>> gids;  // RoCE v2, IPv4-mapped
  std::vector<std::string> gid_netdevs;       // interface of each GID ("" if unknown)
  std::string source;                         // "sroced at PATH" or "interface IFACE"
};

// Asks sroced on `socket_path`. Returns "" or what went wrong.
std::string query_daemon(const std::string& socket_path, DeviceInfo* out);

// Builds the view from interface `netdev`: one GID per IPv4 address, the GUID from its MAC
// (EUI-64, as Linux rxe does). Returns "" or what went wrong.
std::string query_netdev(const std::string& netdev, DeviceInfo* out);

// Fills gid_netdevs by finding the interface that holds each GID's IPv4 address; `fallback`
// names those not found (may be "").
void resolve_netdevs(DeviceInfo* info, const std::string& fallback);

}  // namespace sroce::run
