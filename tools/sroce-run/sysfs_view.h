// The generated sysfs view libibverbs 44 reads (through SYSFS_PATH) to find a device, and
// later to answer GID and P_Key queries. Files, as libibverbs' sysfs.c/init.c/cmd_device.c
// read them:
//   class/infiniband_verbs/abi_version          uverbs ABI, 6
//   class/infiniband_verbs/<uverbs>/{ibdev,dev,abi_version}
//   class/infiniband/<dev>/{node_type,node_guid,sys_image_guid,fw_ver,node_desc,board_id,...}
//   class/infiniband/<dev>/ports/1/{state,phys_state,link_layer,rate,lid,sm_lid,cap_mask,
//                                   gids/N,gid_attrs/types/N,gid_attrs/ndevs/N,pkeys/0}
#pragma once

#include <sys/types.h>

#include <string>

#include "device_info.h"

namespace sroce::run {

struct SysfsNames {
  std::string ibdev = "sroce0";
  std::string uverbs = "uverbs0";
  dev_t cdev = 0;  // the numbers of the node at /dev/infiniband/<uverbs>
};

// Writes the view under `root` (which must exist). Returns "" or what went wrong.
std::string write_sysfs_view(const std::string& root, const SysfsNames& names,
                             const DeviceInfo& info);

// "0000:0000:0000:ffff:..." as the kernel prints a GID; "xxxx:xxxx:xxxx:xxxx" for a GUID.
std::string format_gid(const uint8_t gid[16]);
std::string format_guid(uint64_t guid_be);

}  // namespace sroce::run
