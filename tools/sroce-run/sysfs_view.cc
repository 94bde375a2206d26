#include "sysfs_view.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

namespace sroce::run {
namespace {

struct Writer {
  std::string error;

  void dir(const std::string& path) {
    if (!error.empty()) return;
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
      error = "mkdir " + path + ": " + strerror(errno);
  }

  void file(const std::string& path, const std::string& text) {
    if (!error.empty()) return;
    FILE* f = fopen(path.c_str(), "we");
    if (f == nullptr) {
      error = "create " + path + ": " + strerror(errno);
      return;
    }
    // sysfs attributes end in a newline; libibverbs strips it.
    bool ok = fwrite(text.data(), 1, text.size(), f) == text.size() && fputc('\n', f) != EOF;
    if (fclose(f) != 0 || !ok) error = "write " + path + ": " + strerror(errno);
  }
};

// IBA ch. 14 PortInfo: LinkWidthActive / LinkSpeedActive to "N Gb/sec (WX SPEED)".
std::string rate_text(uint8_t width, uint8_t speed) {
  int lanes = width == 1 ? 1 : width == 2 ? 4 : width == 4 ? 8 : width == 8 ? 12 : 1;
  struct Speed {
    uint8_t code;
    double gbps;
    const char* name;
  };
  static constexpr Speed kSpeeds[] = {{1, 2.5, "SDR"},  {2, 5, "DDR"},    {4, 10, "QDR"},
                                      {8, 10, "FDR10"}, {16, 14, "FDR"},  {32, 25, "EDR"},
                                      {64, 50, "HDR"},  {128, 100, "NDR"}};
  for (const Speed& s : kSpeeds) {
    if (s.code == speed) {
      char buf[64];
      snprintf(buf, sizeof(buf), "%g Gb/sec (%dX %s)", s.gbps * lanes, lanes, s.name);
      return buf;
    }
  }
  return "10 Gb/sec (4X QDR)";
}

const char* state_text(uint32_t state) {
  switch (state) {
    case 1:
      return "1: DOWN";
    case 2:
      return "2: INIT";
    case 3:
      return "3: ARMED";
    case 4:
      return "4: ACTIVE";
    case 5:
      return "5: ACTIVE_DEFER";
    default:
      return "0: NOP";
  }
}

}  // namespace

std::string format_gid(const uint8_t gid[16]) {
  char buf[48];
  snprintf(buf, sizeof(buf),
           "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", gid[0],
           gid[1], gid[2], gid[3], gid[4], gid[5], gid[6], gid[7], gid[8], gid[9], gid[10], gid[11],
           gid[12], gid[13], gid[14], gid[15]);
  return buf;
}

std::string format_guid(uint64_t guid_be) {
  uint64_t g = be64toh(guid_be);
  char buf[24];
  snprintf(buf, sizeof(buf), "%04x:%04x:%04x:%04x", unsigned(g >> 48) & 0xffff,
           unsigned(g >> 32) & 0xffff, unsigned(g >> 16) & 0xffff, unsigned(g) & 0xffff);
  return buf;
}

std::string write_sysfs_view(const std::string& root, const SysfsNames& names,
                             const DeviceInfo& info) {
  Writer w;
  const std::string cls = root + "/class";
  const std::string verbs = cls + "/infiniband_verbs";
  const std::string uv = verbs + "/" + names.uverbs;
  const std::string ib = cls + "/infiniband";
  const std::string dev = ib + "/" + names.ibdev;
  const std::string port = dev + "/ports/1";

  for (const std::string& d :
       {cls, verbs, uv, ib, dev, dev + "/ports", port, port + "/gids", port + "/gid_attrs",
        port + "/gid_attrs/types", port + "/gid_attrs/ndevs", port + "/pkeys"})
    w.dir(d);
  // IB_USER_VERBS_ABI_VERSION of the kernel's uverbs (libibverbs 44 accepts 6 only).
  w.file(verbs + "/abi_version", "6");
  w.file(uv + "/ibdev", names.ibdev);
  w.file(uv + "/dev", std::to_string(major(names.cdev)) + ":" + std::to_string(minor(names.cdev)));
  w.file(uv + "/abi_version", "1");  // the provider ABI, matched by libsroce's device ops

  w.file(dev + "/node_type", "1: CA");  // RoCE devices are channel adapters (IBA ch. 17)
  w.file(dev + "/node_guid", format_guid(info.node_guid_be));
  w.file(dev + "/sys_image_guid", format_guid(info.sys_image_guid_be));
  char fw[40];
  snprintf(fw, sizeof(fw), "%u.%u.%u", unsigned(info.fw_ver >> 32) & 0xffff,
           unsigned(info.fw_ver >> 16) & 0xffff, unsigned(info.fw_ver) & 0xffff);
  w.file(dev + "/fw_ver", fw);
  w.file(dev + "/node_desc", "sroce " + names.ibdev);
  w.file(dev + "/hca_type", "sroce");
  w.file(dev + "/hw_rev", "0");
  w.file(dev + "/board_id", "sroce software RoCEv2 (" + info.source + ")");

  w.file(port + "/state", state_text(info.port_state));
  w.file(port + "/phys_state", info.port_state == 4 ? "5: LinkUp" : "3: Disabled");
  w.file(port + "/link_layer", "Ethernet");
  w.file(port + "/rate", rate_text(info.active_width, info.active_speed));
  w.file(port + "/lid", "0x0");
  w.file(port + "/sm_lid", "0x0");
  w.file(port + "/sm_sl", "0");
  w.file(port + "/lid_mask_count", "0");
  w.file(port + "/cap_mask", "0x00010000");
  w.file(port + "/pkeys/0", "0xffff");  // the default partition (IBA 10.9, partitioning)
  for (size_t i = 0; i < info.gids.size(); ++i) {
    const std::string n = std::to_string(i);
    w.file(port + "/gids/" + n, format_gid(info.gids[i].data()));
    w.file(port + "/gid_attrs/types/" + n, "RoCE v2");
    // No file when the interface is unknown: libibverbs then reports ifindex 0, while an
    // empty or stale name would make the whole GID query fail.
    if (i < info.gid_netdevs.size() && !info.gid_netdevs[i].empty())
      w.file(port + "/gid_attrs/ndevs/" + n, info.gid_netdevs[i]);
  }
  return w.error;
}

}  // namespace sroce::run
