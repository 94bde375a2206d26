// DPDK's Environment Abstraction Layer for sroced: the command line built
// from the [dpdk] configuration, initialisation, and a clean exit.
//
// Choices (docs/dpdk.md):
//  * no files: with --no-huge (the default here) memory is anonymous and
//    --no-shconf leaves out the shared configuration files; with hugepages,
//    --in-memory also unlinks each hugepage file as soon as it is mapped, so
//    nothing is left in hugetlbfs even after SIGKILL. --no-telemetry and a
//    per-process --file-prefix keep
//    several sroced (one per namespace or NIC) from meeting in /var/run/dpdk;
//    the empty runtime directory EAL still creates is removed at exit.
//  * one lcore: the engine is single-threaded, so the loop is the main
//    lcore. dpdk.lcores = "" keeps it unpinned (--lcores 0@(every CPU the
//    daemon may run on)); "N" pins it to CPU N.
//  * DPDK's log goes to stderr with sroced's own (not syslog), at the level
//    that matches log.level.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config.h"

namespace sroce::dpdk {

// Which virtual device the configuration asks for (dpdk.vdev).
enum class VdevKind { kAfXdp, kAfPacket, kOther, kNone };
VdevKind vdev_kind(const std::string& vdev);

// The --vdev argument: the shorthands expanded on `netdev`, else as given.
// `xdp_prog` is the steering program's path for af_xdp ("" = none).
std::string vdev_argument(const daemon::Config& cfg, const std::string& netdev, const std::string& xdp_prog);

// The whole EAL command line (argv[0] included). `cpus` is the daemon's CPU
// affinity as a list ("0,1"), used when dpdk.lcores is "".
std::vector<std::string> eal_arguments(const daemon::Config& cfg, const std::string& netdev,
                                       const std::string& xdp_prog, const std::string& file_prefix,
                                       const std::string& cpus);

// The af_xdp steering program: dpdk.xdp_prog when set, else the object built
// with sroced (build tree, then install path); "" when not found.
std::string default_xdp_prog();

// Removes the empty EAL runtime directories "<prefix><pid>" of processes
// that no longer exist (a sroced killed with SIGKILL leaves one).
void remove_stale_runtime_dirs(const std::string& prefix);

// rte_eal_init once per process (EAL cannot be initialised twice);
// rte_eal_cleanup and the runtime directory removed on destruction.
class Eal {
 public:
  static Result<std::unique_ptr<Eal>> init(std::vector<std::string> args);
  ~Eal();
  Eal(const Eal&) = delete;
  Eal& operator=(const Eal&) = delete;

 private:
  Eal() = default;
  std::vector<std::string> args_;  // EAL may keep pointers into argv
  std::vector<char*> argv_;
  std::string runtime_dir_;
};

}  // namespace sroce::dpdk
