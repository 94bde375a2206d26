// sroce's XDP steering program (dpdk-pmd/xdp/sroce_xdp.bpf.c) on crafted
// frames with BPF_PROG_TEST_RUN (root): IPv4/UDP to 4791 goes to the AF_XDP
// map, everything else (ARP, IPv6 ND, other ports, TCP, fragments, options,
// VLAN, runts) passes to the kernel.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "frame.h"
#include "../skip.h"  // SROCE_SKIP

using namespace sroce::dpdk;

namespace {

struct Prog {
  bpf_object* obj = nullptr;
  int prog_fd = -1;
  int stats_fd = -1;
  int xsks_fd = -1;
  ~Prog() {
    if (obj) bpf_object__close(obj);
  }
};

// Sum over CPUs of one per-CPU counter.
uint64_t counter(int fd, uint32_t key) {
  int ncpu = libbpf_num_possible_cpus();
  std::vector<uint64_t> v(static_cast<size_t>(ncpu > 0 ? ncpu : 1));
  if (bpf_map_lookup_elem(fd, &key, v.data()) != 0) return ~0ull;
  uint64_t s = 0;
  for (uint64_t x : v) s += x;
  return s;
}

std::vector<uint8_t> roce(uint16_t dport = 4791) {
  std::vector<uint8_t> f(kFrameHeaders + 64, 0);
  TxAddr a;
  a.dst_mac = MacAddr{{2, 0, 0, 0, 0, 2}};
  a.src_mac = MacAddr{{2, 0, 0, 0, 0, 1}};
  a.src = 0x0a000001;
  a.dst = 0x0a000002;
  a.sport = 50000;
  a.dport = dport;
  write_headers(f.data(), a, 64, false);
  return f;
}

void fix_ip_checksum(std::vector<uint8_t>& f) {
  f[24] = f[25] = 0;
  uint16_t c = ipv4_header_checksum(&f[14]);
  f[24] = static_cast<uint8_t>(c >> 8);
  f[25] = static_cast<uint8_t>(c);
}

}  // namespace

TEST_CASE("the XDP program steers RoCEv2 only and passes everything else to the kernel", "[xdp]") {
  if (geteuid() != 0) {
    SROCE_SKIP("needs root (BPF_PROG_TEST_RUN)");
  }
  Prog p;
  p.obj = bpf_object__open_file(SROCE_XDP_OBJ, nullptr);
  REQUIRE(p.obj);
  REQUIRE(bpf_object__load(p.obj) == 0);
  bpf_program* prog = bpf_object__find_program_by_name(p.obj, "sroce_xdp_steer");
  REQUIRE(prog);
  CHECK(bpf_program__type(prog) == BPF_PROG_TYPE_XDP);
  p.prog_fd = bpf_program__fd(prog);
  // The af_xdp PMD looks the socket map up by this name.
  bpf_map* xsks = bpf_object__find_map_by_name(p.obj, "xsks_map");
  REQUIRE(xsks);
  CHECK(bpf_map__type(xsks) == BPF_MAP_TYPE_XSKMAP);
  bpf_map* stats = bpf_object__find_map_by_name(p.obj, "sroce_xdp_stats");
  REQUIRE(stats);
  p.stats_fd = bpf_map__fd(stats);

  auto run = [&](std::vector<uint8_t> frame) {
    LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame.data(), .data_size_in = static_cast<uint32_t>(frame.size()));
    REQUIRE(bpf_prog_test_run_opts(p.prog_fd, &o) == 0);
    return o.retval;
  };
  struct Case {
    const char* what;
    std::vector<uint8_t> frame;
    bool steered;
  };
  std::vector<Case> cases;
  cases.push_back({"RoCEv2", roce(), true});
  {
    auto f = roce();
    f[12] = 0x08;
    f[13] = 0x06;  // ARP
    cases.push_back({"ARP", f, false});
  }
  {
    // IPv6 neighbour solicitation: Ethernet + IPv6 (next header ICMPv6) + type 135.
    std::vector<uint8_t> f(14 + 40 + 24, 0);
    f[12] = 0x86;
    f[13] = 0xdd;
    f[14] = 0x60;
    f[14 + 5] = 24;
    f[14 + 6] = 58;
    f[14 + 7] = 255;
    f[14 + 40] = 135;
    cases.push_back({"IPv6 ND", f, false});
  }
  cases.push_back({"UDP to 4792", roce(4792), false});
  cases.push_back({"UDP to 53", roce(53), false});
  {
    auto f = roce();
    f[14 + 9] = 6;  // TCP
    fix_ip_checksum(f);
    cases.push_back({"TCP", f, false});
  }
  {
    auto f = roce();
    f[14 + 6] = 0x20;  // MF: first fragment
    fix_ip_checksum(f);
    cases.push_back({"IPv4 fragment", f, false});
  }
  {
    auto f = roce();
    f[14 + 6] = 0x00;
    f[14 + 7] = 0x10;  // offset 16: a later fragment
    fix_ip_checksum(f);
    cases.push_back({"IPv4 later fragment", f, false});
  }
  {
    auto f = roce();
    f[14] = 0x46;  // IP options
    cases.push_back({"IP options", f, false});
  }
  {
    auto f = roce();
    f.insert(f.begin() + 12, {0x81, 0x00, 0x00, 0x05});  // 802.1Q tag
    cases.push_back({"VLAN-tagged RoCEv2", f, false});
  }
  {
    auto f = roce();
    f.resize(30);  // Ethernet + 16 bytes of IPv4
    cases.push_back({"runt", f, false});
  }

  for (auto& c : cases) {
    INFO(c.what);
    const uint64_t s0 = counter(p.stats_fd, 0), p0 = counter(p.stats_fd, 1);
    // No AF_XDP socket in the map during a test run: the redirect falls back
    // to XDP_PASS, so the verdict is in the counters.
    CHECK(run(c.frame) == XDP_PASS);
    CHECK(counter(p.stats_fd, 0) - s0 == (c.steered ? 1u : 0u));
    CHECK(counter(p.stats_fd, 1) - p0 == (c.steered ? 0u : 1u));
  }
}
