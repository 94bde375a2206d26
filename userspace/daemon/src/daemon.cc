// sroced setup and the datapath loop.
#include "daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "proto/roce.h"
#include "udp_datapath.h"
#ifdef SROCE_HAVE_DPDK
#include "sroce/dpdk/dpdk_datapath.h"
#endif

namespace sroce::daemon {

namespace {

// The kernel's struct sched_attr, SCHED_ATTR_SIZE_VER0 (include/uapi/linux/sched/types.h; glibc
// 2.36 declares neither it nor sched_setattr, and the uapi header clashes with <sched.h>).
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;  // SCHED_OTHER (Linux 6.12+): the task's slice, ns
  uint64_t sched_deadline;
  uint64_t sched_period;
};
static_assert(sizeof(SchedAttr) == 48);

// The loop's slice as a normal task (datapath.slice_us), 0 if FIFO or unknown.
uint64_t slice_us() {
  SchedAttr sa{};
  if (syscall(SYS_sched_getattr, 0, &sa, sizeof sa, 0) != 0 || sa.sched_policy != SCHED_OTHER) return 0;
  return sa.sched_runtime / 1000;
}

constexpr uint64_t kKeyListen = 0xffff'ffff'0000'0001ull;
constexpr uint64_t kKeySignal = 0xffff'ffff'0000'0002ull;
constexpr uint64_t kKeyDatapath = 0xffff'ffff'0000'0003ull;

std::string gid_str(const Gid& g) {
  char b[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, g.raw, b, sizeof b);
  return b;
}

std::string ipv4_str(uint32_t host_order) {
  in_addr a{htonl(host_order)};
  char b[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, b, sizeof b);
  return b;
}

uint32_t netdev_mtu(const std::string& dev) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq ifr{};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", dev.c_str());
  uint32_t mtu = 1500;
  if (fd >= 0 && ioctl(fd, SIOCGIFMTU, &ifr) == 0) mtu = static_cast<uint32_t>(ifr.ifr_mtu);
  if (fd >= 0) close(fd);
  return mtu;
}

// The node GUID, as the bytes ibv_devinfo shows (big-endian in the uint64): EUI-64 from the
// netdev's MAC (flip the universal/local bit, ff:fe in the middle), as rxe and RoCE NICs
// derive theirs, so a host with IPv6 addresses only has one too. Without a MAC (loopback,
// device.addresses without a netdev): a locally administered EUI-64 built from the first
// address, IPv4 before IPv6 (the bytes sroced used before the MAC rule, for IPv4).
uint64_t node_guid_be(const std::string& netdev, std::span<const uint32_t> v4, std::span<const Gid> v6) {
  uint8_t mac[6] = {};
  if (!netdev.empty()) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", netdev.c_str());
    if (fd >= 0 && ioctl(fd, SIOCGIFHWADDR, &ifr) == 0) memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
    if (fd >= 0) close(fd);
  }
  uint8_t g[8] = {};
  if (std::any_of(std::begin(mac), std::end(mac), [](uint8_t b) { return b != 0; })) {
    const uint8_t e[8] = {static_cast<uint8_t>(mac[0] ^ 2), mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
    memcpy(g, e, 8);
  } else {
    uint32_t a = 0;
    if (!v4.empty()) {
      a = v4[0];
    } else if (!v6.empty()) {
      for (int i = 0; i < 16; ++i) a = a * 0x01000193u ^ v6[0].raw[i];  // FNV-1a-like fold of the 128 bits
    }
    const uint8_t e[8] = {0xfe, static_cast<uint8_t>(a), static_cast<uint8_t>(a >> 8), static_cast<uint8_t>(a >> 16),
                          static_cast<uint8_t>(a >> 24), 0, 0, 0x02};
    memcpy(g, e, 8);
  }
  uint64_t out;
  memcpy(&out, g, 8);
  return out;
}

}  // namespace

Daemon::Daemon(Config cfg) : cfg_(std::move(cfg)) {}

Daemon::~Daemon() {
  svc_.reset();
  dp_.reset();
  engine_.reset();
  if (sigfd_ >= 0) close(sigfd_);
  if (epfd_ >= 0) close(epfd_);
  if (loadavg_fd_ >= 0) close(loadavg_fd_);
}

Time Daemon::now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return Time{(int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec) * 1000};
}

void Daemon::watch(int fd, uint64_t key) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = key;
  epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev);
}

void Daemon::unwatch(int fd) { epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr); }

Result<void> Daemon::start() {
  // GIDs: the configured addresses, else every IPv4 address of the netdev
  // (one RoCE v2 GID each, IPv4-mapped), else of the first interface that is
  // up, not loopback and has one; then, with device.ipv6, that interface's
  // IPv6 addresses except link-local ones (a link-local GID needs the
  // interface as scope to be reached; Linux lists it for RoCE v1 use mostly).
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return Error{errno, fmt::format("getifaddrs: {}", strerror(errno))};
  if (cfg_.device.addresses.empty()) {
    std::string dev = cfg_.device.netdev;
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      if (dev.empty() && (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))) continue;
      if (!dev.empty() && dev != i->ifa_name) continue;
      if (dev.empty()) dev = i->ifa_name;
      addrs_.push_back(ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr));
    }
    netdev_ = dev;
  } else {
    for (const auto& s : cfg_.device.addresses) {
      in_addr a{};
      inet_pton(AF_INET, s.c_str(), &a);
      addrs_.push_back(ntohl(a.s_addr));
    }
    netdev_ = cfg_.device.netdev;
  }
  if (cfg_.device.ipv6 && netdev_.empty() && cfg_.device.addresses.empty()) {
    // No interface with IPv4: the first one that is up, not loopback and has a global IPv6 address.
    for (ifaddrs* i = ifs; i && netdev_.empty(); i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6) continue;
      if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
      const auto* a6 = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      if (!IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) netdev_ = i->ifa_name;
    }
  }
  if (cfg_.device.ipv6 && !netdev_.empty()) {
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6 || netdev_ != i->ifa_name) continue;
      const auto* a6 = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr) || IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) continue;
      Gid g;
      memcpy(g.raw, &a6->sin6_addr, 16);
      addrs6_.push_back(g);
    }
  }
  freeifaddrs(ifs);
  // A host with IPv6 addresses only serves them (GID 0 is then the first IPv6 address).
  if (addrs_.empty() && addrs6_.empty()) {
    const char* what = cfg_.device.ipv6 ? "an IPv4 or a non-link-local IPv6 address" : "an IPv4 address";
    if (cfg_.device.netdev.empty())
      return Error{ENODEV, fmt::format("no interface is up with {} (set device.netdev or device.addresses)", what)};
    return Error{ENODEV, fmt::format("device.netdev: interface \"{}\" has no {}", cfg_.device.netdev, what)};
  }
  for (uint32_t a : addrs_) gids_.push_back(Gid::from_ipv4(a));
  for (const Gid& g : addrs6_) gids_.push_back(g);
  if (!netdev_.empty()) mtu_ = netdev_mtu(netdev_);

  // The datapath first: it may carry less than the interface MTU (the DPDK
  // backend's mbufs), and the engine's port MTU must respect that.
  if (cfg_.datapath.kind == "dpdk") {
#ifdef SROCE_HAVE_DPDK
    auto dp = dpdk::create_datapath(cfg_, netdev_, addrs_, addrs6_);
    if (!dp) return dp.error();
    dp_ = std::move(*dp);
#else
    return Error{EINVAL, "datapath.kind: \"dpdk\" is not built into this sroced (docs/dpdk.md)"};
#endif
  } else {
    auto dp = UdpDatapath::create(cfg_.datapath, addrs_, addrs6_);
    if (!dp) return dp.error();
    dp_ = std::move(*dp);
  }
  rx_.resize(cfg_.datapath.batch);
  const uint32_t dp_limit = dp_->mtu_limit();
  if (dp_limit != 0 && dp_limit < mtu_) mtu_ = dp_limit;

  // docs/security.md, "Keys": random keys unless engine.seed asks for the
  // reproducible test mode (then `sroce status` says so).
  random_ = std::make_unique<GetrandomSource>();
  const bool seeded = cfg_.engine.seed != 0;
  const uint64_t seed = seeded ? cfg_.engine.seed : (random_->next64() | 1);
  if (seeded)
    spdlog::warn("sroced: engine.seed is set: keys and QPNs are predictable (a test mode; unset it in production)");
  EngineConfig ec;
  ec.random = seeded ? nullptr : random_.get();
  ec.gids = gids_;
  ec.max_qps = cfg_.engine.max_qps;
  ec.max_cqs = cfg_.engine.max_cqs;
  ec.max_mrs = cfg_.engine.max_mrs;
  ec.max_pds = cfg_.engine.max_pds;
  ec.max_srqs = cfg_.engine.max_srqs;
  ec.max_ahs = cfg_.engine.max_ahs;
  ec.max_cqe = cfg_.engine.max_cqe;
  ec.max_qp_wr = cfg_.engine.max_qp_wr;
  ec.max_sge = cfg_.engine.max_sge;
  ec.max_inline_data = cfg_.engine.max_inline_data;
  ec.max_rd_atomic = cfg_.engine.max_rd_atomic;
  ec.seed = seed;
  ec.lossy.enable = cfg_.engine.lossy;
  if (cfg_.engine.lanes != 0) ec.lossy.lanes = static_cast<uint16_t>(cfg_.engine.lanes);
  ec.lossy.train_bytes = cfg_.engine.lane_train_bytes;
  apply_cc_config(cfg_, ec);  // [engine.cc]
  ec.lossy.lane_weights = cfg_.engine.lane_weights;
  ec.lossy.reorder_timeout_max =
      Duration::micros(static_cast<int64_t>(cfg_.engine.reorder_timeout_max_us));
  const uint32_t overhead = 72 + (ec.lossy.enable ? SROCE_LEH_LEN : 0);
  if (dp_limit != 0) {
    // The largest IB MTU whose packets fit (the rule of QUERY_PORT's
    // active_mtu, service_control.cc), so UD messages and path MTUs stay
    // within what the datapath's buffers hold.
    ec.port_mtu = Mtu::k256;
    for (Mtu m : {Mtu::k4096, Mtu::k2048, Mtu::k1024, Mtu::k512}) {
      if (mtu_bytes(m) + overhead <= mtu_) {
        ec.port_mtu = m;
        break;
      }
    }
  }
  mem_ = std::make_unique<ProcessMemory>(cfg_.control.max_contexts, cfg_.datapath.memory_batching);
  engine_ = std::make_unique<Engine>(ec, *mem_);

  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) return Error{errno, fmt::format("epoll_create1: {}", strerror(errno))};
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  sigfd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigfd_ < 0) return Error{errno, fmt::format("signalfd: {}", strerror(errno))};
  watch(sigfd_, kKeySignal);
  watch(dp_->wait_fd(), kKeyDatapath);

  ServiceEnv env;
  env.engine = engine_.get();
  env.memory = mem_.get();
  env.config = &cfg_;
  env.gids = gids_;
  env.netdev_mtu = mtu_;
  env.extra_header_bytes = cfg_.engine.lossy ? SROCE_LEH_LEN : 0;
  env.netdev = netdev_;
  env.datapath_ipv6 = !addrs6_.empty();
  env.node_guid = node_guid_be(netdev_, addrs_, addrs6_);
  env.watch = [this](int fd, uint64_t k) { watch(fd, k); };
  env.unwatch = [this](int fd) { unwatch(fd); };
  env.stats_json = [this](uint32_t what, uid_t viewer) { return stats_json(what, viewer); };
  env.listen_interest = [this](bool on) {
    if (on) {
      watch(svc_->listen_fd(), kKeyListen);
    } else {
      unwatch(svc_->listen_fd());
    }
  };
  svc_ = std::make_unique<Service>(std::move(env));
  auto l = svc_->listen();
  if (!l) return l;
  watch(svc_->listen_fd(), kKeyListen);
  // The kernel path (docs/kmod.md): with rdma_sroce.ko's device registered,
  // serve its programs too.
  if (cfg_.device.kernel == "on" ||
      (cfg_.device.kernel == "auto" && KernelChannel::available(cfg_.device.name))) {
    auto k = svc_->attach_kernel(cfg_.device.name);
    if (!k && cfg_.device.kernel == "on") return k;
    if (!k) spdlog::warn("sroced: kernel path not used: {}", k.error().message);
  }

  // The adaptive spin's look at the run queues (crowded()); without it the loop spins as asked.
  loadavg_fd_ = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  ncpus_ = static_cast<unsigned>(std::max(1, get_nprocs()));
  if (uint32_t prio = cfg_.datapath.realtime_priority; prio > 0) {
    // The loop thread is the only thread: the whole process becomes SCHED_FIFO.
    // Last of the set-up, so nothing slow (netlink, io_uring set-up) runs at that
    // priority, and refused loudly: a user who asked for it measures with it.
    sched_param sp{};
    sp.sched_priority = static_cast<int>(prio);
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
      return Error{errno, fmt::format("datapath.realtime_priority = {}: sched_setscheduler(SCHED_FIFO): {}{}", prio,
                                      strerror(errno), errno == EPERM ? " (needs CAP_SYS_NICE or an RLIMIT_RTPRIO)" : "")};
    if (cfg_.datapath.busy_poll_us > 10)
      spdlog::warn("sroced: SCHED_FIFO with datapath.busy_poll_us = {}: a real-time loop that spins keeps the "
                   "programs it serves off its core; 0..5 suits it",
                   cfg_.datapath.busy_poll_us);
  } else if (uint32_t us = cfg_.datapath.slice_us; us > 0) {
    // EEVDF (Linux 6.12+): a task asking for a slice shorter than the one running
    // preempts it on wake-up, and its share stays the fair one. Only the slice
    // changes: policy and nice stay as started (nice, systemd's Nice=). A default,
    // so a kernel that refuses it costs a warning, not the start.
    SchedAttr sa{};
    int rc = static_cast<int>(syscall(SYS_sched_getattr, 0, &sa, sizeof sa, 0));
    sa.size = sizeof sa;
    sa.sched_flags = 0;
    sa.sched_runtime = uint64_t{us} * 1000;
    if (rc == 0) rc = static_cast<int>(syscall(SYS_sched_setattr, 0, &sa, 0));
    if (rc != 0)
      spdlog::warn("sroced: datapath.slice_us = {}: sched_setattr: {}; the kernel's slice is used", us,
                   strerror(errno));
  }
  std::vector<std::string> a;
  for (uint32_t x : addrs_) a.push_back(ipv4_str(x));
  for (const Gid& g : addrs6_) a.push_back(gid_str(g));
  spdlog::info("sroced: device {} on {} (mtu {}), GIDs [{}], udp port {}, socket {}", cfg_.device.name,
               netdev_.empty() ? "-" : netdev_, mtu_, fmt::join(a, ", "), cfg_.datapath.port, cfg_.socket_path());
  started_ = now();
  return {};
}

// Handles ready fds; returns true if any were ready. timeout_ns < 0 blocks.
bool Daemon::handle_events(int timeout_ns) {
  epoll_event evs[32];
  timespec ts{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
  int n = epoll_pwait2(epfd_, evs, 32, timeout_ns < 0 ? nullptr : &ts, nullptr);
  if (n <= 0) return false;
  Time t = now();
  for (int i = 0; i < n; ++i) {
    uint64_t k = evs[i].data.u64;
    if (k == kKeySignal) {
      signalfd_siginfo si;
      while (read(sigfd_, &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGHUP) {
          spdlog::info("SIGHUP: configuration reload is not supported; restart sroced to apply changes");
        } else {
          spdlog::info("signal {}: shutting down", si.ssi_signo);
          stop_.store(true);
        }
      }
    } else if (k == kKeyDatapath) {
      uint64_t v;
      while (read(dp_->wait_fd(), &v, sizeof v) == sizeof v) {
      }
    } else if (k == kKeyListen) {
      svc_->on_listen_ready(t);
    } else {
      if ((k >> 32) == Service::kKeyDoorbell) ++loop_.wakeups_doorbell;
      svc_->on_fd_ready(k, evs[i].events, t);
    }
  }
  return true;
}

bool Daemon::pass(Time t) {
  // Read-ahead windows (memory.h) live within one phase: applications may have written
  // memory since the last pass, and new work requests name buffers written just before.
  mem_->forget_windows();
  bool work = dp_->poll();
  // Receives drained before the timers: an ACK already waiting behind a full
  // burst (or behind every posted receive) must cancel its retransmit timer
  // before that timer is looked at. Bounded, so timers and transmits still run
  // under a flood.
  size_t n = 0;
  uint32_t bursts = 0;
  while (bursts < kRxDrainBursts) {
    const size_t got = dp_->rx_burst(rx_);
    for (size_t i = 0; i < got; ++i) {
      // QP1 of the kernel path is the module's (gsi.h), every other QP the engine's.
      if (!svc_->on_gsi_packet(rx_[i].payload, rx_[i].meta))
        engine_->on_packet(rx_[i].payload, rx_[i].meta, t);
    }
    n += got;
    if (got == 0) break;
    ++bursts;
    if (got < rx_.size() && !dp_->rx_more()) break;
  }
  if (bursts > 1) ++loop_.rx_drains;
  // Received data in place before anything acknowledges or completes it (memory.h).
  mem_->flush_writes();
  // Completions the packets produced go to the rings now, not after this pass's
  // transmits: a program spinning on its CQ (ib_send_lat) would otherwise wait
  // for the ACKs' send system call and the peer's softirq work it runs inline.
  if (n > 0) work |= svc_->poll_completions();
  work |= n > 0;
  work |= svc_->poll_rings(t);
  mem_->forget_windows();
  if (engine_->next_deadline() <= t) {
    engine_->on_timer(t);
    ++loop_.timer_runs;
  }
  if (svc_->next_deadline() <= t) svc_->on_timer(t);  // HELLO timeouts, accept pause (uid_limits.h)
  log_naks(t);
  for (uint32_t i = 0; i < cfg_.datapath.batch; ++i) {
    auto buf = dp_->tx_buffer();
    if (buf.empty()) break;
    auto p = svc_->poll_gsi_transmit(buf, t);  // MADs first: few, and rdma_cm waits on them
    if (!p) p = engine_->poll_transmit(buf, t);
    if (!p) break;
    dp_->tx_commit(p->len, p->meta);
    work = true;
  }
  dp_->tx_flush();
  mem_->flush_writes();  // timers or transmits may have written (READ responses are rx)
  work |= svc_->poll_completions();
  return work;
}

// More tasks runnable right now than this host has CPUs (/proc/loadavg's
// fourth field counts the running and runnable ones, the caller among them).
bool Daemon::crowded() {
  char buf[128];
  ssize_t n = loadavg_fd_ >= 0 ? pread(loadavg_fd_, buf, sizeof buf - 1, 0) : -1;
  if (n <= 0) return false;
  buf[n] = '\0';
  unsigned running = 0;
  if (sscanf(buf, "%*s %*s %*s %u/", &running) != 1) return false;
  return running > ncpus_;
}

int Daemon::run() {
  const int64_t busy_ps = int64_t{cfg_.datapath.busy_poll_us} * 1'000'000;
  const bool poll_mode = dp_->poll_mode();
  Time last_work = now();
  while (!stop_.load(std::memory_order_relaxed)) {
    Time t = now();
    ++loop_.passes;
    bool work = pass(t);
    // Control sockets and doorbells: a non-blocking look when the pass was
    // idle, and every 16th busy pass (rings are polled every pass anyway,
    // so doorbells matter only to a sleeping loop).
    // A poll-mode datapath makes idle passes of a few hundred nanoseconds:
    // there, every 64th pass is often enough (rings are polled every pass).
    if ((!work && !poll_mode) || (loop_.passes & (poll_mode ? 63 : 15)) == 0) work |= handle_events(0);
    if (work) {
      spin_.on_work();
      last_work = t;
      continue;
    }
    // A poll-mode datapath spins the whole budget (dpdk.sleep_poll_us decides
    // how it sleeps); the socket path's spin adapts (spin.h).
    if (poll_mode ? (t - last_work).ps < busy_ps : spin_.keep_spinning(t - last_work, [this] { return crowded(); }))
      continue;
    // A backend that polls (DPDK) says here whether to keep spinning, before
    // the rings are told the loop sleeps.
    if (dp_->has_pending()) {
      last_work = t;
      continue;
    }
    // Idle: sleep until a doorbell, a socket, a datapath completion or the
    // engine's next deadline.
    if (svc_->prepare_sleep(t) || dp_->has_pending()) {
      svc_->after_sleep();
      last_work = t;
      continue;
    }
    Time deadline = std::min(engine_->next_deadline(), svc_->next_deadline());
    int timeout_ns = -1;
    if (deadline != Time::never()) {
      int64_t d = (deadline - now()).ps / 1000;
      timeout_ns = static_cast<int>(std::clamp<int64_t>(d, 0, 1'000'000'000));
    }
    ++loop_.sleeps;
    const Time slept_at = now();
    if (handle_events(timeout_ns)) last_work = now();
    spin_.on_wake(now() - slept_at);
    svc_->after_sleep();
  }
  svc_->shutdown();
  spdlog::info("sroced: stopped");
  return 0;
}

void Daemon::log_naks(Time t) {
  const auto& e = engine_->stats();
  // PSN sequence NAKs are loss recovery of compatible mode, not faults: they do not trigger it.
  uint64_t faults = 0;
  for (int k = kNakInvalidRequest; k < kNakCodes; ++k)
    faults += e.naks_sent_by_code[k] + e.naks_received_by_code[k];
  if (faults == nak_faults_seen_) return;
  if (nak_log_at_ != Time::never() && t - nak_log_at_ < kNakLogInterval && t >= nak_log_at_) return;
  std::string what;
  for (int k = kNakInvalidRequest; k < kNakCodes; ++k) {
    const uint64_t s = e.naks_sent_by_code[k] - nak_logged_sent_[k];
    const uint64_t r = e.naks_received_by_code[k] - nak_logged_received_[k];
    if (s + r == 0) continue;
    what += fmt::format("{}{} sent {} received {}", what.empty() ? "" : ", ",
                        to_string(static_cast<NakCode>(k)), s, r);
  }
  spdlog::warn(
      "engine: NAKs since the last report: {} (sent: a peer's requests refused here; "
      "received: this host's requests refused by a peer; engine.naks_by_code in sroce "
      "status --json)",
      what);
  nak_log_at_ = t;
  nak_faults_seen_ = faults;
  for (int k = 0; k < kNakCodes; ++k) {
    nak_logged_sent_[k] = e.naks_sent_by_code[k];
    nak_logged_received_[k] = e.naks_received_by_code[k];
  }
}

std::string Daemon::stats_json(uint32_t, uid_t viewer) const {
  using nlohmann::json;
  const auto& d = dp_->stats();
  const auto& e = engine_->stats();
  const auto& s = svc_->stats();
  const auto& m = mem_->stats();
  auto oc = svc_->object_counts(viewer);
  const auto& lim = svc_->limit_stats();
  json drops = json::object();  // engine drops by reason (nonzero only)
  for (int r = 1; r < kRxDropCount; ++r)
    if (e.rx_drop_reason[r] != 0) drops[to_string(static_cast<RxDropReason>(r))] = e.rx_drop_reason[r];
  json naks = json::object();  // NAKs other than RNR by code, sent and received
  for (int k = 0; k < kNakCodes; ++k)
    naks[to_string(static_cast<NakCode>(k))] = {{"sent", e.naks_sent_by_code[k]},
                                                {"received", e.naks_received_by_code[k]}};
  json gids = json::array();
  for (uint32_t a : addrs_) gids.push_back(ipv4_str(a));
  for (const Gid& g : addrs6_) gids.push_back(gid_str(g));
  json dp_extra = json::object();
  if (std::string x = dp_->stats_json(); !x.empty()) dp_extra = json::parse(x);
  json lanes = json::array();
  for (const auto& p : dp_->port_stats())
    lanes.push_back({{"sport", p.port},
                     {"local", p.local.is_ipv4() ? ipv4_str(p.local.ipv4()) : gid_str(p.local)},
                     {"tx_packets", p.tx_packets},
                     {"tx_bytes", p.tx_bytes},
                     {"tx_sends", p.tx_sends}});
  json j = {
      {"device", cfg_.device.name},
      {"netdev", netdev_},
      {"mtu", mtu_},
      {"gids", gids},
      {"udp_port", cfg_.datapath.port},
      {"socket", cfg_.socket_path()},
      {"pid", getpid()},
      {"sched", sched_getscheduler(0) == SCHED_FIFO ? "fifo" : "other"},
      {"sched_slice_us", slice_us()},
      {"keys", cfg_.engine.seed != 0 ? "predictable (test mode engine.seed)" : "random (getrandom)"},
      {"uptime_s", static_cast<double>((now() - started_).ps) / 1e12},
      {"objects",
       {{"pds", oc.pds},
        {"mrs", oc.mrs},
        {"cqs", oc.cqs},
        {"qps", oc.qps},
        {"srqs", oc.srqs},
        {"ahs", oc.ahs},
        {"channels", oc.channels},
        {"total", oc.total()}}},
      {"contexts", json::parse(svc_->contexts_json(viewer))},
      {"limits",
       {{"contexts_per_uid", cfg_.limits.contexts_per_uid},
        {"qps_per_uid", cfg_.limits.qps_per_uid},
        {"mrs_per_uid", cfg_.limits.mrs_per_uid},
        {"mr_bytes_per_uid", cfg_.limits.mr_bytes_per_uid},
        {"ring_fds_per_uid", cfg_.limits.ring_fds_per_uid},
        {"hello_timeout_ms", cfg_.limits.hello_timeout_ms},
        {"refused_contexts", lim.contexts},
        {"refused_qps", lim.qps},
        {"refused_mrs", lim.mrs},
        {"refused_mr_bytes", lim.mr_bytes},
        {"refused_ring_fds", lim.ring_fds},
        {"hello_timeouts", lim.hello_timeouts},
        {"accept_errors", lim.accept_errors},
        {"accept_pauses", lim.accept_pauses},
        {"qkey_eperm", lim.qkey_eperm}}},
      {"service",
       {{"contexts_opened", s.contexts_opened},
        {"contexts_closed", s.contexts_closed},
        {"contexts_gone", s.contexts_gone},
        {"mrs_shared", s.mrs_shared},
        {"ctl_requests", s.ctl_requests},
        {"ctl_errors", s.ctl_errors},
        {"ctl_garbage", s.ctl_garbage},
        {"ctl_refused", s.ctl_refused},
        {"ring_wqes", s.ring_wqes},
        {"ring_bad_wqes", s.ring_bad_wqes},
        {"cqes", s.cqes},
        {"comp_events", s.comp_events},
        {"async_events", s.async_events},
        {"event_drops", s.event_drops},
        {"gsi_sent", s.gsi_sent},
        {"gsi_dropped", s.gsi_dropped},
        {"gsi_received", s.gsi_received},
        {"gsi_rx_dropped", s.gsi_rx_dropped}}},
      {"datapath",
       {{"kind", cfg_.datapath.kind},
        {"gso", cfg_.datapath.gso},
        {"gro", cfg_.datapath.gro},
        {"rx_packets", d.rx_packets},
        {"rx_bytes", d.rx_bytes},
        {"rx_batches", d.rx_batches},
        {"rx_errors", d.rx_errors},
        {"rx_dropped", d.rx_dropped},
        {"tx_packets", d.tx_packets},
        {"tx_bytes", d.tx_bytes},
        {"tx_sends", d.tx_sends},
        {"tx_errors", d.tx_errors},
        {"tx_full", d.tx_full},
        {"tx_port_errors", d.tx_port_errors},
        {"tx_port_evictions", d.tx_port_evictions},
        {"backend", dp_extra}}},
      {"engine",
       {{"rx_packets", e.rx_packets},
        {"rx_dropped", e.rx_dropped},
        {"rx_bad_icrc", e.rx_bad_icrc},
        {"rx_icrc_id_recovered", e.rx_icrc_id_recovered},
        {"rx_unknown_qp", e.rx_unknown_qp},
        {"tx_packets", e.tx_packets},
        {"retransmits", e.retransmits},
        {"naks_sent", e.naks_sent},
        {"naks_received", e.naks_received},
        {"rnr_naks_sent", e.rnr_naks_sent},
        {"rnr_naks_received", e.rnr_naks_received},
        {"naks_by_code", naks},
        {"access_faults",
         {{"sent", e.naks_sent_by_code[kNakRemoteAccess]},
          {"received", e.naks_received_by_code[kNakRemoteAccess]}}},
        {"timeouts", e.timeouts},
        {"duplicates", e.duplicates},
        {"replays_dropped", e.replays_dropped},
        {"stale_naks", e.stale_naks},
        {"read_repair_psns_unsent", e.read_repair_psns_unsent},
        {"rx_drop_reason", drops}}},
      {"memory",
       {{"reads", m.reads},
        {"writes", m.writes},
        {"bytes_read", m.bytes_read},
        {"bytes_written", m.bytes_written},
        {"shared_bytes", m.shared_bytes},
        {"refused", m.refused},
        {"gone", m.gone},
        {"failed", m.failed}}},
      {"loop",
       {{"passes", loop_.passes},
        {"sleeps", loop_.sleeps},
        {"doorbell_wakeups", loop_.wakeups_doorbell},
        {"timer_runs", loop_.timer_runs},
        {"rx_drains", loop_.rx_drains},
        {"spin_us", static_cast<double>(spin_.spin_ps()) / 1e6}}},
      {"qps", json::parse(svc_->qps_json(viewer))},
      {"lanes", lanes},
  };
  return j.dump();
}

}  // namespace sroce::daemon
