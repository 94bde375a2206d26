// sroced configuration: every bad value is refused with a message naming the
// key and what was expected; good files (and the shipped example) load.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "config.h"
#include "sroce/engine/engine.h"

using sroce::daemon::Config;
using sroce::daemon::apply_cc_config;
using sroce::Duration;
using sroce::EngineConfig;
namespace cc = sroce::cc;
using sroce::daemon::parse_config;

namespace {
std::string error_of(const std::string& toml, const std::vector<std::string>& sets = {}) {
  auto r = parse_config(toml, "t.toml", sets);
  return r ? std::string("(accepted)") : r.error().message;
}
}  // namespace

TEST_CASE("defaults when the file is empty", "[config]") {
  auto r = parse_config("", "t.toml");
  REQUIRE(r);
  CHECK(r->device.name == "sroce0");
  CHECK(r->datapath.port == 4791);
  CHECK(r->socket_path() == "/run/sroce/sroce0.sock");
  CHECK(r->control.allow_root);
  CHECK(r->control.allow_same_uid);
  CHECK(r->device.kernel == "auto");  // the kernel path when rdma_sroce.ko serves the device
}

TEST_CASE("device.kernel chooses the kernel path", "[config]") {
  for (const char* v : {"on", "off", "auto"}) {
    auto r = parse_config(std::string("[device]\nkernel = \"") + v + "\"", "t.toml");
    REQUIRE(r);
    CHECK(r->device.kernel == v);
  }
}

TEST_CASE("values are read", "[config]") {
  auto r = parse_config(R"(
[device]
name = "sroce7"
netdev = "eth1"
addresses = ["10.0.0.1", "10.0.0.2"]
[control]
allow_uids = [1000, 1001]
socket_mode = 0o666
[datapath]
batch = 32
gso = false
[engine]
max_qps = 64
seed = 42
[log]
level = "debug"
)",
                        "t.toml");
  REQUIRE(r);
  CHECK(r->device.name == "sroce7");
  CHECK(r->device.netdev == "eth1");
  CHECK(r->device.addresses == std::vector<std::string>{"10.0.0.1", "10.0.0.2"});
  CHECK(r->control.allow_uids == std::vector<uint32_t>{1000, 1001});
  CHECK(r->control.socket_mode == 0666);
  CHECK(r->datapath.batch == 32);
  CHECK_FALSE(r->datapath.gso);
  CHECK(r->engine.max_qps == 64);
  CHECK(r->engine.seed == 42);
  CHECK(r->log.level == "debug");
  CHECK(r->socket_path() == "/run/sroce/sroce7.sock");
}

TEST_CASE("each bad key names itself and what was expected", "[config]") {
  struct Case {
    const char* toml;
    const char* message;
  } cases[] = {
      {"[datapath]\nbatch = 0", "t.toml: datapath.batch: expected an integer in 1..1024, got 0"},
      {"[datapath]\nbatch = \"64\"", "t.toml: datapath.batch: expected an integer in 1..1024, got \"64\""},
      {"[datapath]\nport = 70000", "t.toml: datapath.port: expected an integer in 1..65535, got 70000"},
      {"[datapath]\ngso = 1", "t.toml: datapath.gso: expected true or false, got 1"},
      {"[datapath]\nkind = \"rdma\"", "t.toml: datapath.kind: expected one of \"udp\", \"dpdk\", got \"rdma\""},
      {"[device]\nkernel = \"yes\"", "t.toml: device.kernel: expected one of \"auto\", \"on\", \"off\", got \"yes\""},
      {"[datapath]\nuring_entries = 100", "t.toml: datapath.uring_entries: expected a power of two in 8..32768, got 100"},
      {"[datapath]\nrx_buffer_bytes = 1000",
       "t.toml: datapath.rx_buffer_bytes: expected an integer in 4608..1048576, got 1000"},
      {"[datapath]\nbusy_poll_us = -1", "t.toml: datapath.busy_poll_us: expected an integer in 0..1000000, got -1"},
      {"[datapath]\nslice_us = 50", "t.toml: datapath.slice_us: expected 0 (the kernel's default) or 100..100000, got 50"},
      {"[datapath]\nrealtime_priority = 100",
       "t.toml: datapath.realtime_priority: expected an integer in 0..99, got 100"},
      {"[datapath]\nbatchsize = 3", "t.toml: datapath.batchsize: unknown key"},
      {"[device]\nname = \"\"", "t.toml: device.name: expected a non-empty string of at most 63 bytes, got \"\""},
      {"[device]\nname = 5", "t.toml: device.name: expected a string, got 5"},
      {"[device]\naddresses = [\"10.0.0.300\"]",
       "t.toml: device.addresses: expected an array of IPv4 addresses as strings (\"10.0.0.1\"), got an element "
       "\"10.0.0.300\""},
      {"[device]\nnetdev = \"a-very-long-interface\"",
       "t.toml: device.netdev: expected a string of at most 15 bytes, got \"a-very-long-interface\""},
      {"[control]\nallow_uids = [-1]",
       "t.toml: control.allow_uids: expected an array of integers in 0..4294967294, got an element -1"},
      {"[control]\nsocket_mode = 0o1777", "t.toml: control.socket_mode: expected an integer in 0..511, got 1023"},
      {"[control]\nsocket = \"relative.sock\"", "t.toml: control.socket: expected an absolute path, got \"relative.sock\""},
      {"[control]\nmax_contexts = 0", "t.toml: control.max_contexts: expected an integer in 1..65534, got 0"},
      // 0xffff is the daemon's own memory tag (memory.h kLocalTag): never a context's.
      {"[control]\nmax_contexts = 65535", "t.toml: control.max_contexts: expected an integer in 1..65534, got 65535"},
      {"[limits]\nhello_timeout_ms = 0", "t.toml: limits.hello_timeout_ms: expected an integer in 10..3600000, got 0"},
      {"[limits]\nqps_per_uid = 0", "t.toml: limits.qps_per_uid: expected an integer in 1..1048576, got 0"},
      {"[engine]\nmax_sge = 1000", "t.toml: engine.max_sge: expected an integer in 1..256, got 1000"},
      {"[engine]\nmax_qps = 1.5", "t.toml: engine.max_qps: expected an integer in 1..1048576, got 1.5 (a float)"},
      {"[log]\nlevel = \"loud\"",
       "t.toml: log.level: expected one of \"trace\", \"debug\", \"info\", \"warn\", \"error\", \"critical\", "
       "\"off\", got \"loud\""},
      {"[logging]\nlevel = \"info\"", "t.toml: logging: unknown key"},
      {"datapath = 3", "t.toml: datapath: unknown key"},
  };
  for (const auto& c : cases) {
    INFO(c.toml);
    std::string msg = error_of(c.toml);
    CHECK(msg.rfind(c.message, 0) == 0);
  }
}

TEST_CASE("cross-key rules", "[config]") {
  CHECK(error_of("[datapath]\nrx_buffers = 512\ntx_slots = 512\nuring_entries = 256").find(
            "datapath.uring_entries: expected at least (rx_buffers + tx_slots) / 2 = 512") != std::string::npos);
}

TEST_CASE("syntax errors say where", "[config]") {
  std::string m = error_of("[datapath\nbatch = 3");
  CHECK(m.rfind("t.toml:1:", 0) == 0);
  CHECK(m.find("TOML syntax error") != std::string::npos);
}

TEST_CASE("set overrides a key and are validated like the file", "[config]") {
  auto r = parse_config("[datapath]\nbatch = 8", "t.toml", {"datapath.batch=16", "log.level=\"warn\""});
  REQUIRE(r);
  CHECK(r->datapath.batch == 16);
  CHECK(r->log.level == "warn");
  CHECK(error_of("", {"datapath.batch=0"}).find("datapath.batch: expected an integer in 1..1024, got 0") !=
        std::string::npos);
  CHECK(error_of("", {"log.level=debug"}).find("--set log.level=debug") == 0);
  CHECK(error_of("", {"nonsense"}).find("expected key=value") != std::string::npos);
}

TEST_CASE("the shipped example configuration is valid and documents every key", "[config]") {
  std::ifstream in(SROCE_EXAMPLE_CONFIG);
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  auto r = parse_config(text, SROCE_EXAMPLE_CONFIG);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  // Every key of the schema appears in the example (commented or not).
  for (const char* key : {"name", "netdev", "addresses", "socket", "socket_mode", "allow_root", "allow_same_uid",
                          "allow_uids", "allow_gids", "max_contexts", "max_objects_per_context", "kind", "port",
                          "gso", "gro", "batch", "rx_buffers", "rx_buffer_bytes", "tx_slots", "uring_entries",
                          "max_tx_ports", "sndbuf", "rcvbuf", "busy_poll_us", "realtime_priority", "slice_us", "max_qps", "max_cqs", "max_mrs",
                          "max_pds", "max_srqs", "max_ahs", "max_cqe", "max_qp_wr", "max_sge", "max_inline_data",
                          "max_rd_atomic", "seed", "lane_weights", "reorder_timeout_max_us", "level", "algorithm", "line_rate_mbps", "base_rtt_us",
                          "delay_target_us", "delay_per_hop_bytes", "dcqcn_preset", "notification_point",
                          "ack_every", "int_telemetry", "per_lane", "contexts_per_uid", "qps_per_uid",
                          "mrs_per_uid", "mr_bytes_per_uid", "ring_fds_per_uid", "root", "hello_timeout_ms"}) {
    INFO(key);
    CHECK(text.find(std::string("\n") + key + " = ") != std::string::npos);
  }
}

TEST_CASE("engine.cc chooses the congestion control and its parameters", "[config]") {
  // Default: off; the engine's congestion control stays disabled.
  auto d = parse_config("", "t.toml");
  REQUIRE(d);
  CHECK(d->engine.cc.algorithm == "none");
  EngineConfig off;
  off.cc.enable = true;
  apply_cc_config(*d, off);
  CHECK_FALSE(off.cc.enable);

  auto r = parse_config(
      "[engine.cc]\nalgorithm = \"delay\"\nline_rate_mbps = 200\nbase_rtt_us = 300\n"
      "delay_target_us = 800\ndelay_per_hop_bytes = 1500\nack_every = 2\nnotification_point = false\n"
      "int_telemetry = true\nper_lane = true\n",
      "t.toml");
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  EngineConfig ec;
  apply_cc_config(*r, ec);
  CHECK(ec.cc.enable);
  CHECK(ec.cc.config.algorithm == cc::Algorithm::kDelay);
  CHECK(ec.cc.line_rate_bps == 200'000'000);
  CHECK(ec.cc.base_rtt == Duration::micros(300));
  CHECK(ec.cc.config.delay.base_target == Duration::micros(800));
  CHECK(ec.cc.config.delay.per_hop_bytes == 1500);
  CHECK(ec.cc.ack_every == 2);
  CHECK_FALSE(ec.cc.notification_point);
  CHECK(ec.cc.int_telemetry);
  CHECK(ec.cc.per_lane);

  auto p = parse_config("[engine.cc]\nalgorithm = \"dcqcn\"\ndcqcn_preset = \"paper\"\n", "t.toml");
  REQUIRE(p);
  EngineConfig pc;
  apply_cc_config(*p, pc);
  CHECK_FALSE(pc.cc.int_telemetry);  // the daemon's default: no INT shims on a Linux fabric
  CHECK_FALSE(pc.cc.per_lane);
  CHECK(pc.cc.config.algorithm == cc::Algorithm::kDcqcn);
  CHECK(pc.cc.config.dcqcn.stage_threshold == cc::DcqcnConfig::paper().stage_threshold);
  CHECK(pc.cc.config.dcqcn.stage_threshold != cc::DcqcnConfig::connectx().stage_threshold);

  // "ltp": LTP with the delay rule's settings as its fallback.
  {
    auto l = parse_config("[engine.cc]\nalgorithm = \"ltp\"\ndelay_per_hop_bytes = 1234\n", "t.toml");
    REQUIRE(l);
    EngineConfig lc;
    apply_cc_config(*l, lc);
    CHECK(lc.cc.enable);
    CHECK(lc.cc.config.algorithm == cc::Algorithm::kLtp);
    CHECK(lc.cc.config.ltp.fallback.per_hop_bytes == 1234);
  }

  // Errors name the key and what was expected.
  CHECK(error_of("[engine.cc]\nalgorithm = \"swift\"")
            .find("engine.cc.algorithm: expected one of \"none\", \"dcqcn\", \"hpcc\", \"odin\", \"delay\", "
                  "\"ltp\", got \"swift\"") != std::string::npos);
  CHECK(error_of("[engine.cc]\nline_rate_mbps = 0").find("engine.cc.line_rate_mbps: expected an integer") !=
        std::string::npos);
  CHECK(error_of("[engine.cc]\ndcqcn_preset = \"cx7\"").find("engine.cc.dcqcn_preset: expected one of") !=
        std::string::npos);
  CHECK(error_of("[engine.cc]\nbase_rtt_us = 100\ndelay_target_us = 50")
            .find("engine.cc.delay_target_us: expected 0") != std::string::npos);
  CHECK(error_of("[engine.cc]\nalgoritm = \"delay\"").find("engine.cc.algoritm: unknown key") !=
        std::string::npos);
  CHECK(error_of("", {"engine.cc.algorithm=\"hpcc\"", "engine.cc.ack_every=0"})
            .find("engine.cc.ack_every: expected an integer in 1..64, got 0") != std::string::npos);
  auto s = parse_config("", "t.toml", {"engine.cc.algorithm=\"odin\""});
  REQUIRE(s);
  CHECK(s->engine.cc.algorithm == "odin");
}
