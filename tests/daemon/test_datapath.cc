// UdpDatapath over loopback: GSO batching on send, GRO on receive, the
// addressing and ECN bits carried in PacketMeta.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <linux/in6.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "udp_datapath.h"
#include "proto/icrc.h"
#include "proto/packet.h"
#include "../skip.h"  // SROCE_SKIP

using namespace sroce;
using namespace sroce::daemon;

namespace {
constexpr uint32_t kLo = 0x7f000001;


Config::Datapath cfg_on(uint16_t port, bool gso) {
  Config::Datapath c;
  c.port = port;
  c.gso = gso;
  c.rx_buffers = 8;
  c.tx_slots = 8;
  return c;
}
}  // namespace

TEST_CASE("same-size packets leave as one GSO send and arrive intact", "[datapath]") {
  uint16_t port = static_cast<uint16_t>(10000 + getpid() % 9000);
  uint32_t addrs[] = {kLo};
  auto dp = UdpDatapath::create(cfg_on(port, true), addrs);
  REQUIRE(dp);
  auto& d = **dp;
  constexpr size_t kN = 10, kLen = 1200;
  PacketMeta m;
  m.src = Gid::from_ipv4(kLo);
  m.dst = Gid::from_ipv4(kLo);
  m.src_port = static_cast<uint16_t>(port + 1);
  m.dst_port = port;
  m.traffic_class = 0x02;  // ECT(0)
  for (size_t i = 0; i < kN; ++i) {
    auto buf = d.tx_buffer();
    REQUIRE(buf.size() >= kLen);
    memset(buf.data(), static_cast<int>(i), kLen);
    d.tx_commit(kLen, m);
  }
  d.tx_flush();
  std::vector<std::vector<std::byte>> payloads;
  std::vector<RxPacket> burst(64);
  RxPacket first{};
  for (int i = 0; i < 2000 && payloads.size() < kN; ++i) {
    d.poll();
    size_t n = d.rx_burst(burst);
    for (size_t k = 0; k < n; ++k) {
      if (payloads.empty()) first = burst[k];
      payloads.emplace_back(burst[k].payload.begin(), burst[k].payload.end());
    }
    if (n == 0) usleep(500);
  }
  REQUIRE(payloads.size() == kN);
  for (size_t i = 0; i < kN; ++i) {
    REQUIRE(payloads[i].size() == kLen);
    CHECK(payloads[i][0] == std::byte(i));
    // The last 4 bytes are the ICRC, which segment i > 0 has made for IPv4 id i (below).
    CHECK(payloads[i][kLen - 5] == std::byte(i));
  }
  CHECK(first.meta.src == Gid::from_ipv4(kLo));
  CHECK(first.meta.dst == Gid::from_ipv4(kLo));
  CHECK(first.meta.src_port == port + 1);  // the lane's source port is kept
  CHECK((first.meta.traffic_class & 3) == 2);  // ECN bits arrive (IP_RECVTOS)
  CHECK(d.stats().tx_packets == kN);
  CHECK(d.stats().tx_sends == 1);  // one GSO send for the whole train
  CHECK(d.port_stats().size() == 1);
  CHECK(d.port_stats()[0].port == port + 1);
}

TEST_CASE("a change of size or lane or destination starts a new send", "[datapath]") {
  uint16_t port = static_cast<uint16_t>(10000 + (getpid() + 7) % 9000);
  uint32_t addrs[] = {kLo};
  auto dp = UdpDatapath::create(cfg_on(port, true), addrs);
  REQUIRE(dp);
  auto& d = **dp;
  PacketMeta m;
  m.src = m.dst = Gid::from_ipv4(kLo);
  m.dst_port = port;
  // lane A: 3 x 1000 then a short 500 (ends the batch); lane B: 2 x 1000; lane A again 1 x 800.
  struct P {
    uint16_t sport;
    size_t len;
  } seq[] = {{100, 1000}, {100, 1000}, {100, 1000}, {100, 500}, {100, 1000},
             {101, 1000}, {101, 1000}, {100, 800}};
  for (const auto& p : seq) {
    auto buf = d.tx_buffer();
    REQUIRE(!buf.empty());
    memset(buf.data(), p.sport & 0xff, p.len);
    m.src_port = static_cast<uint16_t>(port + p.sport);
    d.tx_commit(p.len, m);
  }
  d.tx_flush();
  size_t got = 0;
  std::vector<RxPacket> burst(64);
  size_t sizes[1100] = {};
  for (int i = 0; i < 2000 && got < 8; ++i) {
    d.poll();
    size_t n = d.rx_burst(burst);
    for (size_t k = 0; k < n; ++k) ++sizes[std::min<size_t>(burst[k].payload.size(), 1099)];
    got += n;
    if (n == 0) usleep(500);
  }
  CHECK(got == 8);
  CHECK(sizes[1000] == 6);
  CHECK(sizes[500] == 1);
  CHECK(sizes[800] == 1);
  // Batches: [A 1000 x3 + 500] (after a short one nothing may follow),
  // [A 1000 + 800] (the last A joins its flow's open batch), [B 1000 x2].
  CHECK(d.stats().tx_sends == 3);
  CHECK(d.stats().tx_packets == 8);
}

TEST_CASE("without GSO every packet is its own send", "[datapath]") {
  uint16_t port = static_cast<uint16_t>(10000 + (getpid() + 13) % 9000);
  uint32_t addrs[] = {kLo};
  auto dp = UdpDatapath::create(cfg_on(port, false), addrs);
  REQUIRE(dp);
  auto& d = **dp;
  PacketMeta m;
  m.src = m.dst = Gid::from_ipv4(kLo);
  m.dst_port = port;
  m.src_port = static_cast<uint16_t>(port + 1);
  for (int i = 0; i < 4; ++i) {
    auto buf = d.tx_buffer();
    REQUIRE(!buf.empty());
    d.tx_commit(300, m);
  }
  d.tx_flush();
  std::vector<RxPacket> burst(64);
  size_t got = 0;
  for (int i = 0; i < 2000 && got < 4; ++i) {
    d.poll();
    size_t n = d.rx_burst(burst);
    got += n;
    if (n == 0) usleep(500);
  }
  CHECK(got == 4);
  CHECK(d.stats().tx_sends == 4);
}

TEST_CASE("zero-copy sends: trains leave with SENDMSG_ZC, arrive byte for byte, and their buffers come back",
          "[datapath][zc]") {
  uint16_t port = static_cast<uint16_t>(10000 + (getpid() + 17) % 9000);
  uint32_t addrs[] = {kLo};
  Config::Datapath c = cfg_on(port, true);
  c.send_zc = true;
  c.tx_slots = 4;  // few buffers: a slot held past its notification would stall the rounds
  auto dp = UdpDatapath::create(c, addrs);
  REQUIRE(dp);
  auto& d = **dp;
  PacketMeta m;
  m.src = m.dst = Gid::from_ipv4(kLo);
  m.dst_port = port;
  m.src_port = static_cast<uint16_t>(port + 1);
  constexpr size_t kN = 16, kLen = 1400;  // 22 400 bytes a train: above kZcMinBytes
  static_assert(kN * kLen >= UdpDatapath::kZcMinBytes);
  constexpr int kRounds = 40;
  auto byte_at = [](int round, size_t pkt, size_t i) {
    return static_cast<std::byte>((round * 131 + pkt * 17 + i * 7) & 0xff);
  };
  std::vector<RxPacket> burst(64);
  for (int r = 0; r < kRounds; ++r) {
    INFO("round " << r);
    for (size_t k = 0; k < kN; ++k) {
      std::span<std::byte> buf;
      // A full ring of buffers frees itself as the kernel's notifications arrive.
      for (int w = 0; w < 2000 && (buf = d.tx_buffer()).empty(); ++w) {
        d.poll();
        usleep(200);
      }
      REQUIRE(buf.size() >= kLen);
      for (size_t i = 0; i < kLen; ++i) buf[i] = byte_at(r, k, i);
      d.tx_commit(kLen, m);
    }
    d.tx_flush();
    size_t got = 0;
    for (int i = 0; i < 4000 && got < kN; ++i) {
      d.poll();
      size_t n = d.rx_burst(burst);
      for (size_t x = 0; x < n; ++x, ++got) {
        REQUIRE(burst[x].payload.size() == kLen);
        // Bytes 0..kLen-5 as written; the last 4 are the ICRC slot, which the datapath
        // rewrites for each segment's IPv4 id (set_segment_id).
        for (size_t i = 0; i + 4 < kLen; ++i) REQUIRE(burst[x].payload[i] == byte_at(r, got, i));
      }
      if (n == 0) usleep(200);
    }
    REQUIRE(got == kN);
  }
  if (d.zc_sends() == 0) SROCE_SKIP("the kernel refused io_uring zero-copy sends: only the fallback ran");
  CHECK(d.zc_sends() == static_cast<uint64_t>(kRounds));  // one GSO send per round, each zero-copy
  CHECK(d.stats().tx_packets == kN * kRounds);
  CHECK(d.stats().tx_errors == 0);
  // Over loopback the receiving socket cannot keep the sender's pages: the kernel copies them
  // on delivery, and each notification says so (the last may still be on its way).
  for (int i = 0; i < 2000 && d.zc_copied() < d.zc_sends(); ++i) {
    d.poll();
    usleep(200);
  }
  CHECK(d.zc_copied() == d.zc_sends());
}

TEST_CASE("flows interleaved packet by packet are regrouped into one send each", "[datapath]") {
  uint16_t port = static_cast<uint16_t>(10000 + (getpid() + 29) % 9000);
  uint32_t addrs[] = {kLo};
  auto dp = UdpDatapath::create(cfg_on(port, true), addrs);
  REQUIRE(dp);
  auto& d = **dp;
  PacketMeta m;
  m.src = m.dst = Gid::from_ipv4(kLo);
  m.dst_port = port;
  // Four QPs on four lanes, round-robin as the engine schedules them; each
  // packet carries its flow and its sequence number within the flow.
  constexpr int kFlows = 4, kPerFlow = 6;
  for (int i = 0; i < kFlows * kPerFlow; ++i) {
    auto buf = d.tx_buffer();
    REQUIRE(!buf.empty());
    memset(buf.data(), 0, 1000);
    buf[0] = std::byte(i % kFlows);
    buf[1] = std::byte(i / kFlows);
    m.src_port = static_cast<uint16_t>(port + 1 + i % kFlows);
    d.tx_commit(1000, m);
  }
  d.tx_flush();
  std::vector<RxPacket> burst(64);
  int next[kFlows] = {};
  size_t got = 0;
  bool in_order = true;
  for (int i = 0; i < 2000 && got < kFlows * kPerFlow; ++i) {
    d.poll();
    size_t n = d.rx_burst(burst);
    for (size_t k = 0; k < n; ++k) {
      int f = static_cast<int>(burst[k].payload[0]);
      int q = static_cast<int>(burst[k].payload[1]);
      REQUIRE(f < kFlows);
      in_order = in_order && q == next[f];  // order within a flow is kept
      next[f] = q + 1;
      CHECK(burst[k].meta.src_port == port + 1 + f);
    }
    got += n;
    if (n == 0) usleep(500);
  }
  CHECK(got == kFlows * kPerFlow);
  CHECK(in_order);
  CHECK(d.stats().tx_sends == kFlows);  // one GSO send per flow
}

TEST_CASE("size changes within interleaved flows never reorder a flow", "[datapath]") {
  uint16_t port = static_cast<uint16_t>(10000 + (getpid() + 37) % 9000);
  uint32_t addrs[] = {kLo};
  auto dp = UdpDatapath::create(cfg_on(port, true), addrs);
  REQUIRE(dp);
  auto& d = **dp;
  PacketMeta m;
  m.src = m.dst = Gid::from_ipv4(kLo);
  m.dst_port = port;
  // Like RDMA WRITEs: a FIRST packet with a RETH is longer than the MIDDLEs,
  // a LAST may be shorter; two QPs interleaved.
  const size_t sizes[] = {1016, 1000, 1000, 1000, 700, 1016, 1000, 1000, 1016, 1000, 400};
  constexpr int kFlows = 2;
  int n = 0;
  for (size_t len : sizes) {
    for (int f = 0; f < kFlows; ++f) {
      auto buf = d.tx_buffer();
      REQUIRE(!buf.empty());
      buf[0] = std::byte(f);
      buf[1] = std::byte(n);
      m.src_port = static_cast<uint16_t>(port + 1 + f);
      d.tx_commit(len, m);
    }
    ++n;
  }
  d.tx_flush();
  std::vector<RxPacket> burst(64);
  int next[kFlows] = {};
  size_t got = 0;
  for (int i = 0; i < 2000 && got < std::size(sizes) * kFlows; ++i) {
    d.poll();
    size_t k = d.rx_burst(burst);
    for (size_t j = 0; j < k; ++j) {
      int f = static_cast<int>(burst[j].payload[0]);
      int q = static_cast<int>(burst[j].payload[1]);
      REQUIRE(f < kFlows);
      CHECK(q == next[f]);
      CHECK(burst[j].payload.size() == sizes[q]);
      next[f] = q + 1;
    }
    got += k;
    if (k == 0) usleep(500);
  }
  CHECK(got == std::size(sizes) * kFlows);
}

TEST_CASE("a full lane table gives up the lane used longest ago", "[datapath]") {
  uint16_t port = static_cast<uint16_t>(10000 + (getpid() + 13) % 9000);
  uint32_t addrs[] = {kLo};
  Config::Datapath c = cfg_on(port, false);
  c.max_tx_ports = 2;
  auto dp = UdpDatapath::create(c, addrs);
  REQUIRE(dp);
  auto& d = **dp;
  PacketMeta m;
  m.src = m.dst = Gid::from_ipv4(kLo);
  m.dst_port = port;
  // Four lanes, room for two, each send flushed: lane 3 takes lane 1's entry, lane 4 lane
  // 2's, and every packet leaves from its own lane's port.
  for (uint16_t lane = 1; lane <= 4; ++lane) {
    auto buf = d.tx_buffer();
    REQUIRE(!buf.empty());
    memset(buf.data(), lane, 100);
    m.src_port = static_cast<uint16_t>(port + lane);
    d.tx_commit(100, m);
    d.tx_flush();
  }
  std::vector<uint16_t> from(5, 0);  // arrivals by payload (lane)
  std::vector<uint16_t> sport(5, 0);
  std::vector<RxPacket> burst(16);
  size_t got = 0;
  for (int i = 0; i < 2000 && got < 4; ++i) {
    d.poll();
    size_t n = d.rx_burst(burst);
    for (size_t k = 0; k < n; ++k) {
      const auto lane = static_cast<size_t>(burst[k].payload[0]);
      REQUIRE(lane >= 1);
      REQUIRE(lane <= 4);
      ++from[lane];
      sport[lane] = burst[k].meta.src_port;
    }
    got += n;
    if (n == 0) usleep(500);
  }
  REQUIRE(got == 4);  // nothing dropped
  for (uint16_t lane = 1; lane <= 4; ++lane) CHECK(from[lane] == 1);
  CHECK(sport[1] == port + 1);
  CHECK(sport[2] == port + 2);
  CHECK(sport[3] == port + 3);
  CHECK(sport[4] == port + 4);
  CHECK(d.stats().tx_port_evictions == 2);
  CHECK(d.stats().tx_port_errors == 0);
  REQUIRE(d.port_stats().size() == 2);
  std::set<uint16_t> kept;
  for (const PortStats& p : d.port_stats()) kept.insert(p.port);
  CHECK(kept == std::set<uint16_t>{static_cast<uint16_t>(port + 3), static_cast<uint16_t>(port + 4)});
}

namespace {
Gid loopback6() {
  Gid g;
  g.raw[15] = 1;  // ::1
  return g;
}

// Sends one packet per (flow label, source port) over [::1] and returns what arrived, in order.
std::vector<RxPacket> send_v6(UdpDatapath& d, uint16_t port, std::span<const std::pair<uint32_t, uint16_t>> sends,
                              uint32_t dqpn, std::vector<std::vector<std::byte>>& keep) {
  PacketMeta m;
  m.src = m.dst = loopback6();
  m.dst_port = port;
  m.hop_limit = 9;
  for (auto [label, sport] : sends) {
    auto buf = d.tx_buffer();
    REQUIRE(buf.size() >= 64);
    memset(buf.data(), 0, 64);
    // A BTH's DestQP (bytes 5-7): what a zero label is derived from.
    buf[5] = std::byte(dqpn >> 16);
    buf[6] = std::byte(dqpn >> 8);
    buf[7] = std::byte(dqpn);
    m.flow_label = label;
    m.src_port = sport;
    d.tx_commit(64, m);
    d.tx_flush();
  }
  std::vector<RxPacket> got;
  std::vector<RxPacket> burst(16);
  for (int i = 0; i < 2000 && got.size() < sends.size(); ++i) {
    d.poll();
    size_t n = d.rx_burst(burst);
    for (size_t k = 0; k < n; ++k) {
      keep.emplace_back(burst[k].payload.begin(), burst[k].payload.end());
      got.push_back(burst[k]);
    }
    if (n == 0) usleep(500);
  }
  return got;
}
}  // namespace

// Annex A17.4.5.1: the GRH's flow label is the IPv6 header's. The receiving socket reports
// the label each datagram carried (IPV6_FLOWINFO), so this sees what the kernel sent.
TEST_CASE("IPv6: the address vector's flow label leaves on the wire, a zero one is derived", "[datapath]") {
  uint16_t port = static_cast<uint16_t>(10000 + (getpid() + 17) % 9000);
  uint32_t addrs[] = {kLo};
  Gid addrs6[] = {loopback6()};
  auto dp = UdpDatapath::create(cfg_on(port, true), addrs, addrs6);
  // Only a host without IPv6 is a skip; any other failure to open the datapath is a failure.
  if (!dp && (dp.error().code == EAFNOSUPPORT || dp.error().code == EADDRNOTAVAIL))
    SROCE_SKIP("no IPv6 on this host: " << dp.error().message);
  REQUIRE(dp);
  auto& d = **dp;
  const uint32_t kQpn = 0x00abcd;
  const std::pair<uint32_t, uint16_t> sends[] = {{0x12345, static_cast<uint16_t>(port + 1)},
                                                 {0xfffff, static_cast<uint16_t>(port + 1)},
                                                 {0, static_cast<uint16_t>(port + 1)},
                                                 {0, static_cast<uint16_t>(port + 2)}};
  std::vector<std::vector<std::byte>> keep;
  auto got = send_v6(d, port, sends, kQpn, keep);
  REQUIRE(got.size() == 4);
  CHECK(got[0].meta.flow_label == 0x12345);
  CHECK(got[1].meta.flow_label == 0xfffff);
  const uint32_t d1 = UdpDatapath::derive_flow_label(kQpn, static_cast<uint16_t>(port + 1));
  const uint32_t d2 = UdpDatapath::derive_flow_label(kQpn, static_cast<uint16_t>(port + 2));
  CHECK(got[2].meta.flow_label == d1);
  CHECK(got[3].meta.flow_label == d2);
  CHECK(d1 != d2);  // a label per lane, as the source port is
  for (const auto& p : got) {
    CHECK(p.meta.hop_limit == 9);
    CHECK(p.meta.src == loopback6());
  }
  CHECK(got[0].meta.src_port == port + 1);
  CHECK(got[3].meta.src_port == port + 2);
  CHECK(d.flow_label_refused() == 0);
  CHECK(d.stats().tx_errors == 0);
  // The lanes' table holds the IPv6 source address (`sroce lanes`'s LOCAL column).
  REQUIRE(d.port_stats().size() == 2);
  CHECK(d.port_stats()[0].local == loopback6());
  CHECK(d.port_stats()[0].port == port + 1);
  CHECK(d.stats_json().find("\"flow_label_refused\":0") != std::string::npos);
}

TEST_CASE("the derived flow label is 20 bits, never 0, and spreads QPs and lanes", "[datapath]") {
  std::set<uint32_t> seen;
  for (uint32_t qpn = 1; qpn <= 64; ++qpn)
    for (uint16_t sport = 49152; sport < 49152 + 16; ++sport) {
      const uint32_t l = UdpDatapath::derive_flow_label(qpn, sport);
      CHECK(l != 0);
      CHECK(l <= 0xfffff);
      seen.insert(l);
    }
  CHECK(seen.size() >= 1020);  // 1024 pairs: next to no collisions in 2^20 labels
  CHECK(UdpDatapath::derive_flow_label(0x1000000 | 5, 7) == UdpDatapath::derive_flow_label(5, 7));  // 24-bit QPN
}

// Once a socket of the namespace holds an exclusive flow-label lease, Linux refuses every send
// that names an unleased label (EINVAL). The datapath must then resend without a label (the
// kernel's automatic one) and keep delivering. Run in a network namespace of its own (one
// thread's: unshare(CLONE_NEWNET) moves only the calling thread), so the lease touches nothing
// else; needs CAP_SYS_ADMIN and is skipped without.
TEST_CASE("IPv6: with an exclusive flow-label lease in the namespace, sends fall back to automatic labels",
          "[datapath]") {
  struct Outcome {
    std::string skip;
    std::string fail;  // set by the thread: a failure, not a skip
    size_t got = 0;
    uint32_t labels[3] = {};
    uint64_t refused = 0, tx_errors = 0;
    bool named_after = true;
  } o;
  std::thread t([&o] {
    if (unshare(CLONE_NEWNET) != 0) {
      if (errno == EPERM)
        o.skip = std::string("unshare(CLONE_NEWNET): ") + strerror(errno) + " (needs root)";
      else
        o.fail = std::string("unshare(CLONE_NEWNET): ") + strerror(errno);
      return;
    }
    int s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    ioctl(s, SIOCGIFFLAGS, &ifr);
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) {
      o.fail = std::string("lo up: ") + strerror(errno);
      close(s);
      return;
    }
    // An exclusive lease of label 0x777 towards ::1 (a lease names a destination).
    in6_flowlabel_req req{};
    req.flr_dst = in6addr_loopback;
    req.flr_label = htonl(0x777);
    req.flr_action = IPV6_FL_A_GET;
    req.flr_share = IPV6_FL_S_EXCL;
    req.flr_flags = IPV6_FL_F_CREATE;
    if (setsockopt(s, IPPROTO_IPV6, IPV6_FLOWLABEL_MGR, &req, sizeof req) != 0) {
      o.fail = std::string("exclusive flow-label lease: ") + strerror(errno);
      close(s);
      return;
    }
    const uint16_t port = static_cast<uint16_t>(10000 + (getpid() + 19) % 9000);
    uint32_t addrs[] = {kLo};
    Gid addrs6[] = {loopback6()};
    auto dp = UdpDatapath::create(cfg_on(port, true), addrs, addrs6);
    if (!dp) {
      const int code = dp.error().code;
      (code == EAFNOSUPPORT || code == EADDRNOTAVAIL ? o.skip : o.fail) = dp.error().message;
      close(s);
      return;
    }
    const std::pair<uint32_t, uint16_t> sends[] = {{0x12345, static_cast<uint16_t>(port + 1)},
                                                   {0x12345, static_cast<uint16_t>(port + 1)},
                                                   {0, static_cast<uint16_t>(port + 2)}};
    std::vector<std::vector<std::byte>> keep;
    std::vector<RxPacket> got;
    // send_v6 uses REQUIRE: not from this thread. The same steps, checked by the caller.
    PacketMeta m;
    m.src = m.dst = loopback6();
    m.dst_port = port;
    m.hop_limit = 9;
    for (auto [label, sport] : sends) {
      auto buf = (*dp)->tx_buffer();
      if (buf.size() < 64) break;
      memset(buf.data(), 0, 64);
      m.flow_label = label;
      m.src_port = sport;
      (*dp)->tx_commit(64, m);
      (*dp)->tx_flush();
      for (int i = 0; i < 20; ++i) {  // let this send complete (and be resent) before the next
        (*dp)->poll();
        (*dp)->tx_flush();
        usleep(500);
      }
    }
    std::vector<RxPacket> burst(16);
    for (int i = 0; i < 2000 && o.got < 3; ++i) {
      (*dp)->poll();
      (*dp)->tx_flush();
      size_t n = (*dp)->rx_burst(burst);
      for (size_t k = 0; k < n && o.got < 3; ++k) o.labels[o.got++] = burst[k].meta.flow_label;
      if (n == 0) usleep(500);
    }
    o.refused = (*dp)->flow_label_refused();
    o.tx_errors = (*dp)->stats().tx_errors;
    o.named_after = (*dp)->stats_json().find("\"flow_labels_named\":true") != std::string::npos;
    dp->reset();
    close(s);
  });
  t.join();
  INFO(o.fail);
  REQUIRE(o.fail.empty());
  if (!o.skip.empty()) SROCE_SKIP(o.skip);
  CHECK(o.got == 3);         // nothing lost: the refused send went again, unlabelled
  CHECK(o.refused == 1);     // only the first labelled send was refused; later ones name none
  CHECK(o.tx_errors == 0);
  CHECK_FALSE(o.named_after);
  for (uint32_t l : o.labels) CHECK(l != 0x12345);  // the kernel's automatic labels
}

// UDP GSO and the IPv4 identification (docs/wire.md): the kernel gives segment i of one
// send the id i, and each segment must carry the ICRC of its own id. A TUN device without
// offloads (none are enabled unless TUNSETOFFLOAD asks) makes the kernel segment the send
// in software and hands the test every segment with the IP header it really got; the ICRC
// is then checked over that header (sroce_icrc_ip), as rxe and the DPDK datapath check it.
// In a network namespace of this thread's own; needs CAP_NET_ADMIN and /dev/net/tun.
namespace {
struct TunOutcome {
  std::string skip, fail;
  std::vector<std::vector<uint8_t>> frames;  // IPv4 packets read from the TUN
  uint64_t sends = 0, tx_port_errors = 0;
};

// kN WRITE MIDDLE packets of kPayload bytes, BTH and ICRC (for IPv4 id 0 and the lane's
// source port) as the engine builds them, packet i on lane sports[i % size], sent by a
// UdpDatapath (GSO on, `max_tx_ports` lane sockets) towards a TUN device; what the kernel
// put on the TUN comes back.
constexpr uint32_t kTunLocal = 0x0ac90001, kTunPeer = 0x0ac90002;  // 10.201.0.1 -> 10.201.0.2 (via the TUN)
constexpr size_t kTunN = 12, kTunPayload = 1000;
TunOutcome send_through_tun(uint32_t max_tx_ports, const std::vector<uint16_t>& sports) {
  TunOutcome o;
  std::thread t([&o, max_tx_ports, &sports] {
    if (unshare(CLONE_NEWNET) != 0) {
      (errno == EPERM ? o.skip : o.fail) = std::string("unshare(CLONE_NEWNET): ") + strerror(errno);
      return;
    }
    const int tun = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (tun < 0) {
      o.skip = std::string("/dev/net/tun: ") + strerror(errno);
      return;
    }
    ifreq ifr{};
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "gsotun0");
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    auto cfg_addr = [&](unsigned long req, uint32_t a) {
      ifreq r{};
      snprintf(r.ifr_name, sizeof r.ifr_name, "gsotun0");
      sockaddr_in sin{};
      sin.sin_family = AF_INET;
      sin.sin_addr.s_addr = htonl(a);
      memcpy(&r.ifr_addr, &sin, sizeof sin);
      return ioctl(s, req, &r) == 0;
    };
    ifreq up{};
    snprintf(up.ifr_name, sizeof up.ifr_name, "gsotun0");
    up.ifr_flags = IFF_UP;
    if (ioctl(tun, TUNSETIFF, &ifr) != 0 || !cfg_addr(SIOCSIFADDR, kTunLocal) ||
        !cfg_addr(SIOCSIFNETMASK, 0xffffff00) || ioctl(s, SIOCSIFFLAGS, &up) != 0) {
      o.fail = std::string("TUN setup: ") + strerror(errno);
      close(s);
      close(tun);
      return;
    }
    const uint16_t port = SROCE_UDP_PORT;
    uint32_t addrs[] = {kTunLocal};
    Config::Datapath c = cfg_on(port, true);
    c.max_tx_ports = max_tx_ports;
    auto dp = UdpDatapath::create(c, addrs);
    if (!dp) {
      o.fail = dp.error().message;
      close(s);
      close(tun);
      return;
    }
    PacketMeta m;
    m.src = Gid::from_ipv4(kTunLocal);
    m.dst = Gid::from_ipv4(kTunPeer);
    m.dst_port = port;
    sroce_icrc_addr a{};
    memcpy(a.src_gid, m.src.raw, 16);
    memcpy(a.dst_gid, m.dst.raw, 16);
    a.dst_port = port;
    for (size_t i = 0; i < kTunN; ++i) {
      m.src_port = sports[i % sports.size()];
      a.src_port = m.src_port;
      auto buf = (*dp)->tx_buffer();
      if (buf.size() < SROCE_BTH_LEN + kTunPayload + SROCE_ICRC_LEN) {
        o.fail = "no tx buffer";
        break;
      }
      auto* p = reinterpret_cast<uint8_t*>(buf.data());
      sroce_bth b{};
      b.opcode = SROCE_OP_WRITE_MIDDLE;
      b.pkey = 0xffff;
      b.dqpn = 0x000123;
      b.psn = static_cast<uint32_t>(100 + i);
      sroce_bth_write(p, &b);
      for (size_t k = 0; k < kTunPayload; ++k) p[SROCE_BTH_LEN + k] = static_cast<uint8_t>(i * 31 + k);
      const size_t n = SROCE_BTH_LEN + kTunPayload;
      sroce_icrc_put(p + n, sroce_icrc_payload(&a, p, n));
      (*dp)->tx_commit(n + SROCE_ICRC_LEN, m);
    }
    (*dp)->tx_flush();
    uint8_t frame[70000];
    for (int i = 0; i < 400 && o.frames.size() < kTunN + 8; ++i) {
      (*dp)->poll();
      pollfd pf{tun, POLLIN, 0};
      if (::poll(&pf, 1, 5) <= 0) {
        if (o.frames.size() >= kTunN) break;
        continue;
      }
      const ssize_t r = read(tun, frame, sizeof frame);
      // Only the test's UDP datagrams (the kernel may also send e.g. IGMP/MLD on the link).
      if (r >= 28 && (frame[0] >> 4) == 4 && frame[9] == IPPROTO_UDP)
        o.frames.emplace_back(frame, frame + r);
    }
    o.sends = (*dp)->stats().tx_sends;
    o.tx_port_errors = (*dp)->stats().tx_port_errors;
    dp->reset();
    close(s);
    close(tun);
  });
  t.join();
  return o;
}

// The ICRC a frame carries against the one of the IP and UDP headers it really has.
bool icrc_matches_wire(const std::vector<uint8_t>& f) {
  uint32_t want = 0;
  return sroce_icrc_ip(f.data(), f.size() - SROCE_ICRC_LEN, &want) == 0 &&
         sroce_icrc_get(f.data() + f.size() - SROCE_ICRC_LEN) == want;
}
}  // namespace

TEST_CASE("IPv4 GSO: every segment leaves with the ICRC of the id the kernel gives it", "[datapath][gso]") {
  const TunOutcome o = send_through_tun(1024, {0xc123});
  INFO(o.fail);
  REQUIRE(o.fail.empty());
  if (!o.skip.empty()) SROCE_SKIP(o.skip);
  CHECK(o.sends == 1);  // one UDP_SEGMENT send ...
  REQUIRE(o.frames.size() == kTunN);  // ... that the kernel cut into kN datagrams
  for (size_t i = 0; i < kTunN; ++i) {
    const auto& f = o.frames[i];
    INFO("segment " << i);
    REQUIRE(f.size() == 28 + SROCE_BTH_LEN + kTunPayload + SROCE_ICRC_LEN);
    const uint16_t id = sroce_get_be16(f.data() + 4);
    CHECK((f[6] & 0x40) != 0);  // DF
    CHECK(id == i);             // the numbering sroce_icrc_set_ip_id assumes
    CHECK(sroce_get_be24(f.data() + 28 + 9) == 100 + i);  // in order (PSN)
    CHECK(icrc_matches_wire(f));  // the ICRC of the id on the wire
  }
}

// The ICRC covers the UDP source port. With the port table full (one lane socket here) and
// its one entry held by a batch not yet sent, a second lane's packets leave from the
// well-known port: they must carry the ICRC of that port, or the peer drops every one of
// them as a bad ICRC (as a long-lived sroced whose table had filled did, 8 December 2026:
// RC retry exceeded on every new QP).
TEST_CASE("a lane that falls back to the well-known port leaves with that port's ICRC", "[datapath][gso]") {
  const TunOutcome o = send_through_tun(1, {0xc123, 0xc456});
  INFO(o.fail);
  REQUIRE(o.fail.empty());
  if (!o.skip.empty()) SROCE_SKIP(o.skip);
  CHECK(o.tx_port_errors >= 1);
  REQUIRE(o.frames.size() == kTunN);
  size_t lane_a = 0, fallback = 0;
  for (const auto& f : o.frames) {
    REQUIRE(f.size() == 28 + SROCE_BTH_LEN + kTunPayload + SROCE_ICRC_LEN);
    const uint16_t sport = sroce_get_be16(f.data() + 20);
    const uint32_t psn = sroce_get_be24(f.data() + 28 + 9);
    INFO("psn " << psn << " sport " << sport << " id " << sroce_get_be16(f.data() + 4));
    CHECK(icrc_matches_wire(f));
    // Even PSNs were lane 0xc123's (it got the one socket), odd ones 0xc456's.
    if ((psn - 100) % 2 == 0) {
      CHECK(sport == 0xc123);
      ++lane_a;
    } else {
      CHECK(sport == SROCE_UDP_PORT);
      ++fallback;
    }
  }
  CHECK(lane_a == kTunN / 2);
  CHECK(fallback == kTunN / 2);
}
