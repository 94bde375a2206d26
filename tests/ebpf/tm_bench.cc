// Benchmark of the telemetry programs: packets per second through a veth pair
// between two network namespaces, without and with the programs attached
// (egress on the sender's end, ingress on the receiver's), for 64 B and 4 KiB
// RoCEv2 payloads, and the programs' own cost per packet (BPF run-time
// statistics). Prints one JSON line last.
//
//   sroce-tm-bench [--seconds S] [--rounds N]     (defaults 1 s, 5 rounds)
//
// Needs root. The rounds alternate without/with so that drift on a shared
// machine hits both; the median of the rounds is reported.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "live.h"
#include "proto/roce.h"
#include "telemetry/tm_loader.h"

using namespace sroce::tmtest;
using Clock = std::chrono::steady_clock;

namespace {

void pin_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % static_cast<int>(std::thread::hardware_concurrency()), &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

struct Round {
  double pps = 0;      // delivered packets per wall-clock second
  double pps_cpu = 0;  // delivered packets per CPU second of this process
};

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Send for `seconds` as fast as one thread can (sendmmsg, 32 a call, PSNs
// increasing); the receiver drains on another CPU. Returns delivered pps.
Round measure(const NetnsPair& n, size_t payload, double seconds) {
  UdpSock rx(n.ns_b, n.b4s, SROCE_UDP_PORT);
  UdpSock tx(n.ns_a, n.a4s, 43000);
  tx.connect_to(n.b4s, SROCE_UDP_PORT);

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> received{0};
  std::thread receiver([&] {
    pin_cpu(1);
    constexpr int kBatch = 64;
    std::vector<std::vector<uint8_t>> bufs(kBatch, std::vector<uint8_t>(9216));
    std::vector<iovec> iov(kBatch);
    std::vector<mmsghdr> msgs(kBatch);
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = {bufs[i].data(), bufs[i].size()};
      msgs[i].msg_hdr = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    timeval tv{0, 100000};
    setsockopt(rx.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (!stop.load(std::memory_order_relaxed)) {
      const int got = recvmmsg(rx.fd(), msgs.data(), kBatch, 0, nullptr);
      if (got > 0) received.fetch_add(static_cast<uint64_t>(got), std::memory_order_relaxed);
    }
  });

  pin_cpu(0);
  constexpr int kBatch = 32;
  Roce r;
  r.dqpn = 0x33;
  r.payload = payload;
  std::vector<std::vector<uint8_t>> bufs(kBatch, roce_payload(r));
  std::vector<iovec> iov(kBatch);
  std::vector<mmsghdr> msgs(kBatch);
  for (int i = 0; i < kBatch; ++i) {
    iov[i] = {bufs[i].data(), bufs[i].size()};
    msgs[i].msg_hdr = {};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  // PSNs go on across rounds: the path entry outlives a round, and a restart
  // from 0 would be a PSN regression (a retransmission) on every packet.
  static uint32_t psn = 0;
  auto blast = [&](double secs) {
    const auto until = Clock::now() + std::chrono::duration<double>(secs);
    while (Clock::now() < until) {
      for (int i = 0; i < kBatch; ++i) sroce_put_be24(bufs[i].data() + 9, psn++ & SROCE_PSN_MASK);
      sendmmsg(tx.fd(), msgs.data(), kBatch, 0);
    }
  };
  blast(0.2);  // warm up: ARP, caches
  const uint64_t r0 = received.load();
  const auto t0 = Clock::now();
  const double c0 = process_cpu_s();
  blast(seconds);
  // Let the receiver drain what is in flight (counted: it crossed the pair).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  const double dc = process_cpu_s() - c0;
  const uint64_t r1 = received.load();
  stop = true;
  receiver.join();
  pin_cpu(0);
  return {static_cast<double>(r1 - r0) / dt, dc > 0 ? static_cast<double>(r1 - r0) / dc : 0};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

bool attach_both(const NetnsPair& n, const std::string& pin, bool on) {
  char err[512] = "";
  for (const auto& [ns, ifc] : {std::pair{n.ns_a, n.if_a}, std::pair{n.ns_b, n.if_b}}) {
    sroce_tm_config c{};
    c.pin_dir = pin.c_str();
    c.netns = ns.c_str();
    const int rc = on ? sroce_tm_attach(ifc.c_str(), &c, err, sizeof(err))
                      : sroce_tm_detach(ifc.c_str(), &c, err, sizeof(err));
    if (rc < 0) {
      std::fprintf(stderr, "sroce-tm-bench: %s\n", err);
      return false;
    }
  }
  return true;
}

struct ProgStats {
  uint64_t ns = 0, cnt = 0;
};

ProgStats prog_stats(const std::string& path) {
  ProgStats s;
  const int fd = bpf_obj_get(path.c_str());
  if (fd < 0) return s;
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) {
    s.ns = info.run_time_ns;
    s.cnt = info.run_cnt;
  }
  close(fd);
  return s;
}

// The floor: a two-instruction tc program returning TC_ACT_UNSPEC on the
// same hooks. Its pps is what any tc program can reach here; its run time
// is the cost of running any program (and of the BPF stats timing).
class EmptyProg {
 public:
  explicit EmptyProg(const NetnsPair& n) : n_(n) {
    const bpf_insn insns[] = {
        {BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, -1},
        {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
    };
    fd_ = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "empty", "GPL", insns, 2, nullptr);
  }
  ~EmptyProg() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  void attach(bool on) {
    hook(n_.ns_a, n_.if_a, BPF_TC_EGRESS, on);
    hook(n_.ns_b, n_.if_b, BPF_TC_INGRESS, on);
  }
  ProgStats stats() const {
    ProgStats s;
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd_, &info, &len) == 0) {
      s.ns = info.run_time_ns;
      s.cnt = info.run_cnt;
    }
    return s;
  }

 private:
  void hook(const std::string& ns, const std::string& ifc, bpf_tc_attach_point where, bool on) {
    in_netns(ns, [&] {
      DECLARE_LIBBPF_OPTS(bpf_tc_hook, h, .ifindex = static_cast<int>(if_nametoindex(ifc.c_str())),
                          .attach_point = where);
      if (on) {
        bpf_tc_hook_create(&h);
        DECLARE_LIBBPF_OPTS(bpf_tc_opts, o, .prog_fd = fd_, .handle = 7, .priority = 7);
        bpf_tc_attach(&h, &o);
      } else {
        h.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
        bpf_tc_hook_destroy(&h);
      }
    });
  }
  const NetnsPair& n_;
  int fd_ = -1;
};

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
  }
  NetnsPair n;
  // Jumbo frames, so a 4 KiB RoCEv2 payload is one packet (RoCE MTU 4096).
  for (const auto& [ns, ifc] : {std::pair{n.ns_a, n.if_a}, std::pair{n.ns_b, n.if_b}}) {
    run({"ip", "-n", ns, "link", "set", ifc, "mtu", "9000"});
  }
  const std::string pin = unique_pin_dir();
  nlohmann::json results = nlohmann::json::array();
  // Keep the programs loaded between rounds (attached to b's loopback, which
  // carries no traffic here): a round's attach is then two tc filters, not
  // a load and verification.
  bool ok = true;
  {
    char err[512] = "";
    sroce_tm_config c{};
    c.pin_dir = pin.c_str();
    c.netns = n.ns_b.c_str();
    if (sroce_tm_attach("lo", &c, err, sizeof(err)) < 0) {
      std::fprintf(stderr, "sroce-tm-bench: %s\n", err);
      return 1;
    }
  }

  // Three configurations per round: nothing attached, an empty tc program,
  // the telemetry programs; the order reverses every round so that a trend
  // in the machine's load does not favour one of them.
  EmptyProg empty(n);
  for (size_t payload : {size_t{64}, size_t{4096}}) {
    std::vector<Round> without, with_empty, with;
    for (int r = 0; r < rounds && ok; ++r) {
      for (int k = 0; k < 3 && ok; ++k) {
        const int which = r % 2 ? 2 - k : k;
        if (which == 0) {
          without.push_back(measure(n, payload, seconds));
        } else if (which == 1 && empty.ok()) {
          empty.attach(true);
          with_empty.push_back(measure(n, payload, seconds));
          empty.attach(false);
        } else if (which == 2) {
          ok = attach_both(n, pin, true);
          if (ok) with.push_back(measure(n, payload, seconds));
          ok = ok && attach_both(n, pin, false);
        }
      }
    }
    auto med = [](const std::vector<Round>& v, bool cpu) {
      std::vector<double> x;
      for (const Round& r : v) x.push_back(cpu ? r.pps_cpu : r.pps);
      return median(x);
    };
    auto list = [](const std::vector<Round>& v) {
      nlohmann::json a = nlohmann::json::array();
      for (const Round& r : v)
        a.push_back({static_cast<uint64_t>(r.pps), static_cast<uint64_t>(r.pps_cpu)});
      return a;
    };
    const double a = med(without, false), b = med(with, false), e = med(with_empty, false);
    const double ac = med(without, true), bc = med(with, true), ec = med(with_empty, true);
    results.push_back(
        {{"payload_bytes", payload},
         {"frame_bytes", wire_bytes(false, Roce{.payload = payload})},
         {"pps_without", static_cast<uint64_t>(a)},
         {"pps_with", static_cast<uint64_t>(b)},
         {"ratio", a > 0 ? b / a : 0},
         {"pps_with_empty_prog", static_cast<uint64_t>(e)},
         {"ratio_empty_prog", a > 0 ? e / a : 0},
         {"pps_per_cpu_s_without", static_cast<uint64_t>(ac)},
         {"pps_per_cpu_s_with", static_cast<uint64_t>(bc)},
         {"pps_per_cpu_s_with_empty_prog", static_cast<uint64_t>(ec)},
         {"ratio_cpu", ac > 0 ? bc / ac : 0},
         {"ratio_cpu_empty_prog", ac > 0 ? ec / ac : 0},
         {"overhead_ns_per_pkt_from_cpu", ac > 0 && bc > 0 ? 1e9 / bc - 1e9 / ac : 0},
         {"rounds_pps_and_pps_per_cpu_s",
          {{"without", list(without)}, {"empty_prog", list(with_empty)}, {"with", list(with)}}}});
    std::fprintf(
        stderr,
        "payload %zu B: pps %.0f without, %.0f empty tc program, %.0f telemetry (ratio %.3f); "
        "per CPU-second %.0f / %.0f / %.0f (ratio %.3f)\n",
        payload, a, e, b, a > 0 ? b / a : 0, ac, ec, bc, ac > 0 ? bc / ac : 0);
  }

  // The programs' own cost: kernel BPF run-time statistics over one more run
  // each (the telemetry programs, then the empty one).
  nlohmann::json cost;
  auto per = [](ProgStats a, ProgStats b) {
    return b.cnt > a.cnt ? static_cast<double>(b.ns - a.ns) / static_cast<double>(b.cnt - a.cnt)
                         : 0.0;
  };
  if (ok && attach_both(n, pin, true)) {
    const int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
    const ProgStats e0 = prog_stats(pin + "/prog_egress"), i0 = prog_stats(pin + "/prog_ingress");
    measure(n, 64, seconds);
    const ProgStats e1 = prog_stats(pin + "/prog_egress"), i1 = prog_stats(pin + "/prog_ingress");
    attach_both(n, pin, false);
    double empty_ns = 0;
    if (empty.ok()) {
      empty.attach(true);
      const ProgStats z0 = empty.stats();
      measure(n, 64, seconds);
      empty_ns = per(z0, empty.stats());
      empty.attach(false);
    }
    if (stats_fd >= 0) close(stats_fd);
    cost = {{"egress_ns_per_pkt", per(e0, e1)},
            {"ingress_ns_per_pkt", per(i0, i1)},
            {"total_ns_per_pkt", per(e0, e1) + per(i0, i1)},
            {"empty_prog_ns_per_hook", empty_ns},
            {"runs_measured", (e1.cnt - e0.cnt) + (i1.cnt - i0.cnt)},
            {"stats_enabled", stats_fd >= 0}};
  }
  double worst = 1e9, worst_cpu = 1e9;
  for (auto& r : results) {
    worst = std::min(worst, r["ratio"].get<double>());
    worst_cpu = std::min(worst_cpu, r["ratio_cpu"].get<double>());
    // What the programs' own run time alone predicts: time per packet grows
    // from 1/pps to 1/pps + cost.
    if (!cost.is_null()) {
      const double t = 1e9 / std::max(1.0, r["pps_without"].get<double>());
      r["ratio_from_cost"] = t / (t + cost["total_ns_per_pkt"].get<double>());
    }
  }
  {
    char err[512] = "";
    sroce_tm_config c{};
    c.pin_dir = pin.c_str();
    sroce_tm_detach_all(&c, err, sizeof(err));
  }
  const nlohmann::json out = {{"bench", "ebpf_telemetry_veth"},
                              {"seconds_per_round", seconds},
                              {"rounds", rounds},
                              {"results", results},
                              {"bpf_cost", cost},
                              {"min_ratio", worst},
                              {"min_ratio_cpu", worst_cpu},
                              {"aim_ratio", 0.9},
                              {"ok", ok}};
  std::printf("%s\n", out.dump().c_str());
  return ok ? 0 : 1;
}
