// The hostile client (docs/security.md, "The hostile client"): an unprivileged
// local user who speaks sroced's ABI with malice, against a live sroced that
// also serves a victim of another uid.
//
//   sroce_hostile                      the test (root): daemon, victim, attacker, verdict
//   sroce_hostile --attack SOCKET ...  the attacker (run by the test through setpriv
//                                      --reuid/--regid --clear-groups as a second uid)
//
// The attacker sends malformed control messages (truncated, oversized, bad op codes,
// bodies of every wrong size, the victim's handles) and malformed ring contents
// (huge SGE counts, the victim's lkey and rkey, addresses whose length wraps
// uint64, garbage producer indices, oversized inline data) and checks that each
// gets a clear error or an error completion. The test then checks that the
// daemon still runs and serves, that the victim's memory holds its bytes and
// that the victim's own RDMA WRITE still lands byte for byte. Prints PASS/FAIL
// lines and "RESULT hostile: N passed, M failed"; exits 1 on any failure, 77 when
// not root (no second uid to make).
#include "hostile.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "abi_client.h"
#include "harness.h"

using namespace sroce::test;

namespace sroce::hostile {

int passed = 0, failed = 0;

bool expect(bool ok, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s ", ok ? "PASS" : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  ++(ok ? passed : failed);
  return ok;
}

sroce_qp_attr init_attr() {
  sroce_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                      IBV_ACCESS_REMOTE_ATOMIC;
  return a;
}

int connect_qp(AbiClient& c, uint32_t qpn, uint32_t dest, const std::string& peer_ip) {
  constexpr uint32_t kInit = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  constexpr uint32_t kRtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  constexpr uint32_t kRts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                            IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  if (int rc = c.modify_qp(qpn, init_attr(), kInit)) return rc;
  sroce_qp_attr r{};
  r.qp_state = IBV_QPS_RTR;
  r.path_mtu = IBV_MTU_1024;
  r.dest_qp_num = dest;
  r.rq_psn = 100;
  r.max_dest_rd_atomic = 1;
  r.min_rnr_timer = 1;
  r.ah_attr.dgid[10] = 0xff;
  r.ah_attr.dgid[11] = 0xff;
  in_addr ip{};
  inet_pton(AF_INET, peer_ip.c_str(), &ip);
  memcpy(&r.ah_attr.dgid[12], &ip, 4);
  r.ah_attr.hop_limit = 64;
  r.ah_attr.is_global = 1;
  r.ah_attr.port_num = 1;
  if (int rc = c.modify_qp(qpn, r, kRtr)) return rc;
  sroce_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.sq_psn = 100;
  s.timeout = 14;  // 67 ms: an ASan sroced on a loaded machine is slow
  s.retry_cnt = 7;
  s.rnr_retry = 7;
  s.max_rd_atomic = 1;
  return c.modify_qp(qpn, s, kRts);
}

MappedBuf::~MappedBuf() {
  if (p_) munmap(p_, n_);
}

void MappedBuf::assign(size_t n, uint8_t fill) {
  void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) abort();
  p_ = static_cast<char*>(m);
  n_ = n;
  memset(p_, fill, n);
}

int Peer::open(const std::string& socket, const std::string& host_ip, size_t bytes, uint8_t fill) {
  ip = host_ip;
  buf.assign(bytes, fill);
  if (int rc = c.connect(socket)) return rc;
  if (int rc = c.hello()) return rc;
  if (int rc = c.alloc_pd(&pd)) return rc;
  // Every right, so the attacks fail on ownership alone.
  constexpr uint32_t kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                            IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if (int rc = c.reg_mr(pd, buf.data(), buf.size(), kAll, &mr)) return rc;
  return c.create_cq(256, 0, &cq);
}

int pair(Peer& a, ClientQp& qa, Peer& b, ClientQp& qb) {
  if (int rc = a.c.create_qp(a.pd, a.cq.handle, a.cq.handle, IBV_QPT_RC, 32, &qa)) return rc;
  if (int rc = b.c.create_qp(b.pd, b.cq.handle, b.cq.handle, IBV_QPT_RC, 32, &qb)) return rc;
  if (int rc = connect_qp(a.c, qa.qpn, qb.qpn, b.ip)) return rc;
  return connect_qp(b.c, qb.qpn, qa.qpn, a.ip);
}

void Peer::post_raw(ClientQp& qp, const sroce_send_wqe& w, const void* tail, size_t tail_len) {
  uint32_t p = qp.sq.prod();
  std::byte* s = qp.sq.slot(p);
  size_t room = qp.sq.entry_size() - sizeof w;
  memcpy(s, &w, sizeof w);
  memset(s + sizeof w, 0, room);
  if (tail_len) memcpy(s + sizeof w, tail, std::min(tail_len, room));
  qp.sq.set_prod(p + 1);
  doorbell();
}

void Peer::doorbell() {
  uint64_t one = 1;
  (void)!write(c.doorbell_fd(), &one, sizeof one);
}

}  // namespace sroce::hostile

using namespace sroce::hostile;

namespace {

// The test: a daemon, a victim (root), the attacker as a second uid, the verdict.
// The victim's RDMA WRITE from its context on B into its MR on A: `n` bytes of a pattern
// from vb's buffer onto `off` of va's, then compared byte for byte.
bool victim_write(Peer& va, Peer& vb, ClientQp& qb, uint64_t wr_id, size_t off, size_t n,
                  int seed) {
  for (size_t i = 0; i < n; ++i) vb.buf[i] = static_cast<char>(i * 7 + static_cast<size_t>(seed));
  sroce_send_wqe w{};
  w.wr_id = wr_id;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = IBV_SEND_SIGNALED;
  w.num_sge = 1;
  w.remote_addr = reinterpret_cast<uintptr_t>(va.buf.data()) + off;
  w.rkey = va.mr.rkey;
  sroce_sge sge{reinterpret_cast<uintptr_t>(vb.buf.data()), static_cast<uint32_t>(n), vb.mr.lkey};
  vb.post_raw(qb, w, &sge, sizeof sge);
  auto done = vb.c.wait_cqes(vb.cq, 1, 10000);
  bool ok = done.size() == 1 && done[0].wr_id == wr_id && done[0].status == IBV_WC_SUCCESS &&
            memcmp(va.buf.data() + off, vb.buf.data(), n) == 0;
  if (!ok)
    printf("    victim write: %zu completions, status %d\n", done.size(),
           done.empty() ? -1 : done[0].status);
  return ok;
}

// The test: two daemons (hosts A and B in network namespaces), a victim (root) with
// its MR on A, the attacker as a second uid on both, the verdict.
int run_test(const char* self) {
  if (geteuid() != 0) {
    printf("SKIP hostile: needs root (a second uid, network namespaces)\n");
    return 77;
  }
  if (access("/usr/bin/setpriv", X_OK) != 0) {
    printf("SKIP hostile: setpriv (util-linux) not installed\n");
    return 77;
  }
  const unsigned uid = 60000 + static_cast<unsigned>(getpid()) % 5000;
  NetnsPair net;
  if (!expect(net.ok(), "two hosts: namespaces %s and %s joined by veth", net.ns_a.c_str(),
              net.ns_b.c_str()))
    return 1;
  // The RoCEv2 port (4791) of each namespace: peers send there whatever port one listens on.
  auto args = [&](const std::string& ip) {
    return std::vector<std::string>{
        "--address", ip,
        "--set",     "control.socket_mode=0o666",
        "--set",     "control.allow_uids=[" + std::to_string(uid) + "]"};
  };
  DaemonProcess da(args(net.addr_a), net.ns_a), db(args(net.addr_b), net.ns_b);
  if (!expect(da.ok() && db.ok(), "sroced on A (%s) and on B (%s)", da.socket().c_str(),
              db.socket().c_str()))
    return 1;

  // The victim: root, 64 KiB of 0x5A in an MR on A, an RC QP there connected to one on B.
  Peer va, vb;
  ClientQp qa, qb;
  bool vok = va.open(da.socket(), net.addr_a, 1 << 16, 0x5A) == 0 &&
             vb.open(db.socket(), net.addr_b, 1 << 16, 0) == 0 && pair(va, qa, vb, qb) == 0;
  if (!expect(vok, "victim (uid 0): contexts on A and B, MRs, CQs, connected RC QPs")) return 1;
  // Before the attack, the victim's transfer works: the attacks below fail on the checks,
  // not because nothing gets through.
  expect(victim_write(va, vb, qb, 4241, 61440, 4096, 1),
         "baseline: the victim's RDMA WRITE from B lands in its MR on A, byte for byte");
  memset(va.buf.data() + 61440, 0x5A, 4096);

  // The attacker, a second uid with no groups.
  char arg[512];
  snprintf(arg, sizeof arg, "%u %u %u %" PRIu64 " %u %u %u", va.pd, va.mr.lkey, va.mr.rkey,
           static_cast<uint64_t>(reinterpret_cast<uintptr_t>(va.buf.data())), qa.qpn, va.cq.handle,
           static_cast<unsigned>(va.buf.size()));
  std::string u = std::to_string(uid);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/usr/bin/setpriv", "setpriv", ("--reuid=" + u).c_str(), ("--regid=" + u).c_str(),
          "--clear-groups", self, "--attack", arg, da.socket().c_str(), net.addr_a.c_str(),
          db.socket().c_str(), net.addr_b.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
         "attacker (uid %u) ran: every attack failed (exit %d)", uid,
         WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));

  // The verdict.
  expect(kill(da.pid(), 0) == 0 && kill(db.pid(), 0) == 0, "both sroced are still running");
  size_t bad = 0;
  for (char ch : va.buf) bad += static_cast<unsigned char>(ch) != 0x5A;
  expect(bad == 0, "the victim's memory is untouched (%zu of %zu bytes differ)", bad,
         va.buf.size());
  bool wrote = victim_write(va, vb, qb, 4242, 32768, 4096, 3);
  expect(wrote, "the victim's RDMA WRITE still completes and its bytes compare equal");
  AbiClient fresh;
  uint32_t pd = 0;
  expect(fresh.connect(da.socket()) == 0 && fresh.hello() == 0 && fresh.alloc_pd(&pd) == 0,
         "a new context is served");
  std::string s = fresh.stats();
  if (!wrote) printf("    stats: %s\n", s.c_str());
  auto j = nlohmann::json::parse(s, nullptr, false);
  if (!j.is_discarded() && j.contains("service")) {
    auto svc = j["service"];
    expect(svc.value("ctl_garbage", 0) >= kGarbageSent,
           "malformed messages were dropped and counted (%d >= %d)", svc.value("ctl_garbage", 0),
           kGarbageSent);
    expect(svc.value("ring_bad_wqes", 0) >= 1, "malformed ring entries were counted (%d)",
           svc.value("ring_bad_wqes", 0));
  } else {
    expect(false, "STATS answered JSON");
  }
  expect(da.stop() == 0 && db.stop() == 0, "both sroced exit cleanly on SIGTERM");
  printf("RESULT hostile: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && strcmp(argv[1], "--attack") == 0) {
    if (argc < 7) return 2;
    Victim v{};
    unsigned long long addr = 0;
    if (sscanf(argv[2], "%u %u %u %llu %u %u %u", &v.pd, &v.lkey, &v.rkey, &addr, &v.qpn, &v.cq,
               &v.len) != 7)
      return 2;
    v.addr = addr;
    v.sock_a = argv[3];
    v.ip_a = argv[4];
    v.sock_b = argv[5];
    v.ip_b = argv[6];
    return attack(v);
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = 0;
  return run_test(self);
}
