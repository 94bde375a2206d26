// sroce-udp-bench: the raw UDP baseline of `make bench-e2e`.
//
// Over one veth path between two network namespaces (created here with
// unique names and removed at the end, or given with --ns-a/--ns-b) it
// measures
//   * raw UDP goodput with GSO on send and GRO on receive (plain sockets,
//     one sender, one receiver): the ceiling ib_write_bw is compared with;
//   * the same through sroced's UdpDatapath (io_uring, GSO packing), to show
//     what the datapath itself costs;
//   * a raw UDP ping-pong (64 bytes): p50 / p99 round trip.
// and prints one JSON line.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/udp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "udp_datapath.h"

namespace {

using sroce::daemon::Config;
using sroce::daemon::RxPacket;
using sroce::daemon::UdpDatapath;

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

int sh(const std::string& cmd) {
  int st = system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool enter_ns(const std::string& ns) {
  int fd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = setns(fd, CLONE_NEWNET) == 0;
  close(fd);
  return ok;
}

void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu % std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)), &s);
  sched_setaffinity(0, sizeof s, &s);
}

sockaddr_in addr_of(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

uint32_t ip_host(const std::string& ip) {
  in_addr a{};
  inet_pton(AF_INET, ip.c_str(), &a);
  return ntohl(a.s_addr);
}

// Runs `fn` in a child inside namespace `ns`; the child writes one double
// to the returned pipe.
struct Child {
  pid_t pid = -1;
  int out = -1;
};
template <typename F>
Child spawn(const std::string& ns, int cpu, F fn) {
  int p[2];
  if (pipe(p) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    double r = -1;
    if (enter_ns(ns)) {
      pin(cpu);
      r = fn();
    }
    (void)!write(p[1], &r, sizeof r);
    _exit(0);
  }
  close(p[1]);
  return {pid, p[0]};
}
double result(Child c) {
  double r = -1;
  if (c.out >= 0 && read(c.out, &r, sizeof r) != sizeof r) r = -1;
  if (c.out >= 0) close(c.out);
  if (c.pid > 0) waitpid(c.pid, nullptr, 0);
  return r;
}

// Receiver: counts payload bytes arriving on `port` from the first datagram
// until `seconds` after it; returns Gbit/s.
double raw_receiver(uint16_t port, double seconds) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  int one = 1, big = 64 << 20;
  setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
  sockaddr_in a = addr_of("0.0.0.0", port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  timeval tv{0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::vector<char> buf(65536);
  char ctl[64];
  double start = 0, end = 0;
  uint64_t bytes = 0;
  for (;;) {
    iovec iov{buf.data(), buf.size()};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    ssize_t n = recvmsg(fd, &m, 0);
    double t = now_s();
    if (n > 0) {
      if (start == 0) start = t;
      else bytes += static_cast<uint64_t>(n);  // the first batch starts the clock
      end = t;
    }
    if (start != 0 && (t - start >= seconds || (n < 0 && t - end > 0.5))) break;
    if (start == 0 && n < 0 && t > 0 && bytes == 0) {
      static int idle = 0;
      if (++idle > 50) return -1;  // nothing for 10 s
    }
  }
  close(fd);
  return end > start ? static_cast<double>(bytes) * 8 / (end - start) / 1e9 : -1;
}

double raw_sender(const std::string& dst, uint16_t port, size_t seg, double seconds) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  int big = 64 << 20, pmtu = IP_PMTUDISC_DO;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
  setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
  int gso = static_cast<int>(seg);  // the socket option takes an int (the cmsg a u16)
  if (setsockopt(fd, SOL_UDP, UDP_SEGMENT, &gso, sizeof gso) != 0) return -1;
  sockaddr_in to = addr_of(dst, port);
  size_t per = std::min<size_t>(64, (65507 / seg));
  std::vector<char> buf(per * seg, 'x');
  double start = now_s();
  while (now_s() - start < seconds + 0.5) {
    if (sendto(fd, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0 && errno != ENOBUFS &&
        errno != EAGAIN)
      return -1;
  }
  close(fd);
  return 0;
}

// The same traffic through UdpDatapath on both ends.
double dp_receiver(const std::string& self, uint16_t port, double seconds) {
  Config::Datapath c;
  c.port = port;
  c.rx_buffers = 64;
  c.uring_entries = 256;
  c.rcvbuf = 64 << 20;
  uint32_t addrs[] = {ip_host(self)};
  auto dp = UdpDatapath::create(c, addrs);
  if (!dp) return -1;
  std::vector<RxPacket> burst(256);
  double start = 0, end = 0, idle_since = now_s();
  uint64_t bytes = 0;
  for (;;) {
    (*dp)->poll();
    size_t n = (*dp)->rx_burst(burst);
    double t = now_s();
    if (n) {
      if (start == 0) {
        start = t;
      } else {
        for (size_t i = 0; i < n; ++i) bytes += burst[i].payload.size();
      }
      end = t;
      idle_since = t;
    }
    if (start != 0 && (t - start >= seconds || t - idle_since > 0.5)) break;
    if (start == 0 && t - idle_since > 10) return -1;
  }
  return end > start ? static_cast<double>(bytes) * 8 / (end - start) / 1e9 : -1;
}

double dp_sender(const std::string& self, const std::string& dst, uint16_t port, size_t seg, double seconds) {
  Config::Datapath c;
  c.port = static_cast<uint16_t>(port + 1);
  c.tx_slots = 64;
  c.uring_entries = 256;
  c.sndbuf = 64 << 20;
  uint32_t addrs[] = {ip_host(self)};
  auto dp = UdpDatapath::create(c, addrs);
  if (!dp) return -1;
  sroce::PacketMeta m;
  m.src = sroce::Gid::from_ipv4(ip_host(self));
  m.dst = sroce::Gid::from_ipv4(ip_host(dst));
  m.src_port = static_cast<uint16_t>(port + 2);
  m.dst_port = port;
  double start = now_s();
  while (now_s() - start < seconds + 0.5) {
    for (int i = 0; i < 64; ++i) {
      auto b = (*dp)->tx_buffer();
      if (b.empty()) break;
      memset(b.data(), 'y', 64);
      (*dp)->tx_commit(seg, m);
    }
    (*dp)->tx_flush();
    (*dp)->poll();
  }
  return 0;
}

// Ping-pong of `size`-byte datagrams; returns percentiles in microseconds.
double pong(uint16_t port, int iters) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a = addr_of("0.0.0.0", port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  char b[2048];
  for (int i = 0; i < iters + 10; ++i) {
    sockaddr_in from{};
    socklen_t fl = sizeof from;
    ssize_t n = recvfrom(fd, b, sizeof b, 0, reinterpret_cast<sockaddr*>(&from), &fl);
    if (n < 0) return -1;
    sendto(fd, b, static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&from), fl);
  }
  return 0;
}

std::vector<double> ping(const std::string& dst, uint16_t port, int iters, size_t size) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in to = addr_of(dst, port);
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::vector<char> b(size, 'p');
  std::vector<double> rtt;
  for (int i = 0; i < iters + 10; ++i) {
    double t0 = now_s();
    sendto(fd, b.data(), b.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    if (recv(fd, b.data(), b.size(), 0) < 0) {
      // The server may not be up yet: retry the first ones.
      if (i < 10) continue;
      break;
    }
    if (i >= 10) rtt.push_back((now_s() - t0) * 1e6);
  }
  std::sort(rtt.begin(), rtt.end());
  return rtt;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sroce-udp-bench: raw UDP GSO/GRO goodput and ping-pong over a veth path (JSON line)"};
  double seconds = 3;
  size_t seg = 4096;
  int iters = 2000;
  std::string ns_a, ns_b, ip_a = "10.233.0.1", ip_b = "10.233.0.2";
  bool skip_dp = false;
  app.add_option("--seconds", seconds, "duration of each goodput run")->capture_default_str();
  app.add_option("--segment", seg, "UDP payload bytes per packet (GSO segment)")->capture_default_str();
  app.add_option("--iters", iters, "ping-pong round trips")->capture_default_str();
  // Beside a running sroced (make demo), which owns 4791 on its host.
  uint16_t port = 4791;
  app.add_option("--port", port, "UDP port of the raw runs (the datapath run uses it and the next two)")
      ->capture_default_str();
  app.add_option("--ns-a", ns_a, "existing sender namespace (default: create one)");
  app.add_option("--ns-b", ns_b, "existing receiver namespace (default: create one)");
  app.add_option("--ip-a", ip_a, "sender address (with --ns-a)");
  app.add_option("--ip-b", ip_b, "receiver address (with --ns-b)");
  app.add_flag("--no-datapath", skip_dp, "skip the UdpDatapath run");
  CLI11_PARSE(app, argc, argv);

  bool own = ns_a.empty();
  if (own) {
    std::string base = "sub" + std::to_string(getpid());
    ns_a = base + "a";
    ns_b = base + "b";
    bool ok = sh("ip netns add " + ns_a) == 0 && sh("ip netns add " + ns_b) == 0 &&
              sh("ip link add " + base + "va netns " + ns_a + " type veth peer name " + base + "vb netns " + ns_b) ==
                  0 &&
              sh("ip -n " + ns_a + " addr add " + ip_a + "/24 dev " + base + "va") == 0 &&
              sh("ip -n " + ns_b + " addr add " + ip_b + "/24 dev " + base + "vb") == 0 &&
              sh("ip -n " + ns_a + " link set " + base + "va mtu 9000 up") == 0 &&
              sh("ip -n " + ns_b + " link set " + base + "vb mtu 9000 up") == 0;
    if (!ok) {
      fprintf(stderr, "sroce-udp-bench: cannot create namespaces (root needed)\n");
      sh("ip netns del " + ns_a);
      sh("ip netns del " + ns_b);
      return 1;
    }
  }
  nlohmann::json j;
  j["segment_bytes"] = seg;
  j["seconds"] = seconds;

  auto rx = spawn(ns_b, 1, [&] { return raw_receiver(port, seconds); });
  usleep(200000);
  auto tx = spawn(ns_a, 0, [&] { return raw_sender(ip_b, port, seg, seconds); });
  j["raw_udp_gbps"] = result(rx);
  result(tx);

  if (!skip_dp) {
    rx = spawn(ns_b, 1, [&] { return dp_receiver(ip_b, port, seconds); });
    usleep(200000);
    tx = spawn(ns_a, 0, [&] { return dp_sender(ip_a, ip_b, port, seg, seconds); });
    j["datapath_udp_gbps"] = result(rx);
    result(tx);
  }

  int p[2];
  if (pipe(p) == 0) {
    auto srv = spawn(ns_b, 1, [&] { return pong(port, iters); });
    pid_t cli = fork();
    if (cli == 0) {
      close(p[0]);
      double r[2] = {-1, -1};
      if (enter_ns(ns_a)) {
        pin(0);
        usleep(100000);
        auto rtt = ping(ip_b, port, iters, 64);
        if (!rtt.empty()) {
          r[0] = rtt[rtt.size() / 2];
          r[1] = rtt[std::min(rtt.size() - 1, rtt.size() * 99 / 100)];
        }
      }
      (void)!write(p[1], r, sizeof r);
      _exit(0);
    }
    close(p[1]);
    double r[2] = {-1, -1};
    if (read(p[0], r, sizeof r) != sizeof r) r[0] = r[1] = -1;
    close(p[0]);
    waitpid(cli, nullptr, 0);
    kill(srv.pid, SIGKILL);
    result(srv);
    j["raw_pingpong_p50_us"] = r[0];
    j["raw_pingpong_p99_us"] = r[1];
  }

  if (own) {
    sh("ip netns del " + ns_a);
    sh("ip netns del " + ns_b);
  }
  printf("%s\n", j.dump().c_str());
  return 0;
}
