// The private mount namespace sroce-run gives the program: a tmpfs on /dev/infiniband holding
// the device node and the generated sysfs view, invisible to every other process and gone
// with the last process of the namespace.
#pragma once

#include <sys/types.h>

#include <string>

namespace sroce::run {

struct NamespaceResult {
  std::string error;       // "" on success
  std::string sysfs_root;  // where to point SYSFS_PATH
  dev_t cdev = 0;          // numbers of the device node created
};

// Enters a new mount namespace (and, without CAP_SYS_ADMIN, a user namespace first), makes
// every mount private, and prepares /dev/infiniband/<uverbs> and the empty sysfs root.
// `verbose` prints each step on stderr.
NamespaceResult enter_namespace(const std::string& uverbs, bool verbose);

}  // namespace sroce::run
