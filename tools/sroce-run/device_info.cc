#include "device_info.h"

#include <arpa/inet.h>
#include <endian.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "control.h"
#include "sroce_abi.h"

namespace sroce::run {

using provider::ControlChannel;
using provider::ReplyFds;

std::string query_daemon(const std::string& socket_path, DeviceInfo* out) {
  ControlChannel ch;
  ch.set_timeout_ms(5000);
  int err = ch.connect_to(socket_path);
  if (err != 0) return "cannot connect to " + socket_path + ": " + strerror(err);
  sroce_hello_resp hresp{};
  ReplyFds fds;  // closed when we return: this connection only asks questions
  err = ch.hello(&hresp, &fds);
  if (err != 0) return std::string("HELLO failed: ") + strerror(err);
  sroce_device_attr dev{};
  err = ch.call(SROCE_OP_QUERY_DEVICE, nullptr, 0, &dev, sizeof(dev));
  if (err != 0) return std::string("QUERY_DEVICE failed: ") + strerror(err);
  sroce_query_port qp{};
  qp.port_num = 1;
  sroce_port_attr port{};
  err = ch.call(SROCE_OP_QUERY_PORT, &qp, sizeof(qp), &port, sizeof(port));
  if (err != 0) return std::string("QUERY_PORT failed: ") + strerror(err);
  out->node_guid_be = dev.node_guid;
  out->sys_image_guid_be = dev.sys_image_guid;
  out->fw_ver = dev.fw_ver;
  out->port_state = port.state;
  out->active_mtu = port.active_mtu;
  out->active_width = port.active_width;
  out->active_speed = port.active_speed;
  out->gids.clear();
  for (uint32_t i = 0; i < port.gid_tbl_len; ++i) {
    sroce_query_gid q{};
    q.port_num = 1;
    q.index = i;
    sroce_gid_entry g{};
    std::array<uint8_t, 16> gid{};
    if (ch.call(SROCE_OP_QUERY_GID, &q, sizeof(q), &g, sizeof(g)) == 0)
      memcpy(gid.data(), g.gid, 16);
    out->gids.push_back(gid);  // an empty entry stays all-zero, as in the kernel's table
  }
  out->source = "sroced at " + socket_path;
  return "";
}

std::string query_netdev(const std::string& netdev, DeviceInfo* out) {
  if (if_nametoindex(netdev.c_str()) == 0) return "no interface named " + netdev;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + strerror(errno);
  ifreq ifr{};
  strncpy(ifr.ifr_name, netdev.c_str(), IFNAMSIZ - 1);
  uint8_t mac[6] = {};
  if (ioctl(fd, SIOCGIFHWADDR, &ifr) == 0) memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
  close(fd);
  // EUI-64 from the MAC: flip the universal/local bit, put ff:fe in the middle.
  uint8_t guid[8] = {
      static_cast<uint8_t>(mac[0] ^ 2), mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
  memcpy(&out->node_guid_be, guid, 8);
  out->sys_image_guid_be = out->node_guid_be;
  out->gids.clear();
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::string("getifaddrs: ") + strerror(errno);
  // IPv4 first, then IPv6 without link-local: the order sroced lists them in (docs/sroced.md).
  for (int family : {AF_INET, AF_INET6}) {
    for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != family) continue;
      if (netdev != a->ifa_name) continue;
      std::array<uint8_t, 16> gid{};
      if (family == AF_INET) {
        gid[10] = 0xff;
        gid[11] = 0xff;
        memcpy(&gid[12], &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, 4);
      } else {
        const in6_addr& a6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr;
        if (IN6_IS_ADDR_LINKLOCAL(&a6)) continue;
        memcpy(gid.data(), &a6, 16);
      }
      out->gids.push_back(gid);
    }
  }
  freeifaddrs(list);
  out->source = "interface " + netdev;
  return "";
}

void resolve_netdevs(DeviceInfo* info, const std::string& fallback) {
  info->gid_netdevs.assign(info->gids.size(), "");
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) list = nullptr;
  for (size_t i = 0; i < info->gids.size(); ++i) {
    const auto& gid = info->gids[i];
    bool zero = true;
    for (uint8_t b : gid) zero = zero && b == 0;
    if (zero) continue;
    // Only a name that exists here: libibverbs turns it into an ifindex and fails if it can't.
    std::string name = (!fallback.empty() && if_nametoindex(fallback.c_str()) != 0) ? fallback : "";
    const bool v4 = gid[10] == 0xff && gid[11] == 0xff &&
                    std::all_of(gid.begin(), gid.begin() + 10, [](uint8_t b) { return b == 0; });
    for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr) continue;
      const bool match =
          v4 ? a->ifa_addr->sa_family == AF_INET &&
                   memcmp(&reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, &gid[12], 4) == 0
             : a->ifa_addr->sa_family == AF_INET6 &&
                   memcmp(&reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, gid.data(), 16) == 0;
      if (match) {
        name = a->ifa_name;
        break;
      }
    }
    info->gid_netdevs[i] = name;
  }
  if (list != nullptr) freeifaddrs(list);
}

}  // namespace sroce::run
