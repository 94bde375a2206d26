// DpdkDatapath: sroced's Datapath over one DPDK ethdev port.
//
// Run to completion on the daemon's loop thread, which is EAL's main (and
// only) lcore: the daemon's pass is the DPDK loop (read the clock once, rx
// burst into the engine, the engine's timers, tx burst out of it, flush).
// This class only moves frames:
//
//   rx_burst   rte_eth_rx_burst on every queue -> Ethernet/IPv4/UDP checks
//              (frame.h) -> the UDP payload, in place in the mbuf, to the
//              engine; the mbufs are freed at the next call.
//   tx_buffer  an mbuf from a bulk-allocated cache; the engine writes the
//              UDP payload behind 42 bytes of headroom for the headers.
//   tx_commit  headers written (IPv4 checksum offloaded when the port can),
//              next-hop MAC from the neighbour table; the packet joins its
//              queue's pending array (one queue per lane: lanes stay in order).
//   tx_flush   rte_eth_tx_burst per queue; what the PMD did not take stays
//              pending (back-pressure: tx_buffer() returns nothing when full).
//
// No locks, no syscalls and no allocation in those calls; allocation failures
// are counted and retried on the next pass. Packets for a destination whose
// next-hop MAC is not known yet are parked (up to kMaxParked, at most 3 s by
// the TSC) while the resolver thread asks the kernel. Packets to the daemon's
// own addresses are looped back in software (a NIC does not return them).
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "datapath.h"
#include "eal.h"
#include "frame.h"
#include "neighbour.h"

namespace sroce::dpdk {

class DpdkDatapath final : public daemon::Datapath {
 public:
  static Result<std::unique_ptr<DpdkDatapath>> create(const daemon::Config& cfg, const std::string& netdev,
                                                      std::span<const uint32_t> local_addrs,
                                                      std::span<const Gid> local_addrs6 = {});
  ~DpdkDatapath() override;

  size_t rx_burst(std::span<daemon::RxPacket> out) override;
  std::span<std::byte> tx_buffer() override;
  void tx_commit(size_t len, const PacketMeta& meta) override;
  void tx_flush() override;
  bool poll() override;
  int wait_fd() const override { return timer_fd_; }
  bool has_pending() override;
  const daemon::DatapathStats& stats() const override;
  std::span<const daemon::PortStats> port_stats() const override { return {lanes_.data(), lane_count_}; }
  uint32_t mtu_limit() const override { return mtu_limit_; }
  bool poll_mode() const override { return true; }
  std::string stats_json() const override;

  static constexpr uint16_t kMaxBurst = 64;      // mbufs per rte_eth_rx_burst call
  static constexpr uint32_t kMaxParked = 256;    // packets waiting for a next-hop MAC
  static constexpr uint32_t kMaxLoopback = 256;  // packets to our own addresses, per pass
  static constexpr uint32_t kAllocBatch = 32;    // mbufs per rte_pktmbuf_alloc_bulk
  static constexpr uint32_t kFirstSleepUs = 10;  // first idle sleep after traffic (sleep_poll_us > 0)
  // Where tx_buffer() lets the engine write: behind room for the longer (IPv6) headers; an
  // IPv4 frame then starts 20 bytes into the mbuf's data (data_off moves).
  static constexpr size_t kTxPayloadOff = kFrameHeaders6;

 private:
  struct QueueStats {
    uint64_t rx_packets = 0, rx_bytes = 0, rx_bursts = 0, rx_dropped = 0;
    uint64_t tx_packets = 0, tx_bytes = 0, tx_bursts = 0;
    uint64_t tx_short = 0;  // bursts the PMD took only part of (ring full)
  };
  struct alignas(64) Queue {
    uint16_t id = 0;
    std::array<rte_mbuf*, kMaxBurst> stash{};  // received by has_pending(), not handed out yet
    uint16_t stash_n = 0, stash_pos = 0;
    std::vector<rte_mbuf*> pending;  // committed, not yet taken by the PMD
    uint32_t pending_n = 0;
    QueueStats st;
  };
  struct Parked {
    rte_mbuf* m = nullptr;
    uint32_t dst = 0;
    uint64_t since = 0;  // TSC
    uint16_t queue = 0;
  };
  struct Looped {
    rte_mbuf* m = nullptr;
    uint32_t len = 0;
    PacketMeta meta;
  };

  explicit DpdkDatapath(const daemon::Config& cfg);
  // Control path (dpdk_port.cc).
  Result<void> init(const std::string& netdev, std::span<const uint32_t> local_addrs, std::span<const Gid> local_addrs6);
  Result<void> setup_port(VdevKind kind);
  void open_absorber();

  // Hot path helpers (dpdk_datapath.cc).
  bool accept(Queue& q, rte_mbuf* m, daemon::RxPacket& out);
  bool drop_rx(Queue& q, rte_mbuf* m, uint64_t& why);  // false, always
  bool is_local(uint32_t ip) const;
  bool is_local6(const uint8_t* ip) const;
  bool accept6(Queue& q, rte_mbuf* m, daemon::RxPacket& out);
  void enqueue(uint16_t queue, rte_mbuf* m);
  void send_resolved(rte_mbuf* m, const MacAddr& mac, uint16_t queue);
  bool retry_parked();
  bool flush_queues();
  void count_lane(const Gid& src, uint16_t sport, uint32_t bytes);

  daemon::Config cfg_;
  std::unique_ptr<Eal> eal_;
  uint16_t port_ = 0;
  uint16_t nq_ = 1;
  uint16_t udp_port_ = 4791;
  rte_mempool* pool_ = nullptr;
  bool port_started_ = false;
  bool ip_csum_offload_ = false;
  bool rx_ip_csum_offload_ = false;
  MacAddr src_mac_;
  int ifindex_ = 0;
  uint32_t data_room_ = 0;
  uint32_t tx_room_ = 0;  // UDP payload bytes tx_buffer() offers
  uint32_t mtu_limit_ = 0;
  std::string driver_;
  std::vector<uint32_t> local_addrs_;
  std::vector<Gid> local_addrs6_;
  int timer_fd_ = -1;
  uint32_t sleep_us_ = kFirstSleepUs;  // the next idle sleep (doubles up to sleep_poll_us)
  bool moved_ = false;                 // a packet in or out since the last rx_burst
  uint32_t idle_passes_ = 0;
  uint32_t yield_after_ = 0;           // dpdk.idle_yield_passes
  uint64_t yields_ = 0;
  int absorber_fd_ = -1;
  int absorber6_fd_ = -1;
  uint64_t tsc_hz_ = 0;

  std::vector<Queue> queues_;
  uint16_t rx_next_ = 0;  // the queue rx_burst starts with (fairness)
  uint32_t pending_total_ = 0;
  uint32_t pending_cap_ = 0;  // per queue

  std::vector<rte_mbuf*> held_;  // mbufs behind the payload views of the last rx_burst
  uint32_t held_n_ = 0;
  std::array<rte_mbuf*, kAllocBatch> alloc_{};
  uint32_t alloc_n_ = 0;
  rte_mbuf* tx_cur_ = nullptr;  // the mbuf tx_buffer() handed out

  std::array<Parked, kMaxParked> parked_{};
  uint32_t parked_n_ = 0;
  std::array<Looped, kMaxLoopback> looped_{};
  uint32_t looped_n_ = 0;

  std::unique_ptr<NeighbourTable> neigh_;
  std::unique_ptr<NeighbourResolver> resolver_;

  // Lane source ports: a fixed table, linear-probed by (src, sport).
  std::vector<daemon::PortStats> lanes_;
  std::vector<int32_t> lane_hash_;
  size_t lane_count_ = 0;
  Gid last_lane_src_{};
  uint16_t last_lane_sport_ = 0;
  int32_t last_lane_ = -1;

  // Counters beyond the per-queue ones.
  std::array<uint64_t, static_cast<size_t>(RxVerdict::kCount)> rx_verdicts_{};
  uint64_t rx_not_local_ = 0;
  uint64_t rx_multi_seg_ = 0;
  uint64_t tx_alloc_failures_ = 0;
  uint64_t tx_parked_ = 0;
  uint64_t tx_no_neighbour_ = 0;  // parked too long, or nowhere to park
  uint64_t tx_looped_ = 0;
  uint64_t rx_looped_ = 0, rx_looped_bytes_ = 0;  // delivered to the engine (counted as received)
  mutable daemon::DatapathStats stats_;
};

}  // namespace sroce::dpdk
