// The [dpdk] section of sroced.toml: every bad value is refused with a
// message naming the key; the shipped example is valid; the EAL command line
// and the vdev strings built from it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "config.h"
#include "eal.h"

using namespace sroce::daemon;
using sroce::dpdk::eal_arguments;
using sroce::dpdk::vdev_argument;

namespace {

std::string error_of(const std::string& toml, const std::vector<std::string>& sets = {}) {
  auto r = parse_config(toml, "t.toml", sets);
  return r ? std::string("(accepted)") : r.error().message;
}

Config parsed(const std::string& toml) {
  auto r = parse_config(toml, "t.toml");
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  return *r;
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// The value after `flag`.
std::string after(const std::vector<std::string>& v, const std::string& flag) {
  auto it = std::find(v.begin(), v.end(), flag);
  return it == v.end() || it + 1 == v.end() ? std::string("(absent)") : *(it + 1);
}

}  // namespace

TEST_CASE("datapath.kind = dpdk is accepted with the defaults", "[dpdk][config]") {
  Config c = parsed("[datapath]\nkind = \"dpdk\"");
  CHECK(c.datapath.kind == "dpdk");
  CHECK(c.dpdk.vdev == "af_xdp");
  CHECK(c.dpdk.queues == 1);
  CHECK_FALSE(c.dpdk.huge_pages);
}

TEST_CASE("bad [dpdk] values name their key", "[dpdk][config]") {
  struct Case {
    const char* toml;
    const char* message;
  };
  const std::string dp = "[datapath]\nkind = \"dpdk\"\n[dpdk]\n";
  for (const Case& c : std::vector<Case>{
           {"queues = 0", "t.toml: dpdk.queues: expected an integer in 1..16, got 0"},
           {"queues = \"2\"", "t.toml: dpdk.queues: expected an integer in 1..16, got \"2\""},
           {"port = 32", "t.toml: dpdk.port: expected an integer in 0..31, got 32"},
           {"rx_desc = 1000", "t.toml: dpdk.rx_desc: expected a power of two in 64..16384, got 1000"},
           {"tx_desc = 32", "t.toml: dpdk.tx_desc: expected a power of two in 64..16384, got 32"},
           {"mbufs = 100", "t.toml: dpdk.mbufs: expected an integer in 511..4194304, got 100"},
           {"mbuf_cache = 513", "t.toml: dpdk.mbuf_cache: expected an integer in 0..512, got 513"},
           {"mbuf_data_room = 1000", "t.toml: dpdk.mbuf_data_room: expected 0 (sized for the PMD) or 2048..65535, got 1000"},
           {"memory_mb = 8", "t.toml: dpdk.memory_mb: expected an integer in 16..1048576, got 8"},
           {"huge_pages = 1", "t.toml: dpdk.huge_pages: expected true or false, got 1"},
           {"sleep_poll_us = -1", "t.toml: dpdk.sleep_poll_us: expected an integer in 0..1000000, got -1"},
           {"idle_yield_passes = true", "t.toml: dpdk.idle_yield_passes: expected an integer in 0..1073741824, got true"},
           {"eal_args = \"--no-pci\"", "t.toml: dpdk.eal_args: expected an array of non-empty strings, got \"--no-pci\""},
           {"eal_args = [\"\"]", "t.toml: dpdk.eal_args: expected an array of non-empty strings, got an element \"\""},
           {"lanes = 4", "t.toml: dpdk.lanes: unknown key"},
       }) {
    INFO(c.toml);
    std::string msg = error_of(dp + c.toml);
    CHECK(msg.rfind(c.message, 0) == 0);
  }
}

TEST_CASE("cross-key rules of [dpdk], checked only when the datapath is dpdk", "[dpdk][config]") {
  const std::string dp = "[datapath]\nkind = \"dpdk\"\n[dpdk]\n";
  CHECK(error_of(dp + "vdev = \"eth0\"").find("t.toml: dpdk.vdev: expected \"af_xdp\", \"af_packet\", \"\" (a PCI "
                                              "port bound to vfio-pci) or a --vdev string") == 0);
  CHECK(error_of(dp + "vdev = \"net_af_packet0, iface=x\"").find("t.toml: dpdk.vdev: expected") == 0);
  CHECK(error_of(dp + "lcores = \"0-1\"").find("t.toml: dpdk.lcores: expected \"\" (not pinned) or one CPU number") ==
        0);
  CHECK(error_of(dp + "mbufs = 600\nmbuf_cache = 401")
            .find("t.toml: dpdk.mbuf_cache: expected at most dpdk.mbufs / 1.5 = 400") == 0);
  CHECK(error_of(dp + "mbufs = 4095\nmbuf_cache = 64")
            .find("t.toml: dpdk.mbufs: expected at least 6464 for 1 queue(s) of 1024 rx + 1024 tx descriptors") ==
        0);
  CHECK(error_of(dp + "vdev = \"af_packet\"\nmbufs = 4095\nmbuf_cache = 64") == "(accepted)");
  CHECK(error_of(dp + "queues = 4\nmbufs = 65535\nmemory_mb = 64")
            .find("t.toml: dpdk.memory_mb: expected at least") == 0);
  CHECK(error_of(dp + "static_neighbours = [\"10.0.0.2=02:00:00:00:00\"]")
            .find("t.toml: dpdk.static_neighbours: expected entries \"A.B.C.D=xx:xx:xx:xx:xx:xx\", got "
                  "\"10.0.0.2=02:00:00:00:00\"") == 0);
  CHECK(error_of(dp + "static_neighbours = [\"10.0.0.2=02:00:00:00:00:02\"]") == "(accepted)");
  // sroce's XDP program steers 4791 only.
  CHECK(error_of("[datapath]\nkind = \"dpdk\"\nport = 5000").find("t.toml: datapath.port: sroce's XDP program") == 0);
  CHECK(error_of("[datapath]\nkind = \"dpdk\"\nport = 5000\n[dpdk]\nvdev = \"af_packet\"") == "(accepted)");
  // With the UDP datapath the section is read (typos are refused) but its
  // cross-key rules do not apply.
  CHECK(error_of("[dpdk]\nvdev = \"eth0\"") == "(accepted)");
  CHECK(error_of("[dpdk]\nvdevs = \"eth0\"").find("t.toml: dpdk.vdevs: unknown key") == 0);
  // --set works on the section like anywhere else.
  CHECK(error_of("", {"datapath.kind=\"dpdk\"", "dpdk.queues=0"}).find("dpdk.queues: expected an integer") !=
        std::string::npos);
}

TEST_CASE("the example configuration of the DPDK datapath is valid and complete", "[dpdk][config]") {
  std::ifstream in(SROCE_DPDK_EXAMPLE_CONFIG);
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  auto r = parse_config(text, SROCE_DPDK_EXAMPLE_CONFIG);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  CHECK(r->datapath.kind == "dpdk");
  for (const char* key : {"vdev", "port", "queues", "lcores", "huge_pages", "memory_mb", "mbufs", "mbuf_cache",
                          "mbuf_data_room", "rx_desc", "tx_desc", "xdp_prog", "sleep_poll_us", "idle_yield_passes", "max_tx_ports",
                          "static_neighbours", "eal_args"}) {
    INFO(key);
    CHECK(text.find(std::string("\n") + key + " = ") != std::string::npos);
  }
}

TEST_CASE("the EAL command line", "[dpdk][eal]") {
  Config c = parsed("[datapath]\nkind = \"dpdk\"\n[dpdk]\nmemory_mb = 96\neal_args = [\"--iova-mode\", \"va\"]");
  auto a = eal_arguments(c, "veth0", "/x/sroce_xdp.bpf.o", "sroced-sroce0-42", "0,1");
  CHECK(a.front() == "sroced");
  CHECK(after(a, "--lcores") == "0@(0,1)");  // one lcore, not pinned
  CHECK_FALSE(has(a, "-l"));
  CHECK(has(a, "--no-huge"));
  CHECK(has(a, "--no-shconf"));
  CHECK_FALSE(has(a, "--in-memory"));  // EAL refuses it with --no-huge
  CHECK(after(a, "-m") == "96");
  CHECK(has(a, "--no-telemetry"));
  CHECK(after(a, "--file-prefix") == "sroced-sroce0-42");
  CHECK(has(a, "--no-pci"));
  CHECK(after(a, "--vdev") ==
        "net_af_xdp0,iface=veth0,start_queue=0,queue_count=1,busy_budget=0,xdp_prog=/x/sroce_xdp.bpf.o");
  // Extra arguments come last, as given.
  CHECK(a[a.size() - 2] == "--iova-mode");
  CHECK(a.back() == "va");

  Config h = parsed("[datapath]\nkind = \"dpdk\"\n[dpdk]\nhuge_pages = true\nlcores = \"1\"\nvdev = \"\"");
  auto b = eal_arguments(h, "", "", "p", "0,1");
  CHECK(after(b, "-l") == "1");
  CHECK(has(b, "--in-memory"));  // hugepage files unlinked at once
  CHECK_FALSE(has(b, "--no-huge"));
  CHECK_FALSE(has(b, "--no-pci"));  // a PCI port
  CHECK_FALSE(has(b, "--vdev"));
}

TEST_CASE("vdev shorthands expand on the daemon's interface", "[dpdk][eal]") {
  Config c = parsed("[datapath]\nkind = \"dpdk\"\n[dpdk]\nvdev = \"af_packet\"\nqueues = 2\nrx_desc = 512\n"
                    "mbufs = 16383");
  CHECK(vdev_argument(c, "eth1", "") ==
        "net_af_packet0,iface=eth1,qpairs=2,blocksz=4096,framesz=4096,framecnt=512,qdisc_bypass=0");
  Config x = parsed("[datapath]\nkind = \"dpdk\"\n[dpdk]\nxdp_prog = \"none\"");
  CHECK(vdev_argument(x, "eth1", "") == "net_af_xdp0,iface=eth1,start_queue=0,queue_count=1,busy_budget=0");
  Config o = parsed("[datapath]\nkind = \"dpdk\"\n[dpdk]\nvdev = \"net_tap0,iface=t0\"");
  CHECK(vdev_argument(o, "eth1", "") == "net_tap0,iface=t0");
  CHECK(sroce::dpdk::vdev_kind("af_xdp") == sroce::dpdk::VdevKind::kAfXdp);
  CHECK(sroce::dpdk::vdev_kind("net_af_xdp1,iface=a") == sroce::dpdk::VdevKind::kAfXdp);
  CHECK(sroce::dpdk::vdev_kind("net_af_packet0,iface=a") == sroce::dpdk::VdevKind::kAfPacket);
  CHECK(sroce::dpdk::vdev_kind("net_tap0") == sroce::dpdk::VdevKind::kOther);
  CHECK(sroce::dpdk::vdev_kind("") == sroce::dpdk::VdevKind::kNone);
}
