// The DPDK datapath in-process, on a veth pair in two namespaces (root), once
// with the af_xdp vdev and once with af_packet. The peer is the kernel: plain
// UDP sockets, and a packet socket that sees the frames as they are on the
// wire. EAL can be initialised once per process, so each PMD is one test case
// (ctest runs each in its own process).
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "config.h"
#include "netns.h"
#include "proto/icrc.h"
#include "sroce/dpdk/dpdk_datapath.h"
#include "../skip.h"  // SROCE_SKIP

using namespace sroce;
using namespace sroce::dpdk::test;
using sroce::daemon::RxPacket;

namespace {

uint32_t ipv4(const std::string& s) {
  in_addr a{};
  inet_pton(AF_INET, s.c_str(), &a);
  return ntohl(a.s_addr);
}

sockaddr_in sa(uint32_t ip, uint16_t port) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_addr.s_addr = htonl(ip);
  s.sin_port = htons(port);
  return s;
}

// A UDP payload as the engine writes it: `n` bytes whose last 4 are the ICRC
// computed from the addressing (proto/icrc.h).
std::vector<uint8_t> payload(size_t n, const PacketMeta& m, uint8_t seed) {
  std::vector<uint8_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 13);
  sroce_icrc_addr a{};
  memcpy(a.src_gid, m.src.raw, 16);
  memcpy(a.dst_gid, m.dst.raw, 16);
  a.src_port = m.src_port;
  a.dst_port = m.dst_port;
  sroce_icrc_put(p.data() + n - 4, sroce_icrc_payload(&a, p.data(), n - 4));
  return p;
}

template <typename F>
bool eventually(F&& f, int ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return f();
}

void exercise(const std::string& kind, int subnet) {
  NetnsPair p(subnet);
  REQUIRE(p.ok);
  const uint32_t a = ipv4(p.addr_a), b = ipv4(p.addr_b);
  const uint16_t lane = 49170;

  // The peer's sockets, made inside its namespace.
  int peer = -1, cap = -1, peer2 = -1;
  {
    InNetns in(p.ns_b);
    REQUIRE(in.ok());
    peer = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(peer, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    sockaddr_in me = sa(b, 4791);
    REQUIRE(bind(peer, reinterpret_cast<sockaddr*>(&me), sizeof me) == 0);
    peer2 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    cap = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
    sockaddr_ll ll{};
    ll.sll_family = AF_PACKET;
    ll.sll_protocol = htons(ETH_P_ALL);
    ll.sll_ifindex = static_cast<int>(if_nametoindex(p.dev_b.c_str()));
    REQUIRE(bind(cap, reinterpret_cast<sockaddr*>(&ll), sizeof ll) == 0);
  }

  InNetns in(p.ns_a);
  REQUIRE(in.ok());
  auto cfg = daemon::parse_config("", "test",
                                  {"datapath.kind=\"dpdk\"", "dpdk.vdev=\"" + kind + "\"", "dpdk.memory_mb=128",
                                   "datapath.batch=32"});
  REQUIRE(cfg);
  auto created = dpdk::create_datapath(*cfg, p.dev_a, std::span<const uint32_t>(&a, 1));
  INFO((created ? std::string() : created.error().message));
  REQUIRE(created);
  auto& dp = **created;
  // RoCE MTU 2048 fits, 4096 does not (one page per mbuf for af_xdp, 4 KiB
  // frames for af_packet): the daemon reports 2048 and caps the engine.
  CHECK(dp.mtu_limit() >= 2048 + 72);
  CHECK(dp.mtu_limit() < 4096 + 72);
  if (kind == "af_xdp")
    CHECK(sh_out(p.in_a("ip -d link show " + p.dev_a)).find("sroce_xdp_steer") != std::string::npos);

  // ---- transmit: the kernel peer receives the payload with its addressing.
  PacketMeta m;
  m.src = Gid::from_ipv4(a);
  m.dst = Gid::from_ipv4(b);
  m.src_port = lane;
  m.dst_port = 4791;
  m.traffic_class = 0x02;  // ECT(0)
  const auto out = payload(1500, m, 7);
  auto buf = dp.tx_buffer();
  REQUIRE(buf.size() >= 2048 + 64);
  memcpy(buf.data(), out.data(), out.size());
  dp.tx_commit(out.size(), m);
  dp.tx_flush();
  // The first packet to b waits (parked) until the resolver has b's MAC.
  std::vector<uint8_t> got(4096);
  ssize_t n = -1;
  sockaddr_in from{};
  uint8_t tos = 0xff;
  REQUIRE(eventually(
      [&] {
        dp.poll();
        msghdr msg{};
        iovec iov{got.data(), got.size()};
        alignas(8) char ctl[64];
        socklen_t fl = sizeof from;
        msg.msg_name = &from;
        msg.msg_namelen = fl;
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctl;
        msg.msg_controllen = sizeof ctl;
        n = recvmsg(peer, &msg, MSG_DONTWAIT);
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n > 0 && c; c = CMSG_NXTHDR(&msg, c))
          if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) tos = *CMSG_DATA(c);
        return n > 0;
      },
      4000));
  CHECK(static_cast<size_t>(n) == out.size());
  CHECK(memcmp(got.data(), out.data(), out.size()) == 0);
  CHECK(ntohl(from.sin_addr.s_addr) == a);
  CHECK(ntohs(from.sin_port) == lane);  // the lane is the UDP source port
  CHECK(tos == 0x02);
  // On the wire: the ICRC recomputed over the real IPv4 header matches the
  // one computed from the addressing (identification 0, DF, as proto assumes).
  bool checked_wire = false;
  for (int i = 0; i < 64 && !checked_wire; ++i) {
    uint8_t f[4096];
    ssize_t fl = recv(cap, f, sizeof f, MSG_DONTWAIT);
    if (fl < 0) break;
    if (fl < 42 || f[12] != 0x08 || f[13] != 0x00 || f[23] != 17) continue;
    if ((f[34] << 8 | f[35]) != lane) continue;
    uint32_t icrc = 0;
    REQUIRE(sroce_icrc_ip(f + 14, static_cast<size_t>(fl) - 14 - 4, &icrc) == 0);
    CHECK(icrc == sroce_icrc_get(f + fl - 4));
    CHECK((f[18] << 8 | f[19]) == 0);       // identification
    CHECK((f[20] << 8 | f[21]) == 0x4000);  // DF
    checked_wire = true;
  }
  CHECK(checked_wire);

  // ---- receive: a datagram from the kernel peer, with CE marked.
  std::vector<RxPacket> rx(32);
  auto receive = [&](size_t& count) {
    return eventually(
        [&] {
          count = dp.rx_burst(rx);
          return count > 0;
        },
        3000);
  };
  int ce = 0x03;
  setsockopt(peer, IPPROTO_IP, IP_TOS, &ce, sizeof ce);
  // One to another port first: never handed to the engine.
  sockaddr_in other = sa(a, 4792), to_a = sa(a, 4791);
  const char junk[] = "not roce";
  sendto(peer, junk, sizeof junk, 0, reinterpret_cast<sockaddr*>(&other), sizeof other);
  const auto in_data = payload(900, m, 99);
  REQUIRE(sendto(peer, in_data.data(), in_data.size(), 0, reinterpret_cast<sockaddr*>(&to_a), sizeof to_a) ==
          static_cast<ssize_t>(in_data.size()));
  size_t cnt = 0;
  REQUIRE(receive(cnt));
  REQUIRE(cnt == 1);
  CHECK(rx[0].payload.size() == in_data.size());
  CHECK(memcmp(rx[0].payload.data(), in_data.data(), in_data.size()) == 0);
  CHECK(rx[0].meta.src.ipv4() == b);
  CHECK(rx[0].meta.dst.ipv4() == a);
  CHECK(rx[0].meta.src_port == 4791);
  CHECK(rx[0].meta.dst_port == 4791);
  CHECK((rx[0].meta.traffic_class & 3) == 3);  // CE reaches the engine (congestion control)

  // ---- loopback: to our own address, back through rx_burst.
  PacketMeta self = m;
  self.dst = Gid::from_ipv4(a);
  self.src_port = 49171;
  const auto loop_data = payload(200, self, 3);
  buf = dp.tx_buffer();
  REQUIRE(!buf.empty());
  memcpy(buf.data(), loop_data.data(), loop_data.size());
  dp.tx_commit(loop_data.size(), self);
  dp.tx_flush();
  REQUIRE(receive(cnt));
  REQUIRE(cnt == 1);
  CHECK(rx[0].meta.src_port == 49171);
  CHECK(rx[0].meta.dst.ipv4() == a);
  CHECK(memcmp(rx[0].payload.data(), loop_data.data(), loop_data.size()) == 0);

  // ---- the kernel still answers ARP on the interface the datapath owns.
  REQUIRE(sh(p.in_b("ip neigh flush dev " + p.dev_b)) == 0);
  sockaddr_in discard = sa(a, 9);
  CHECK(eventually(
      [&] {
        sendto(peer2, "", 0, 0, reinterpret_cast<sockaddr*>(&discard), sizeof discard);
        return sh_out(p.in_b("ip neigh show " + p.addr_a)).find(p.mac_a()) != std::string::npos;
      },
      3000));

  // ---- counters: per queue, and the sums the daemon shows.
  rx.assign(32, RxPacket{});
  dp.rx_burst(rx);  // releases the last views
  const auto& st = dp.stats();
  CHECK(st.tx_packets >= 1);
  CHECK(st.rx_packets >= 2);
  auto j = nlohmann::json::parse(dp.stats_json());
  CHECK(j["driver"] == (kind == "af_xdp" ? "net_af_xdp" : "net_af_packet"));
  CHECK(j["queues"][0]["tx_packets"].get<uint64_t>() >= 1);
  CHECK(j["tx_looped"].get<uint64_t>() == 1);
  CHECK(j["tx_parked"].get<uint64_t>() >= 1);  // the first packet waited for b's MAC
  CHECK(j["tx_no_neighbour"].get<uint64_t>() == 0);
  CHECK(j["neighbours"].get<uint64_t>() >= 1);
  CHECK(dp.port_stats().size() == 2);  // lanes 49170 and 49171

  // ---- shutdown gives the interface back to the kernel whole.
  created->reset();
  CHECK(sh_out(p.in_a("ip -d link show " + p.dev_a)).find("prog/xdp") == std::string::npos);
  close(peer);
  close(peer2);
  close(cap);
}

}  // namespace

TEST_CASE("af_xdp: frames out and in, loopback, ARP kept by the kernel, clean stop", "[datapath]") {
  if (!have_root()) {
    SROCE_SKIP("needs root (namespaces, AF_XDP)");
  }
  exercise("af_xdp", 83);
}

TEST_CASE("af_packet: frames out and in, loopback, ARP kept by the kernel, clean stop", "[datapath]") {
  if (!have_root()) {
    SROCE_SKIP("needs root (namespaces, AF_PACKET)");
  }
  exercise("af_packet", 84);
}
