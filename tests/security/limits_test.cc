// Security suite, the limits part (docs/security.md, "Limits"): one user
// cannot exhaust sroced for everyone. Each test is an attack by a second uid
// (attack.h) that runs into a per-uid limit and gets the errno libibverbs
// programs expect, while root (exempt) and the victim's objects carry on.
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <memory>

#include "attack.h"

using namespace sroce::test;
using nlohmann::json;

namespace {

// True when the daemon closed `fd` (EOF) within `ms`; a notice it sent first
// is read and returned in *status.
bool closed_by_daemon(int fd, int ms, int* status = nullptr) {
  for (int waited = 0; waited < ms; waited += 50) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) == 1) {
      sroce_msg_hdr h{};
      ssize_t n = recv(fd, &h, sizeof h, MSG_DONTWAIT);
      if (n == 0) return true;
      if (n == static_cast<ssize_t>(sizeof h) && status) *status = h.status;
      if (n < 0 && errno != EAGAIN) return true;
    }
  }
  return false;
}

// args: socket, limit. QPs up to the limit, then ENOMEM.
RegisterAttack qps("qps", [](const std::vector<std::string>& a) {
  const int limit = std::stoi(a[1]);
  AbiClient c;
  EXPECT_OR_EXIT(c.connect(a[0]) == 0 && c.hello() == 0, 3);
  uint32_t pd = 0;
  ClientCq cq;
  EXPECT_OR_EXIT(c.alloc_pd(&pd) == 0 && c.create_cq(64, 0, &cq) == 0, 4);
  std::vector<ClientQp> qp(static_cast<size_t>(limit) + 1);
  for (int i = 0; i < limit; ++i) EXPECT_OR_EXIT(c.create_qp(pd, cq.handle, cq.handle, IBV_QPT_RC, 8, &qp[i]) == 0, 5);
  EXPECT_OR_EXIT(c.create_qp(pd, cq.handle, cq.handle, IBV_QPT_RC, 8, &qp[limit]) == -ENOMEM, 6);
  // A second context of the same uid is the same user: still refused.
  AbiClient c2;
  EXPECT_OR_EXIT(c2.connect(a[0]) == 0 && c2.hello() == 0, 7);
  uint32_t pd2 = 0;
  ClientCq cq2;
  ClientQp q2;
  EXPECT_OR_EXIT(c2.alloc_pd(&pd2) == 0 && c2.create_cq(64, 0, &cq2) == 0, 8);
  EXPECT_OR_EXIT(c2.create_qp(pd2, cq2.handle, cq2.handle, IBV_QPT_RC, 8, &q2) == -ENOMEM, 9);
  // Freeing one makes room again.
  EXPECT_OR_EXIT(c.destroy_qp(qp[0].qpn) == 0, 10);
  EXPECT_OR_EXIT(c2.create_qp(pd2, cq2.handle, cq2.handle, IBV_QPT_RC, 8, &q2) == 0, 11);
  return 0;
});

// args: socket, count limit, byte limit. MRs by registered bytes and by count: ENOMEM.
RegisterAttack mrs("mrs", [](const std::vector<std::string>& a) {
  const int count = std::stoi(a[1]);
  const size_t bytes = std::stoull(a[2]);
  AbiClient c;
  EXPECT_OR_EXIT(c.connect(a[0]) == 0 && c.hello() == 0, 3);
  uint32_t pd = 0;
  EXPECT_OR_EXIT(c.alloc_pd(&pd) == 0, 4);
  std::vector<char> big(bytes + 8192);
  sroce_reg_mr_resp r{}, r1{}, r2{};
  // One MR of more than the byte limit: refused before anything is probed.
  EXPECT_OR_EXIT(c.reg_mr(pd, big.data(), bytes + 4096, IBV_ACCESS_LOCAL_WRITE, &r) == -ENOMEM, 5);
  // The byte limit split over MRs: the one that would pass it is refused.
  const size_t part = bytes / 2;
  EXPECT_OR_EXIT(c.reg_mr(pd, big.data(), part, IBV_ACCESS_LOCAL_WRITE, &r1) == 0, 6);
  EXPECT_OR_EXIT(c.reg_mr(pd, big.data(), part, IBV_ACCESS_LOCAL_WRITE, &r2) == 0, 7);
  EXPECT_OR_EXIT(c.reg_mr(pd, big.data(), 4096, IBV_ACCESS_LOCAL_WRITE, &r) == -ENOMEM, 8);
  for (uint32_t lkey : {r1.lkey, r2.lkey}) {
    sroce_handle_req h{lkey, 0};
    EXPECT_OR_EXIT(c.call(SROCE_OP_DEREG_MR, &h, sizeof h) == 0, 9);
  }
  // The count limit: small MRs up to it, then ENOMEM.
  std::vector<char> small(4096);
  for (int i = 0; i < count; ++i)
    EXPECT_OR_EXIT(c.reg_mr(pd, small.data(), small.size(), IBV_ACCESS_LOCAL_WRITE, &r) == 0, 10);
  EXPECT_OR_EXIT(c.reg_mr(pd, small.data(), small.size(), IBV_ACCESS_LOCAL_WRITE, &r) == -ENOMEM, 11);
  return 0;
});

// args: socket, limit. Rings (CQs here) up to the limit, then EMFILE.
RegisterAttack rings("ring-fds", [](const std::vector<std::string>& a) {
  const int limit = std::stoi(a[1]);
  AbiClient c;
  EXPECT_OR_EXIT(c.connect(a[0]) == 0 && c.hello() == 0, 3);
  std::vector<ClientCq> cq(static_cast<size_t>(limit) + 1);
  for (int i = 0; i < limit; ++i) EXPECT_OR_EXIT(c.create_cq(16, 0, &cq[i]) == 0, 4);
  EXPECT_OR_EXIT(c.create_cq(16, 0, &cq[limit]) == -EMFILE, 5);
  uint32_t ch = 0;
  int fd = -1;
  EXPECT_OR_EXIT(c.create_channel(&ch, &fd) == -EMFILE, 6);
  return 0;
});

// args: socket, limit. Connections up to the limit; the next one is told
// EMFILE and closed at once, without sending anything.
RegisterAttack contexts("contexts", [](const std::vector<std::string>& a) {
  const int limit = std::stoi(a[1]);
  std::vector<std::unique_ptr<AbiClient>> cs;
  for (int i = 0; i < limit; ++i) {
    cs.push_back(std::make_unique<AbiClient>());
    EXPECT_OR_EXIT(cs.back()->connect(a[0]) == 0 && cs.back()->hello() == 0, 3);
  }
  AbiClient extra;
  EXPECT_OR_EXIT(extra.connect(a[0]) == 0, 4);
  int status = 0;
  EXPECT_OR_EXIT(closed_by_daemon(extra.fd(), 10000, &status), 5);
  EXPECT_OR_EXIT(status == -EMFILE, 6);
  AbiClient again;
  EXPECT_OR_EXIT(again.connect(a[0]) == 0, 7);
  EXPECT_OR_EXIT(again.hello() == -EMFILE, 8);  // what ibv_open_device's HELLO sees
  return 0;
});

// args: socket. A uid the policy does not allow: told EACCES and closed at
// once, before it sends anything; HELLO (ibv_open_device) sees EACCES.
RegisterAttack refused("refused", [](const std::vector<std::string>& a) {
  AbiClient c;
  EXPECT_OR_EXIT(c.connect(a[0]) == 0, 3);
  int status = 0;
  EXPECT_OR_EXIT(closed_by_daemon(c.fd(), 10000, &status), 4);
  EXPECT_OR_EXIT(status == -EACCES, 5);
  AbiClient again;
  EXPECT_OR_EXIT(again.connect(a[0]) == 0, 6);
  EXPECT_OR_EXIT(again.hello() == -EACCES, 7);
  return 0;
});

// args: socket. Connects and never says HELLO: closed after the timeout.
RegisterAttack silent("silent", [](const std::vector<std::string>& a) {
  AbiClient c;
  EXPECT_OR_EXIT(c.connect(a[0]) == 0, 3);
  EXPECT_OR_EXIT(closed_by_daemon(c.fd(), 30000), 4);
  return 0;
});

}  // namespace

TEST_CASE("per-uid QP limit: ENOMEM for the attacker, root and the victim carry on", "[security][limits]") {
  SEC_REQUIRE_ROOT();
  DaemonProcess d(open_daemon_args(11, {"--set", "limits.qps_per_uid=4"}));
  REQUIRE(d.ok());
  AbiClient victim;
  REQUIRE(victim.connect(d.socket()) == 0);
  REQUIRE(victim.hello() == 0);
  uint32_t pd = 0;
  ClientCq cq;
  REQUIRE(victim.alloc_pd(&pd) == 0);
  REQUIRE(victim.create_cq(64, 0, &cq) == 0);
  ClientQp vq;
  REQUIRE(victim.create_qp(pd, cq.handle, cq.handle, IBV_QPT_RC, 8, &vq) == 0);
  CHECK(run_attack("qps", {d.socket(), "4"}) == 0);
  json s = stats_of(d.socket());
  REQUIRE(s.is_object());
  CHECK(s["limits"]["refused_qps"].get<int>() == 2);
  // root is exempt (limits.root = false): more than 4 QPs
  for (int i = 0; i < 5; ++i) {
    ClientQp q;
    CHECK(victim.create_qp(pd, cq.handle, cq.handle, IBV_QPT_RC, 8, &q) == 0);
  }
  sroce_handle_req h{vq.qpn, 0};
  sroce_qp_attr qa{};
  CHECK(victim.call(SROCE_OP_QUERY_QP, &h, sizeof h, &qa, sizeof qa) == 0);
}

TEST_CASE("per-uid MR count and registered-byte limits: ENOMEM", "[security][limits]") {
  SEC_REQUIRE_ROOT();
  DaemonProcess d(open_daemon_args(12, {"--set", "limits.mrs_per_uid=3", "--set", "limits.mr_bytes_per_uid=1048576"}));
  REQUIRE(d.ok());
  CHECK(run_attack("mrs", {d.socket(), "3", "1048576"}) == 0);
  json s = stats_of(d.socket());
  REQUIRE(s.is_object());
  CHECK(s["limits"]["refused_mr_bytes"].get<int>() == 2);
  CHECK(s["limits"]["refused_mrs"].get<int>() == 1);
  // root registers past both
  AbiClient root;
  REQUIRE(root.connect(d.socket()) == 0);
  REQUIRE(root.hello() == 0);
  uint32_t pd = 0;
  REQUIRE(root.alloc_pd(&pd) == 0);
  std::vector<char> buf(2 << 20);
  for (int i = 0; i < 4; ++i) {
    sroce_reg_mr_resp r{};
    CHECK(root.reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE, &r) == 0);
  }
}

TEST_CASE("per-uid ring descriptor limit: EMFILE", "[security][limits]") {
  SEC_REQUIRE_ROOT();
  DaemonProcess d(open_daemon_args(13, {"--set", "limits.ring_fds_per_uid=5"}));
  REQUIRE(d.ok());
  CHECK(run_attack("ring-fds", {d.socket(), "5"}) == 0);
  json s = stats_of(d.socket());
  REQUIRE(s.is_object());
  CHECK(s["limits"]["refused_ring_fds"].get<int>() == 2);
}

TEST_CASE("per-uid connection limit: the next one is refused with EMFILE and closed at once",
          "[security][limits]") {
  SEC_REQUIRE_ROOT();
  DaemonProcess d(open_daemon_args(14, {"--set", "limits.contexts_per_uid=3"}));
  REQUIRE(d.ok());
  CHECK(run_attack("contexts", {d.socket(), "3"}) == 0);
  json s = stats_of(d.socket());
  REQUIRE(s.is_object());
  CHECK(s["limits"]["refused_contexts"].get<int>() == 2);
  // Everyone else still gets in.
  AbiClient root;
  REQUIRE(root.connect(d.socket()) == 0);
  CHECK(root.hello() == 0);
}

TEST_CASE("a peer refused by the uid policy is closed at once, told EACCES", "[security][limits]") {
  SEC_REQUIRE_ROOT();
  // The attacker's uid is not allowed here (control.allow_uids names another one).
  DaemonProcess d({"--address", "127.0.0.1", "--port", std::to_string(20000 + (getpid() * 7 + 15) % 12000), "--set",
                   "control.socket_mode=0o666", "--set", "control.allow_uids=[1]"});
  REQUIRE(d.ok());
  CHECK(run_attack("refused", {d.socket()}) == 0);
  json s = stats_of(d.socket());
  REQUIRE(s.is_object());
  CHECK(s["service"]["ctl_refused"].get<int>() == 2);
  CHECK(s["contexts"].empty());
}

TEST_CASE("a connection without HELLO is closed after limits.hello_timeout_ms", "[security][limits]") {
  SEC_REQUIRE_ROOT();
  DaemonProcess d(open_daemon_args(16, {"--set", "limits.hello_timeout_ms=300"}));
  REQUIRE(d.ok());
  AbiClient victim;  // a context that did say HELLO stays
  REQUIRE(victim.connect(d.socket()) == 0);
  REQUIRE(victim.hello() == 0);
  CHECK(run_attack("silent", {d.socket()}) == 0);
  json s = stats_of(d.socket());
  REQUIRE(s.is_object());
  CHECK(s["limits"]["hello_timeouts"].get<int>() >= 1);
  uint32_t pd = 0;
  CHECK(victim.alloc_pd(&pd) == 0);
}

TEST_CASE("accept failing with EMFILE pauses the listening socket instead of spinning", "[security][limits]") {
  SEC_REQUIRE_ROOT();
  // sroced with few descriptors: connections (root: no per-uid limit) exhaust them.
  rlimit old{};
  getrlimit(RLIMIT_NOFILE, &old);
  rlimit low{160, old.rlim_max};
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  DaemonProcess d({"--address", "127.0.0.1", "--port", std::to_string(20000 + (getpid() * 7 + 17) % 12000)});
  setrlimit(RLIMIT_NOFILE, &old);
  REQUIRE(d.ok());
  // Non-blocking connects: once the daemon cannot accept, the backlog fills
  // and connect says EAGAIN (a blocking one would wait).
  std::vector<int> flood;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d.socket().c_str());
  // EAGAIN also while the daemon has not yet accepted what is queued: a
  // second of EAGAIN in a row means it no longer accepts.
  for (int again = 0; flood.size() < 400 && again < 50;) {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      close(fd);
      ++again;
      usleep(20000);
      continue;
    }
    again = 0;
    flood.push_back(fd);
  }
  INFO("connections: " << flood.size());
  CHECK(flood.size() < 400);  // the backlog filled: the daemon stopped accepting
  // While the flood holds every descriptor the daemon must not burn the CPU.
  auto cpu_ticks = [&] {
    FILE* f = fopen(("/proc/" + std::to_string(d.pid()) + "/stat").c_str(), "r");
    if (!f) return 0ull;
    char buf[2048];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char* p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (p) sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st);
    return ut + st;
  };
  const unsigned long long before = cpu_ticks();
  sleep(2);
  const unsigned long long used = cpu_ticks() - before;
  const long hz = sysconf(_SC_CLK_TCK);
  // A loop spinning on the readable listening socket uses all of the 2 s it
  // is given; the pause costs a few wake-ups (busy_poll_us = 50 us each).
  CHECK(used < static_cast<unsigned long long>(hz));
  for (int fd : flood) close(fd);
  // Descriptors are back: the daemon serves again, and counted what happened.
  json s;
  for (int i = 0; i < 100 && !s.is_object(); ++i) {
    s = stats_of(d.socket());
    if (!s.is_object()) usleep(100000);
  }
  REQUIRE(s.is_object());
  CHECK(s["limits"]["accept_errors"].get<int>() >= 1);
  CHECK(s["limits"]["accept_pauses"].get<int>() >= 1);
  // The figure docs/security.md quotes.
  printf("{\"bench\":\"accept_flood\",\"connections\":%zu,\"flood_s\":2,\"daemon_cpu_s\":%.3f,"
         "\"accept_errors\":%d,\"accept_pauses\":%d}\n",
         flood.size(), static_cast<double>(used) / static_cast<double>(hz), s["limits"]["accept_errors"].get<int>(),
         s["limits"]["accept_pauses"].get<int>());
  AbiClient c;
  REQUIRE(c.connect(d.socket()) == 0);
  CHECK(c.hello() == 0);
}
