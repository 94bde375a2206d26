// The UDP datapath: RoCEv2 over kernel UDP sockets driven by io_uring.
//
//  * one receive socket bound to the RoCEv2 port (4791, Annex A17.2.1) with
//    UDP_GRO, IP_RECVTOS (ECN) and IP_PKTINFO; `rx_buffers` receives stay
//    posted in the ring, each big enough for one GRO batch; with IPv6 GIDs a
//    second one on [::]:4791 (IPV6_V6ONLY) with IPV6_RECVTCLASS, _RECVPKTINFO,
//    _RECVHOPLIMIT and IPV6_FLOWINFO, and as many receives of its own;
//  * one send socket per lane source port, bound to local-address:sport
//    (the source port is the lane's ECMP entropy), opened the first time the
//    engine uses that port; IP_PMTUDISC_DO so IPv4 leaves with DF and, on an
//    unconnected socket, identification 0, which the ICRC assumes
//    (proto/icrc.h); for IPv6 (Annex A17.4.5.1: the GRH becomes the IPv6
//    header) IPV6_PMTUDISC_DO, traffic class and hop limit as cmsgs per send,
//    the flow label in sin6_flowinfo (IPV6_FLOWINFO_SEND; derive_flow_label()
//    for an address vector whose label is 0);
//  * packets of one burst with the same (source, destination, source port,
//    TOS) and size are packed into one buffer, in order, and sent with one
//    sendmsg carrying UDP_SEGMENT (GSO); a shorter packet may end a batch.
//    Up to 16 flows are batched at once, so QPs the engine interleaves
//    packet by packet still leave in large sends. Over IPv4 the kernel gives
//    segment i of a send the identification i, so its ICRC is made the one
//    of id i as it joins the batch (set_segment_id).
//
// The sockets are blocking so io_uring parks a send on a full socket buffer
// instead of failing it; back-pressure reaches the engine as tx_buffer()
// returning an empty span while every send buffer is in flight.
#pragma once

#include <liburing.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "datapath.h"
#include "proto/icrc.h"

namespace sroce::daemon {

class UdpDatapath final : public Datapath {
 public:
  // Opens the receive socket(s) and the ring. `local_addrs` are host-order
  // IPv4 addresses the daemon owns, `local_addrs6` its IPv6 GIDs (none: no
  // IPv6 socket).
  static Result<std::unique_ptr<UdpDatapath>> create(const Config::Datapath& cfg,
                                                     std::span<const uint32_t> local_addrs,
                                                     std::span<const Gid> local_addrs6 = {});
  ~UdpDatapath() override;

  size_t rx_burst(std::span<RxPacket> out) override;
  std::span<std::byte> tx_buffer() override;
  void tx_commit(size_t len, const PacketMeta& meta) override;
  void tx_flush() override;
  bool poll() override;
  int wait_fd() const override { return event_fd_; }
  bool has_pending() override;
  bool rx_more() override;
  // Zero-copy sends (datapath.send_zc): made, and of them copied by the kernel anyway.
  uint64_t zc_sends() const { return zc_sends_; }
  uint64_t zc_copied() const { return zc_copied_; }
  const DatapathStats& stats() const override { return stats_; }
  std::span<const PortStats> port_stats() const override { return {ports_.data(), port_count_}; }

  uint16_t bound_port() const { return cfg_.port; }
  uint64_t flow_label_refused() const { return flow_label_refused_; }
  std::string stats_json() const override;

  // The IPv6 flow label of a packet whose address vector says 0 (see the .cc).
  static uint32_t derive_flow_label(uint32_t dqpn, uint16_t sport);

  // Largest UDP payload of one GSO send (65535 - IPv4 - UDP headers).
  static constexpr size_t kGsoMaxBytes = 65535 - 20 - 8;
  // Zero-copy sends (send_zc) from this size up: below it the copy is cheaper than the
  // page pinning and the notification.
  static constexpr size_t kZcMinBytes = 16384;
  static constexpr uint32_t kGsoMaxSegments = 64;  // UDP_MAX_SEGMENTS on older kernels

 private:
  struct RxSlot {
    std::unique_ptr<std::byte[]> buf;
    msghdr msg{};
    iovec iov{};
    sockaddr_in6 from{};  // sockaddr_in on the IPv4 socket
    int fd = -1;
    alignas(8) unsigned char control[192];
    // Filled on completion.
    uint32_t len = 0;      // bytes received
    uint32_t seg = 0;      // GRO segment size (== len when not coalesced)
    uint32_t offset = 0;   // consumed so far
    PacketMeta meta;
  };

  struct TxKey {
    Gid src, dst;  // IPv4-mapped for IPv4
    uint16_t sport = 0, dport = 0;
    uint8_t tos = 0;
    uint8_t hop_limit = 0;    // IPv6 only
    uint32_t flow_label = 0;  // IPv6 only
    bool operator==(const TxKey&) const = default;
  };

  struct TxSlot {
    std::unique_ptr<std::byte[]> buf;
    msghdr msg{};
    iovec iov{};
    sockaddr_in6 to{};  // sockaddr_in for IPv4
    alignas(8) unsigned char control[96];
    TxKey key;
    size_t len = 0;
    uint32_t seg = 0;      // segment size (first packet's length)
    uint32_t nsegs = 0;
    bool closed = false;   // a shorter final segment was added, or full
    uint32_t port_index = 0;
    bool labelled = false;  // the send named key.flow_label (IPv6)
    bool reseal = false;    // it leaves from another port than key.sport (reseal_for_port)
    bool zc = false;        // sent with IORING_OP_SENDMSG_ZC
    bool zc_requeue = false;  // once the notification comes: send again, not free
  };

  explicit UdpDatapath(const Config::Datapath& cfg);
  Result<void> init(std::span<const uint32_t> local_addrs, std::span<const Gid> local_addrs6);
  Result<void> open_rx6();
  void arm_rx(uint32_t idx);
  bool rx_starved() const;  // a socket has no receive posted
  void parse_rx(RxSlot& s, int res);
  bool reap();
  void tx_done(uint32_t idx, bool requeue);  // the kernel is done with slot idx
  int open_tx_port(const Gid& src, uint16_t sport);  // index into ports_, or -1
  int find_tx_port(const Gid& src, uint16_t sport);
  int open_socket6(const Gid& src, uint16_t sport);
  bool slot_can_append(const TxSlot& s) const;
  void close_slot(uint32_t open_index);  // queue (or free, if empty) tx_open_[i]
  int open_slot();                       // a fresh batch from the free list
  void send_queued();                    // closed batches -> sendmsg SQEs, submit
  void set_segment_id(std::byte* pkt, size_t len, uint32_t index);  // the ICRC of segment `index`'s id
  // The source port packets of port entry `pi` leave from: its own, or the well-known port's
  // when its socket could not be bound (open_tx_port) or it is the fallback entry.
  uint16_t sent_port(int pi) const;
  // A full table: the entry of the least recently used lane no batch holds, its socket
  // closed and the hash rebuilt without it; -1 if every entry is held.
  int evict_port();
  // The ICRC again for a packet that leaves from `sport` instead of key.sport (udp_datapath.cc).
  static void reseal_for_port(std::byte* pkt, size_t len, const TxKey& key, uint16_t sport);
  void seal_segment(const TxSlot& t, std::byte* pkt, size_t len, bool v4);
  void hash_insert(size_t i);  // entry i into port_hash_ (linear probing)
  void submit();

  Config::Datapath cfg_;
  io_uring ring_{};
  bool ring_ok_ = false;
  int rx_fd_ = -1;
  int rx6_fd_ = -1;  // [::]:port, when the daemon has IPv6 GIDs
  int event_fd_ = -1;
  uint32_t sqes_pending_ = 0;

  std::vector<RxSlot> rx_;
  std::vector<uint32_t> rx_ready_;  // completed slots, in order (a ring of indices)
  size_t rx_ready_head_ = 0, rx_ready_count_ = 0;
  std::vector<uint32_t> rx_rearm_;  // consumed slots to re-post at the next rx_burst
  size_t rx_rearm_count_ = 0;
  uint32_t rx_posted_[2] = {};  // receives in the kernel: IPv4 socket, IPv6 socket

  std::vector<TxSlot> tx_;
  std::vector<uint32_t> tx_free_;
  size_t tx_free_count_ = 0;
  std::vector<uint32_t> tx_queued_;  // closed batches waiting for tx_flush
  size_t tx_queued_count_ = 0;
  // Batches being filled in this burst, one per flow at most; the engine's
  // round-robin over QPs interleaves flows, batching regroups them.
  static constexpr uint32_t kMaxOpenBatches = 16;
  int tx_open_[kMaxOpenBatches] = {};
  uint32_t tx_open_count_ = 0;
  int tx_write_ = -1;  // the batch tx_buffer() handed out room in
  uint32_t tx_inflight_ = 0;

  // Lane source ports: a fixed table, linear-probed by (src, sport).
  std::vector<PortStats> ports_;
  std::vector<int> port_fd_;
  std::vector<uint64_t> port_used_;  // port_tick_ when a batch last took the entry
  uint64_t port_tick_ = 0;
  size_t port_count_ = 0;
  std::vector<int32_t> port_hash_;  // -1 empty, else index into ports_
  int fallback_port_ = 0;  // ports_ index of the well-known port's entry (open_tx_port(0, port))
  std::vector<uint32_t> local_addrs_;
  std::vector<Gid> local_addrs6_;
  std::vector<Gid> port_src_;          // per ports_ entry: its source address
  int fallback6_port_ = -1;            // the IPv6 socket's entry, like fallback_port_
  uint64_t flow_label_refused_ = 0;    // labelled sends the kernel refused (resent unlabelled)
  uint64_t zc_sends_ = 0;   // sends made with IORING_OP_SENDMSG_ZC
  uint64_t zc_copied_ = 0;  // of them, ones the kernel copied anyway (its notification says so)
  bool zc_refused_ = false;  // the kernel refused a zero-copy send: plain sends from then on
  bool flow_labels_refused_ = false;   // since the first refusal: name no label

  sroce_icrc_id_cache tx_ids_{};  // L_len per packet length, for set_segment_id()
  DatapathStats stats_;
};

}  // namespace sroce::daemon
