// EAL command line, initialisation and clean-up (eal.h).
#include "eal.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>

namespace sroce::dpdk {

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// sroced's log.level -> DPDK's numeric level (RTE_LOG_*). At "info" sroced
// says what matters itself; EAL's notices (lcore counts, IOVA mode) are
// debug material.
int dpdk_log_level(const std::string& level) {
  if (level == "trace") return RTE_LOG_DEBUG;
  if (level == "debug") return RTE_LOG_INFO;
  if (level == "info" || level == "warn") return RTE_LOG_WARNING;
  if (level == "error") return RTE_LOG_ERR;
  return RTE_LOG_CRIT;
}

bool g_initialised = false;  // EAL cannot be initialised twice in one process

}  // namespace

// LeakSanitizer (the ASan test builds): the af_xdp PMD of DPDK 22.11 opens
// the XDP object with libbpf and never closes it, and libxdp keeps its UMEM
// bookkeeping; neither is ours to free. Everything else is still checked.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libbpf.so\nleak:libxdp.so\nleak:librte_net_af_xdp.so\n";
}

VdevKind vdev_kind(const std::string& vdev) {
  if (vdev.empty()) return VdevKind::kNone;
  if (vdev == "af_xdp" || starts_with(vdev, "net_af_xdp")) return VdevKind::kAfXdp;
  if (vdev == "af_packet" || starts_with(vdev, "net_af_packet")) return VdevKind::kAfPacket;
  return VdevKind::kOther;
}

std::string vdev_argument(const daemon::Config& cfg, const std::string& netdev, const std::string& xdp_prog) {
  const auto& d = cfg.dpdk;
  if (d.vdev == "af_xdp") {
    // busy_budget=0: no recvfrom() on every empty poll (the PMD's preferred
    // busy polling only helps a NIC in zero-copy mode; docs/dpdk.md).
    std::string v = fmt::format("net_af_xdp0,iface={},start_queue=0,queue_count={},busy_budget=0", netdev, d.queues);
    if (!xdp_prog.empty()) v += ",xdp_prog=" + xdp_prog;
    return v;
  }
  if (d.vdev == "af_packet") {
    // One 4 KiB frame per block: a RoCE MTU of 2048 plus headers fits, and
    // the ring has one frame per rx descriptor.
    return fmt::format("net_af_packet0,iface={},qpairs={},blocksz=4096,framesz=4096,framecnt={},qdisc_bypass=0",
                       netdev, d.queues, d.rx_desc);
  }
  return d.vdev;
}

std::vector<std::string> eal_arguments(const daemon::Config& cfg, const std::string& netdev,
                                       const std::string& xdp_prog, const std::string& file_prefix,
                                       const std::string& cpus) {
  const auto& d = cfg.dpdk;
  std::vector<std::string> a = {"sroced"};
  if (d.lcores.empty()) {
    a.insert(a.end(), {"--lcores", fmt::format("0@({})", cpus)});
  } else {
    a.insert(a.end(), {"-l", d.lcores});
  }
  // --no-huge: anonymous memory, nothing in hugetlbfs; it implies legacy
  // memory, which --in-memory refuses, so --no-shconf (what --in-memory
  // implies besides) says "no shared files". Hugepages: --in-memory.
  if (d.huge_pages) {
    a.push_back("--in-memory");
  } else {
    a.insert(a.end(), {"--no-huge", "--no-shconf"});
  }
  a.insert(a.end(), {"-m", std::to_string(d.memory_mb), "--no-telemetry", "--file-prefix",
                     file_prefix, "--log-level", std::to_string(dpdk_log_level(cfg.log.level))});
  if (!d.vdev.empty()) {
    a.push_back("--no-pci");  // a virtual device only: no PCI scan
    a.insert(a.end(), {"--vdev", vdev_argument(cfg, netdev, xdp_prog)});
  }
  a.insert(a.end(), d.eal_args.begin(), d.eal_args.end());
  return a;
}

std::string default_xdp_prog() {
  for (const char* p : {SROCE_XDP_PROG_BUILD, SROCE_XDP_PROG_INSTALL}) {
    if (access(p, R_OK) == 0) return p;
  }
  return {};
}

void remove_stale_runtime_dirs(const std::string& prefix) {
  // EAL's runtime directories of sroced processes that died without
  // cleaning up (SIGKILL): "<prefix><pid>" whose pid is gone. rmdir only
  // removes empty ones, which is all --no-shconf / --in-memory leave.
  const char* xdg = getenv("XDG_RUNTIME_DIR");
  std::string base = geteuid() == 0 ? "/var/run/dpdk" : std::string(xdg ? xdg : "/tmp") + "/dpdk";
  DIR* d = opendir(base.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    char* end = nullptr;
    long pid = strtol(name.c_str() + prefix.size(), &end, 10);
    if (pid <= 0 || *end != '\0' || (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH))
      rmdir((base + "/" + name).c_str());
  }
  closedir(d);
}

Result<std::unique_ptr<Eal>> Eal::init(std::vector<std::string> args) {
  if (g_initialised) return Error{EALREADY, "dpdk: EAL is already initialised in this process"};
  std::unique_ptr<Eal> e(new Eal);
  e->args_ = std::move(args);
  for (auto& s : e->args_) e->argv_.push_back(s.data());
  e->argv_.push_back(nullptr);
  // DPDK's messages go where sroced's go (stderr), not to syslog.
  rte_openlog_stream(stderr);
  // EAL starts its own threads (interrupts, ...). They must take no signal:
  // the daemon reads SIGTERM/SIGINT/SIGHUP from a signalfd, and a signal
  // delivered to a thread that has it unblocked would kill the process.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = rte_eal_init(static_cast<int>(e->argv_.size() - 1), e->argv_.data());
  int err = rte_errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc < 0 && rte_eal_get_runtime_dir()[0] != '\0') rmdir(rte_eal_get_runtime_dir());
  if (rc < 0)
    return Error{err ? err : EINVAL,
                 fmt::format("dpdk: rte_eal_init failed: {} (EAL arguments: {})", rte_strerror(err),
                             fmt::join(e->args_, " "))};
  g_initialised = true;
  e->runtime_dir_ = rte_eal_get_runtime_dir();
  return e;
}

Eal::~Eal() {
  rte_eal_cleanup();
  // --in-memory leaves no files, but EAL made the (empty) runtime directory.
  if (!runtime_dir_.empty()) rmdir(runtime_dir_.c_str());
}

}  // namespace sroce::dpdk
