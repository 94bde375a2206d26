// `sroce status|qps|lanes` against a live sroced: the tables show what the
// daemon reports, and --json is the daemon's JSON.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include <algorithm>

#include "abi_client.h"
#include "cmd_daemon.h"
#include "harness.h"
#include "../skip.h"  // SROCE_SKIP

using namespace sroce::test;

TEST_CASE("sroce status and qps show a live context", "[cli]") {
  DaemonProcess d({"--address", "127.0.0.1", "--port", std::to_string(20000 + (getpid() + 9) % 12000)});
  REQUIRE(d.ok());
  AbiClient c;
  REQUIRE(c.connect(d.socket()) == 0);
  REQUIRE(c.hello() == 0);
  uint32_t pd = 0;
  REQUIRE(c.alloc_pd(&pd) == 0);
  ClientCq cq;
  REQUIRE(c.create_cq(16, 0, &cq) == 0);
  ClientQp qp;
  REQUIRE(c.create_qp(pd, cq.handle, cq.handle, IBV_QPT_RC, 8, &qp) == 0);

  auto st = sroce::cli::fetch_daemon_stats(d.socket());
  REQUIRE(st);
  CHECK((*st)["device"] == "sroce0");
  CHECK((*st)["objects"]["qps"] == 1);
  std::string status = sroce::cli::render_status(*st);
  CHECK(status.find("sroce0:") == 0);
  CHECK(status.find("GIDs: 127.0.0.1") != std::string::npos);
  CHECK(status.find("1 contexts, 1 PDs, 0 MRs, 1 CQs, 1 QPs") != std::string::npos);
  CHECK(status.find(std::to_string(getpid())) != std::string::npos);  // the context's pid
  std::string qps = sroce::cli::render_qps(*st);
  CHECK(qps.find("QPN") == 0);
  CHECK(qps.find(std::to_string(qp.qpn)) != std::string::npos);
  CHECK(qps.find("RESET") != std::string::npos);
  CHECK(sroce::cli::render_lanes(*st) == "no lanes used yet\n");
}

TEST_CASE("sroce status says what is wrong when no daemon listens", "[cli]") {
  auto st = sroce::cli::fetch_daemon_stats("/tmp/" + unique_name("nothing") + ".sock");
  REQUIRE_FALSE(st);
  CHECK(st.error().message.find("is sroced running?") != std::string::npos);
}

TEST_CASE("the device name picks the socket unless SROCE_SOCKET is set", "[cli]") {
  unsetenv("SROCE_SOCKET");
  CHECK(sroce::cli::daemon_socket_path("sroce3") == "/run/sroce/sroce3.sock");
  setenv("SROCE_SOCKET", "/tmp/x.sock", 1);
  CHECK(sroce::cli::daemon_socket_path("sroce3") == "/tmp/x.sock");
  unsetenv("SROCE_SOCKET");
}

TEST_CASE("statistics larger than one message arrive through a memfd", "[cli]") {
  DaemonProcess d({"--address", "127.0.0.1", "--port", std::to_string(20000 + (getpid() + 10) % 12000)});
  REQUIRE(d.ok());
  AbiClient c;
  REQUIRE(c.connect(d.socket()) == 0);
  REQUIRE(c.hello() == 0);
  uint32_t pd = 0;
  REQUIRE(c.alloc_pd(&pd) == 0);
  ClientCq cq;
  REQUIRE(c.create_cq(16, 0, &cq) == 0);
  constexpr int kQps = 40;
  for (int i = 0; i < kQps; ++i) {
    ClientQp qp;
    REQUIRE(c.create_qp(pd, cq.handle, cq.handle, IBV_QPT_RC, 4, &qp) == 0);
  }
  auto st = sroce::cli::fetch_daemon_stats(d.socket());
  REQUIRE(st);
  CHECK(st->dump().size() > SROCE_MAX_MSG);  // so the memfd path was taken
  CHECK((*st)["qps"].size() == kQps);
  // The test client's reader agrees.
  auto text = c.stats();
  CHECK(nlohmann::json::parse(text)["objects"]["qps"] == kQps);
}

TEST_CASE("datapath.realtime_priority makes the loop SCHED_FIFO and sroce status says so", "[cli]") {
  if (geteuid() != 0) {
    SROCE_SKIP("needs root (CAP_SYS_NICE) to set SCHED_FIFO");
  }
  DaemonProcess d({"--address", "127.0.0.1", "--port", std::to_string(20000 + (getpid() + 11) % 12000), "--set",
                   "datapath.realtime_priority=7", "--set", "datapath.busy_poll_us=0"});
  REQUIRE(d.ok());
  CHECK(sched_getscheduler(d.pid()) == SCHED_FIFO);
  sched_param sp{};
  REQUIRE(sched_getparam(d.pid(), &sp) == 0);
  CHECK(sp.sched_priority == 7);
  auto st = sroce::cli::fetch_daemon_stats(d.socket());
  REQUIRE(st);
  CHECK((*st)["sched"] == "fifo");
  CHECK(d.stop() == 0);  // SIGTERM still ends a real-time loop cleanly
}

TEST_CASE("by default the loop is a normal task", "[cli]") {
  // Started nice (as a user's `nice sroced` or systemd's Nice=): the slice leaves that alone.
  const int nice_before = getpriority(PRIO_PROCESS, 0);
  const int nice_daemon = std::min(19, nice_before + 3);  // raising it needs no privilege
  REQUIRE(setpriority(PRIO_PROCESS, 0, nice_daemon) == 0);
  DaemonProcess d({"--address", "127.0.0.1", "--port", std::to_string(20000 + (getpid() + 13) % 12000)});
  if (geteuid() == 0) setpriority(PRIO_PROCESS, 0, nice_before);
  REQUIRE(d.ok());
  CHECK(getpriority(PRIO_PROCESS, d.pid()) == nice_daemon);
  CHECK(sched_getscheduler(d.pid()) == SCHED_OTHER);
  auto st = sroce::cli::fetch_daemon_stats(d.socket());
  REQUIRE(st);
  CHECK((*st)["sched"] == "other");
  // datapath.slice_us = 100: EEVDF's per-task slice, from Linux 6.12 (older kernels keep theirs).
  utsname u{};
  REQUIRE(uname(&u) == 0);
  unsigned major = 0, minor = 0;
  REQUIRE(sscanf(u.release, "%u.%u", &major, &minor) == 2);
  if (major > 6 || (major == 6 && minor >= 12)) CHECK((*st)["sched_slice_us"] == 100);
}
