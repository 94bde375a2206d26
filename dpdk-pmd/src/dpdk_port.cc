// DpdkDatapath: the control path. EAL, the mbuf pool, the port and its
// queues, the neighbour resolver; shutdown; statistics (dpdk_datapath.h).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/filter.h>
#include <net/if.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <spdlog/spdlog.h>

#include "dpdk_datapath.h"
#include "sroce/dpdk/dpdk_datapath.h"

namespace sroce::dpdk {

namespace {

constexpr uint32_t kNeighbourSlots = 4096;
// The af_xdp PMD turns the mbuf pool into its UMEM: an object (header,
// rte_mbuf, data room) must fit one page, and an odd number of cache lines
// keeps the mempool from padding it past the page (it spreads objects over
// memory channels). 64 + 128 + 3840 = 4032 bytes, 63 lines.
constexpr uint32_t kAfXdpDataRoom = 3840;
constexpr uint32_t kXdpPacketHeadroom = 256;  // XDP_PACKET_HEADROOM, before each received frame
// Other PMDs: room for the largest packet the engine writes plus headers.
constexpr uint32_t kDefaultDataRoom = 4352;
// The af_packet shorthand's 4 KiB frames hold 4016 bytes from the MAC header
// on (the kernel puts tpacket2_hdr and sockaddr_ll first).
constexpr uint32_t kAfPacketFrameData = 4016;
constexpr const char* kXdpProgName = "sroce_xdp_steer";

Error fail(int err, std::string msg) { return Error{err ? err : EINVAL, std::move(msg)}; }

std::string cpu_list() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty()) cpus.push_back(0);
  return fmt::format("{}", fmt::join(cpus, ","));
}

// A previous sroced killed with SIGKILL leaves its XDP program attached, and
// the PMD attaches only where no program is (XDP_FLAGS_UPDATE_IF_NOEXIST).
// Ours, recognised by name, is removed; anyone else's is left alone.
void remove_stale_xdp(int ifindex, const std::string& netdev) {
  uint32_t id = 0;
  if (bpf_xdp_query_id(ifindex, 0, &id) != 0 || id == 0) return;
  int fd = bpf_prog_get_fd_by_id(id);
  if (fd < 0) return;
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  bool ours = bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && strcmp(info.name, kXdpProgName) == 0;
  close(fd);
  if (!ours) {
    spdlog::warn("dpdk: {} already has an XDP program (id {}, \"{}\"); the af_xdp PMD will not replace it", netdev,
                 id, info.name);
    return;
  }
  if (bpf_xdp_detach(ifindex, 0, nullptr) == 0)
    spdlog::info("dpdk: removed a stale sroce XDP program (id {}) from {}", id, netdev);
}

// Receive queues of a kernel interface (/sys/class/net/DEV/queues/rx-N).
uint32_t kernel_rx_queues(const std::string& netdev) {
  uint32_t n = 0;
  while (access(fmt::format("/sys/class/net/{}/queues/rx-{}", netdev, n).c_str(), F_OK) == 0) ++n;
  return n;
}

}  // namespace

Result<std::unique_ptr<daemon::Datapath>> create_datapath(const daemon::Config& cfg, const std::string& netdev,
                                                          std::span<const uint32_t> local_addrs,
                                                          std::span<const Gid> local_addrs6) {
  auto dp = DpdkDatapath::create(cfg, netdev, local_addrs, local_addrs6);
  if (!dp) return dp.error();
  return std::unique_ptr<daemon::Datapath>(std::move(*dp));
}

DpdkDatapath::DpdkDatapath(const daemon::Config& cfg) : cfg_(cfg) {}

Result<std::unique_ptr<DpdkDatapath>> DpdkDatapath::create(const daemon::Config& cfg, const std::string& netdev,
                                                            std::span<const uint32_t> local_addrs,
                                                            std::span<const Gid> local_addrs6) {
  std::unique_ptr<DpdkDatapath> dp(new DpdkDatapath(cfg));
  auto r = dp->init(netdev, local_addrs, local_addrs6);
  if (!r) return r.error();
  return dp;
}

Result<void> DpdkDatapath::init(const std::string& netdev, std::span<const uint32_t> local_addrs,
                                std::span<const Gid> local_addrs6) {
  const auto& d = cfg_.dpdk;
  local_addrs_.assign(local_addrs.begin(), local_addrs.end());
  local_addrs6_.assign(local_addrs6.begin(), local_addrs6.end());
  udp_port_ = cfg_.datapath.port;
  const VdevKind kind = vdev_kind(d.vdev);
  const bool shorthand = d.vdev == "af_xdp" || d.vdev == "af_packet";
  if (shorthand) {
    if (netdev.empty())
      return fail(ENODEV, fmt::format("dpdk.vdev: \"{}\" attaches to device.netdev, and no interface was found "
                                      "(set device.netdev)",
                                      d.vdev));
    ifindex_ = static_cast<int>(if_nametoindex(netdev.c_str()));
    if (ifindex_ == 0) return fail(ENODEV, fmt::format("device.netdev: no interface \"{}\"", netdev));
  } else if (kind != VdevKind::kNone && !netdev.empty()) {
    ifindex_ = static_cast<int>(if_nametoindex(netdev.c_str()));  // the kernel's tables still apply
  }

  std::string xdp_prog;
  if (kind == VdevKind::kAfXdp && d.xdp_prog != "none") {
    xdp_prog = d.xdp_prog.empty() ? default_xdp_prog() : d.xdp_prog;
    if (xdp_prog.empty())
      return fail(ENOENT, fmt::format("dpdk.xdp_prog: sroce's XDP program was not found at {} or {} (build the "
                                      "sroce_xdp target, or set dpdk.xdp_prog)",
                                      SROCE_XDP_PROG_BUILD, SROCE_XDP_PROG_INSTALL));
    if (access(xdp_prog.c_str(), R_OK) != 0)
      return fail(ENOENT, fmt::format("dpdk.xdp_prog: cannot read \"{}\"", xdp_prog));
    if (ifindex_ > 0) remove_stale_xdp(ifindex_, netdev);
    // An AF_XDP socket sees one queue. RoCE packets that the NIC (or veth)
    // puts on a queue without a socket go to the kernel, which drops them.
    if (uint32_t kq = kernel_rx_queues(netdev); kq > d.queues)
      spdlog::warn("dpdk: {} has {} receive queues and dpdk.queues is {}: RoCE packets on queues {}..{} never "
                   "reach sroced. Set dpdk.queues = {}, or 'ethtool -L {} combined {}', or steer UDP 4791 to "
                   "queue 0 ('ethtool -N {} flow-type udp4 dst-port 4791 action 0')",
                   netdev, kq, d.queues, d.queues, kq - 1, kq, netdev, d.queues, netdev);
  } else if (kind == VdevKind::kAfXdp) {
    spdlog::warn("dpdk.xdp_prog = \"none\": the af_xdp PMD's own program takes every packet of {}; the kernel no "
                 "longer sees ARP on it",
                 netdev);
  }

  const std::string prefix = fmt::format("sroced-{}-", cfg_.device.name);
  remove_stale_runtime_dirs(prefix);
  auto args = eal_arguments(cfg_, netdev, xdp_prog, prefix + std::to_string(getpid()), cpu_list());
  spdlog::debug("dpdk: EAL arguments: {}", fmt::join(args, " "));
  auto eal = Eal::init(std::move(args));
  if (!eal) return eal.error();
  eal_ = std::move(*eal);
  tsc_hz_ = rte_get_tsc_hz();
  sleep_us_ = std::min(kFirstSleepUs, d.sleep_poll_us);
  yield_after_ = d.idle_yield_passes;

  if (auto r = setup_port(kind); !r) return r;

  neigh_ = std::make_unique<NeighbourTable>(kNeighbourSlots);
  for (const auto& s : d.static_neighbours) {
    uint32_t ip;
    MacAddr mac;
    if (!parse_static_neighbour(s, ip, mac) || !neigh_->add_static(ip, mac))
      return fail(EINVAL, fmt::format("dpdk.static_neighbours: cannot use \"{}\"", s));
  }
  if (ifindex_ > 0) {
    resolver_ = std::make_unique<NeighbourResolver>(*neigh_, ifindex_);
    std::string err;
    if (!resolver_->start(err)) return fail(errno, err);
  } else if (d.static_neighbours.empty()) {
    spdlog::warn("dpdk: no kernel interface for port {} and no dpdk.static_neighbours: no destination has a MAC",
                 port_);
  }

  timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_fd_ < 0) return fail(errno, fmt::format("timerfd_create: {}", strerror(errno)));
  if (kind == VdevKind::kAfPacket) open_absorber();

  held_.assign(std::max<uint32_t>(cfg_.datapath.batch, kMaxBurst), nullptr);
  size_t cap = 1;
  while (cap < 2u * d.max_tx_ports) cap <<= 1;
  lane_hash_.assign(cap, -1);
  lanes_.resize(d.max_tx_ports);
  return {};
}

Result<void> DpdkDatapath::setup_port(VdevKind kind) {
  const auto& d = cfg_.dpdk;
  const uint16_t avail = rte_eth_dev_count_avail();
  if (avail == 0)
    return fail(ENODEV, d.vdev.empty() ? "dpdk.vdev: EAL found no port (is a NIC bound to vfio-pci? add \"-a "
                                         "PCI-ADDRESS\" to dpdk.eal_args)"
                                       : fmt::format("dpdk.vdev: EAL made no port of \"{}\"", d.vdev));
  if (!rte_eth_dev_is_valid_port(static_cast<uint16_t>(d.port)))
    return fail(ENODEV, fmt::format("dpdk.port: expected a port id below {}, got {}", avail, d.port));
  port_ = static_cast<uint16_t>(d.port);
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(port_, &info); rc != 0)
    return fail(-rc, fmt::format("dpdk: rte_eth_dev_info_get(port {}): {}", port_, rte_strerror(-rc)));
  driver_ = info.driver_name ? info.driver_name : "?";
  if (d.queues > info.max_rx_queues || d.queues > info.max_tx_queues)
    return fail(EINVAL, fmt::format("dpdk.queues: port {} ({}) has at most {} rx / {} tx queues, got {}", port_,
                                    driver_, info.max_rx_queues, info.max_tx_queues, d.queues));
  nq_ = static_cast<uint16_t>(d.queues);

  data_room_ = d.mbuf_data_room ? d.mbuf_data_room : kind == VdevKind::kAfXdp ? kAfXdpDataRoom : kDefaultDataRoom;
  pool_ = rte_pktmbuf_pool_create("sroce_mbufs", d.mbufs, d.mbuf_cache, 0, static_cast<uint16_t>(data_room_),
                                  static_cast<int>(rte_socket_id()));
  if (!pool_)
    return fail(rte_errno, fmt::format("dpdk.mbufs: cannot create a pool of {} mbufs of {} bytes: {} (raise "
                                       "dpdk.memory_mb)",
                                       d.mbufs, data_room_, rte_strerror(rte_errno)));

  // What one mbuf carries: the engine writes behind room for 62 bytes of headers (IPv6; IPv4
  // takes 42 of them); a received frame starts after the headroom (and XDP's, for af_xdp).
  tx_room_ = static_cast<uint32_t>(
      std::min<size_t>(Engine::kMaxPacket, data_room_ - RTE_PKTMBUF_HEADROOM - kTxPayloadOff));
  uint32_t rx_frame = data_room_ - RTE_PKTMBUF_HEADROOM;
  if (kind == VdevKind::kAfXdp) rx_frame -= kXdpPacketHeadroom;
  if (kind == VdevKind::kAfPacket) rx_frame = std::min(rx_frame, kAfPacketFrameData);
  // IP MTU; +8 keeps the engine's bound (tx_room >= MTU + 64) for an IB MTU
  // chosen with the daemon's rule (IB MTU + 72 <= IP MTU).
  mtu_limit_ = std::min<uint32_t>(rx_frame - kEthHeader, tx_room_ + 8);

  rte_eth_conf conf{};
  const uint32_t overhead = RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  uint32_t dev_mtu = std::min<uint32_t>(mtu_limit_, info.max_mtu);
  if (info.max_rx_pktlen > overhead) dev_mtu = std::min<uint32_t>(dev_mtu, info.max_rx_pktlen - overhead);
  conf.rxmode.mtu = std::max<uint32_t>(dev_mtu, info.min_mtu);
  if (kind != VdevKind::kAfXdp && kind != VdevKind::kAfPacket) mtu_limit_ = std::min(mtu_limit_, dev_mtu);
  if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) {
    conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
    rx_ip_csum_offload_ = true;
  }
  if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) {
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
    ip_csum_offload_ = true;
  }
  // One pool, mbufs never shared: the PMD may free them the fast way.
  if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE)
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
  if (nq_ > 1) {
    uint64_t hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
    if (hf) {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf = hf;
    }
  }
  if (int rc = rte_eth_dev_configure(port_, nq_, nq_, &conf); rc != 0)
    return fail(-rc, fmt::format("dpdk: rte_eth_dev_configure(port {}, {} queues, mtu {}): {}", port_, nq_,
                                 conf.rxmode.mtu, rte_strerror(-rc)));
  uint16_t nrx = static_cast<uint16_t>(d.rx_desc), ntx = static_cast<uint16_t>(d.tx_desc);
  rte_eth_dev_adjust_nb_rx_tx_desc(port_, &nrx, &ntx);
  const auto socket = static_cast<unsigned>(rte_eth_dev_socket_id(port_) < 0 ? 0 : rte_eth_dev_socket_id(port_));
  rte_eth_rxconf rxc = info.default_rxconf;
  rxc.offloads = conf.rxmode.offloads;
  rte_eth_txconf txc = info.default_txconf;
  txc.offloads = conf.txmode.offloads;
  queues_ = std::vector<Queue>(nq_);
  pending_cap_ = std::max<uint32_t>(4 * cfg_.datapath.batch, 2 * kMaxBurst);
  for (uint16_t q = 0; q < nq_; ++q) {
    queues_[q].id = q;
    queues_[q].pending.assign(pending_cap_, nullptr);
    if (int rc = rte_eth_rx_queue_setup(port_, q, nrx, socket, &rxc, pool_); rc != 0)
      return fail(-rc, fmt::format("dpdk: rx queue {} of port {} ({} descriptors): {}", q, port_, nrx,
                                   rte_strerror(-rc)));
    if (int rc = rte_eth_tx_queue_setup(port_, q, ntx, socket, &txc); rc != 0)
      return fail(-rc, fmt::format("dpdk: tx queue {} of port {} ({} descriptors): {}", q, port_, ntx,
                                   rte_strerror(-rc)));
  }
  if (int rc = rte_eth_dev_start(port_); rc != 0)
    return fail(-rc, fmt::format("dpdk: rte_eth_dev_start(port {}): {}", port_, rte_strerror(-rc)));
  port_started_ = true;
  rte_ether_addr mac{};
  rte_eth_macaddr_get(port_, &mac);
  memcpy(src_mac_.b, mac.addr_bytes, 6);
  rte_eth_link link{};
  rte_eth_link_get_nowait(port_, &link);
  spdlog::info("dpdk: port {} ({}) {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, link {}, {} queue(s) of {}/{} "
               "descriptors, {} mbufs of {} bytes, IP MTU limit {}, IPv4 checksum {}",
               port_, driver_, src_mac_.b[0], src_mac_.b[1], src_mac_.b[2], src_mac_.b[3], src_mac_.b[4],
               src_mac_.b[5], link.link_status ? "up" : "down", nq_, nrx, ntx, d.mbufs, data_room_, mtu_limit_,
               ip_csum_offload_ ? "offloaded" : "in software");
  return {};
}

// With af_packet the kernel receives every frame too. Without a socket on
// the RoCE port it would answer each RoCE packet with an ICMP port
// unreachable; a socket whose filter drops everything makes it stay quiet
// at the cost of one lookup per packet.
void DpdkDatapath::open_absorber() {
  absorber_fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (absorber_fd_ < 0) return;
  sock_filter drop_all[] = {{BPF_RET | BPF_K, 0, 0, 0}};
  sock_fprog prog{1, drop_all};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(udp_port_);
  if (setsockopt(absorber_fd_, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0 ||
      bind(absorber_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    spdlog::warn("dpdk: af_packet: cannot bind UDP {} in the kernel ({}); it will answer RoCE packets with ICMP "
                 "port unreachable",
                 udp_port_, strerror(errno));
    close(absorber_fd_);
    absorber_fd_ = -1;
  }
  if (local_addrs6_.empty()) return;
  // The same for IPv6 (the kernel would answer with ICMPv6 port unreachable).
  absorber6_fd_ = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (absorber6_fd_ < 0) return;
  int one = 1;
  sockaddr_in6 a6{};
  a6.sin6_family = AF_INET6;
  a6.sin6_port = htons(udp_port_);
  if (setsockopt(absorber6_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0 ||
      setsockopt(absorber6_fd_, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0 ||
      bind(absorber6_fd_, reinterpret_cast<sockaddr*>(&a6), sizeof a6) != 0) {
    spdlog::warn("dpdk: af_packet: cannot bind UDP [::]:{} in the kernel ({})", udp_port_, strerror(errno));
    close(absorber6_fd_);
    absorber6_fd_ = -1;
  }
}

DpdkDatapath::~DpdkDatapath() {
  if (resolver_) resolver_->stop();
  if (pool_) {
    // Every mbuf back to the pool before the port and the pool go.
    if (held_n_) rte_pktmbuf_free_bulk(held_.data(), held_n_);
    for (Queue& q : queues_) {
      for (uint16_t i = q.stash_pos; i < q.stash_n; ++i) rte_pktmbuf_free(q.stash[i]);
      for (uint32_t i = 0; i < q.pending_n; ++i) rte_pktmbuf_free(q.pending[i]);
    }
    for (uint32_t i = 0; i < parked_n_; ++i) rte_pktmbuf_free(parked_[i].m);
    for (uint32_t i = 0; i < looped_n_; ++i) rte_pktmbuf_free(looped_[i].m);
    if (alloc_n_) rte_pktmbuf_free_bulk(alloc_.data(), alloc_n_);
    if (tx_cur_) rte_pktmbuf_free(tx_cur_);
  }
  if (eal_) {
    // Closing an af_xdp port also detaches the XDP program: the kernel gets
    // the interface back whole.
    if (port_started_) rte_eth_dev_stop(port_);
    if (rte_eth_dev_is_valid_port(port_)) rte_eth_dev_close(port_);
    if (pool_) rte_mempool_free(pool_);
  }
  if (timer_fd_ >= 0) close(timer_fd_);
  if (absorber_fd_ >= 0) close(absorber_fd_);
  if (absorber6_fd_ >= 0) close(absorber6_fd_);
  eal_.reset();
}

const daemon::DatapathStats& DpdkDatapath::stats() const {
  // Per-queue counters, summed on read (DPDK's way: no shared counter on
  // the hot path). tx_full and tx_errors are kept in stats_ directly.
  stats_.rx_packets = rx_looped_;
  stats_.rx_bytes = rx_looped_bytes_;
  stats_.rx_batches = stats_.rx_dropped = 0;
  stats_.tx_packets = stats_.tx_bytes = stats_.tx_sends = 0;
  for (const Queue& q : queues_) {
    stats_.rx_packets += q.st.rx_packets;
    stats_.rx_bytes += q.st.rx_bytes;
    stats_.rx_batches += q.st.rx_bursts;
    stats_.rx_dropped += q.st.rx_dropped;
    stats_.tx_packets += q.st.tx_packets;
    stats_.tx_bytes += q.st.tx_bytes;
    stats_.tx_sends += q.st.tx_bursts;
  }
  stats_.rx_errors = rx_verdicts_[static_cast<size_t>(RxVerdict::kLength)] +
                     rx_verdicts_[static_cast<size_t>(RxVerdict::kIpHeader)];
  stats_.rx_dropped -= std::min(stats_.rx_dropped, stats_.rx_errors);
  return stats_;
}

std::string DpdkDatapath::stats_json() const {
  using nlohmann::json;
  json queues = json::array();
  for (const Queue& q : queues_)
    queues.push_back({{"queue", q.id},
                      {"rx_packets", q.st.rx_packets},
                      {"rx_bytes", q.st.rx_bytes},
                      {"rx_bursts", q.st.rx_bursts},
                      {"rx_dropped", q.st.rx_dropped},
                      {"tx_packets", q.st.tx_packets},
                      {"tx_bytes", q.st.tx_bytes},
                      {"tx_bursts", q.st.tx_bursts},
                      {"tx_short", q.st.tx_short},
                      {"tx_pending", q.pending_n}});
  json verdicts = json::object();
  for (size_t i = 1; i < rx_verdicts_.size(); ++i)
    verdicts[rx_verdict_name(static_cast<RxVerdict>(i))] = rx_verdicts_[i];
  verdicts["not_local"] = rx_not_local_;
  verdicts["multi_segment"] = rx_multi_seg_;
  rte_eth_stats es{};
  rte_eth_stats_get(port_, &es);
  json j = {{"kind", "dpdk"},
            {"driver", driver_},
            {"port", port_},
            {"mbuf_data_room", data_room_},
            {"mtu_limit", mtu_limit_},
            {"ip_checksum_offload", ip_csum_offload_},
            {"mbufs_available", pool_ ? rte_mempool_avail_count(pool_) : 0},
            {"queues", queues},
            {"rx_dropped_by_reason", verdicts},
            {"tx_alloc_failures", tx_alloc_failures_},
            {"tx_parked", tx_parked_},
            {"tx_parked_now", parked_n_},
            {"tx_no_neighbour", tx_no_neighbour_},
            {"tx_looped", tx_looped_},
            {"idle_yields", yields_},
            {"neighbours", neigh_ ? neigh_->size() : 0},
            {"ethdev",
             {{"ipackets", es.ipackets},
              {"opackets", es.opackets},
              {"ibytes", es.ibytes},
              {"obytes", es.obytes},
              {"imissed", es.imissed},
              {"ierrors", es.ierrors},
              {"oerrors", es.oerrors},
              {"rx_nombuf", es.rx_nombuf}}}};
  if (resolver_) {
    const auto& r = resolver_->stats();
    j["resolver"] = {{"lookups", r.lookups.load()},
                     {"resolved", r.resolved.load()},
                     {"probes", r.probes.load()},
                     {"unroutable", r.unroutable.load()}};
  }
  return j.dump();
}

}  // namespace sroce::dpdk
