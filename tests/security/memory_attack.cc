// Attacks on sroced's memory access by an unprivileged local user (docs/security.md,
// "Memory"). Each mode is one test: as root it starts two daemons in two network namespaces
// (the attacker's RC peer is on the second), runs the attacker as a second uid with
// `setpriv --reuid --regid --clear-groups`, and asserts that the attack failed, the victim's
// data is untouched byte for byte and the daemon keeps serving.
//
//   sroce_secmem_attack exec VICTIM_BIN   the connecting process keeps its socket in a forked
//                                         child and execs a setuid program of another uid
//   sroce_secmem_attack exit              the connecting process exits, a forked child goes on
//   sroce_secmem_attack huge              user B registers (almost) the whole address space;
//                                         user A's MRs keep working, B never reaches them
//   sroce_secmem_attack hello             HELLO with every descriptor but the process's own
//                                         /proc/self/mem: refused
//
// Exit 0: the attack failed as it must; 1: it succeeded or the test broke; 77: not root.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "abi_client.h"
#include "harness.h"

using namespace sroce::test;
using nlohmann::json;

namespace {

constexpr uid_t kAttacker = 61431;  // no account needed (setpriv)
constexpr uid_t kVictim = 61432;
constexpr uint64_t kFixed = 0x5a0000000000ull;  // where the exec attack's MR and the secret live
constexpr size_t kLen = 64 * 1024;
constexpr uint32_t kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

uint8_t secret_byte(size_t i) { return static_cast<uint8_t>((i * 37 + 0xa5) ^ (i >> 9)); }  // as memory_victim.cc
bool is_secret(const uint8_t* p, size_t n, size_t from = 0) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != secret_byte(from + i)) return false;
  return true;
}

#define EXPECT(cond, code)                                                 \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      return code;                                                         \
    }                                                                      \
  } while (0)

// ------------------------------------------------------------------ ABI helpers
sroce_qp_attr init_attr() {
  sroce_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = kAccess;
  return a;
}
sroce_qp_attr rtr_attr(uint32_t dest_qpn, const std::string& peer_ip) {
  sroce_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 100;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  in_addr ip{};
  inet_pton(AF_INET, peer_ip.c_str(), &ip);
  a.ah_attr.dgid[10] = 0xff;
  a.ah_attr.dgid[11] = 0xff;
  memcpy(&a.ah_attr.dgid[12], &ip, 4);
  a.ah_attr.hop_limit = 64;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  return a;
}
sroce_qp_attr rts_attr() {
  sroce_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 100;
  a.timeout = 12;  // 17 ms, 3 retries: a dead peer QP costs well under a second
  a.retry_cnt = 3;
  a.rnr_retry = 3;
  a.max_rd_atomic = 1;
  return a;
}
constexpr uint32_t kInitMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr uint32_t kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr uint32_t kRtsMask =
    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

// One context with an MR over `buf` (mapped at `at`, or anywhere), a CQ and two RC QPs (the
// attacks use one for READ and one for WRITE, so a failed READ does not flush the WRITE).
struct Side {
  AbiClient c;
  uint32_t pd = 0;
  sroce_reg_mr_resp mr{};
  ClientCq cq;
  ClientQp qp[2];
  uint8_t* buf = nullptr;
  size_t len = 0;

  int open(const std::string& socket, size_t bytes, uint64_t at = 0) {
    len = bytes;
    void* p = mmap(reinterpret_cast<void*>(at), bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    if (p == MAP_FAILED || (at && p != reinterpret_cast<void*>(at))) return -ENOMEM;
    buf = static_cast<uint8_t*>(p);
    if (int rc = c.connect(socket)) return rc;
    if (int rc = c.hello()) return rc;
    if (int rc = c.alloc_pd(&pd)) return rc;
    if (int rc = c.reg_mr(pd, buf, len, kAccess, &mr)) return rc;
    if (int rc = c.create_cq(64, 0, &cq)) return rc;
    for (auto& q : qp)
      if (int rc = c.create_qp(pd, cq.handle, cq.handle, IBV_QPT_RC, 16, &q)) return rc;
    return 0;
  }
  int connect_to(int i, uint32_t peer_qpn, const std::string& peer_ip) {
    if (int rc = c.modify_qp(qp[i].qpn, init_attr(), kInitMask)) return rc;
    if (int rc = c.modify_qp(qp[i].qpn, rtr_attr(peer_qpn, peer_ip), kRtrMask)) return rc;
    return c.modify_qp(qp[i].qpn, rts_attr(), kRtsMask);
  }
  // One RDMA op on qp[i] between our [off, off+n) and the peer's `raddr`/`rkey`; the status.
  int rdma(int i, uint8_t opcode, size_t off, uint32_t n, uint64_t raddr, uint32_t rkey, uint64_t wr_id) {
    sroce_send_wqe w{};
    w.wr_id = wr_id;
    w.opcode = opcode;
    w.send_flags = IBV_SEND_SIGNALED;
    w.num_sge = 1;
    w.remote_addr = raddr;
    w.rkey = rkey;
    sroce_sge sge{reinterpret_cast<uint64_t>(buf + off), n, mr.lkey};
    c.post_send(qp[i], w, &sge);
    auto cqes = c.wait_cqes(cq, 1, 20000);
    return cqes.empty() ? -1 : cqes[0].status;
  }
};

// Both QPs of `a` (on daemon A, address addr_a) connected to those of `b` (daemon B).
int connect_pair(Side& a, Side& b, const std::string& addr_a, const std::string& addr_b) {
  for (int i = 0; i < 2; ++i) {
    if (int rc = a.connect_to(i, b.qp[i].qpn, addr_b)) return rc;
    if (int rc = b.connect_to(i, a.qp[i].qpn, addr_a)) return rc;
  }
  return 0;
}

bool wait_readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1;
}

// The daemon still serves: a new context can register memory.
bool serving(const std::string& socket) {
  AbiClient c;
  std::vector<char> mem(4096, 1);
  uint32_t pd = 0;
  sroce_reg_mr_resp mr{};
  return c.connect(socket) == 0 && c.hello() == 0 && c.alloc_pd(&pd) == 0 &&
         c.reg_mr(pd, mem.data(), mem.size(), kAccess, &mr) == 0;
}

json stats_of(const std::string& socket) {
  AbiClient c;
  if (c.connect(socket) != 0) return json{};
  std::string s = c.stats();
  return s.empty() ? json{} : json::parse(s);
}

uint64_t context_gone_count(const std::string& socket) {
  for (int i = 0; i < 250; ++i) {  // up to 5 s: the loop closes the context on its next pass
    json j = stats_of(socket);
    uint64_t n = j.is_null() ? 0 : j["service"].value("contexts_gone", uint64_t{0});
    if (n > 0) return n;
    usleep(20000);
  }
  return 0;
}

// ------------------------------------------------------------------ attacker roles (uid kAttacker)
// The connecting process P holds `a` (on daemon A, its MR filled with a known pattern); it
// forks, and the child C opens its own peer `b` on daemon B, so that whatever reaches C's
// buffer came from A's side and nothing of C's depends on P's address space. P connects a's QPs
// to b's, C connects b's to a's and checks that it can READ a's MR. Returns in both processes
// (`*in_parent`); in P only once C's check passed (else P exits 2).
int fork_peer(Side& a, Side& b, const std::string& sock_b, const std::string& addr_a, const std::string& addr_b,
              int result, bool* in_parent) {
  for (size_t i = 0; i < a.len; ++i) a.buf[i] = static_cast<uint8_t>(i * 3);
  int to_p[2], to_c[2];
  EXPECT(pipe(to_p) == 0 && pipe(to_c) == 0, 2);
  pid_t pid = fork();
  EXPECT(pid >= 0, 2);
  *in_parent = pid > 0;
  if (pid > 0) {
    close(to_p[1]);
    close(to_c[0]);
    uint32_t qpn[2];
    if (read(to_p[0], qpn, sizeof qpn) != sizeof qpn) _exit(2);
    uint8_t ok = 0;
    for (int i = 0; i < 2; ++i)
      if (a.connect_to(i, qpn[i], addr_b) != 0) ok = 1;
    if (write(to_c[1], &ok, 1) != 1 || ok != 0) _exit(2);
    if (read(to_p[0], &ok, 1) != 1 || ok != 0) _exit(2);  // C's READ of our MR worked
    return 0;
  }
  close(to_p[0]);
  close(to_c[1]);
  auto fail = [&](const char* what) {
    std::fprintf(stderr, "attacker: %s\n", what);
    uint8_t code = 2;
    (void)!write(to_p[1], &code, 1);
    (void)!write(result, &code, 1);
    _exit(0);
  };
  if (b.open(sock_b, kLen) != 0) fail("cannot open the peer context");
  uint32_t qpn[2] = {b.qp[0].qpn, b.qp[1].qpn};
  uint8_t ok = 1;
  if (write(to_p[1], qpn, sizeof qpn) != sizeof qpn || read(to_c[0], &ok, 1) != 1 || ok != 0)
    fail("the connecting process could not connect its QPs");
  for (int i = 0; i < 2; ++i)
    if (b.connect_to(i, a.qp[i].qpn, addr_a) != 0) fail("cannot connect the peer QPs");
  // The attack channel works while the connecting process is as it was.
  if (b.rdma(0, IBV_WR_RDMA_READ, 0, 4096, reinterpret_cast<uint64_t>(a.buf), a.mr.rkey, 1) != IBV_WC_SUCCESS ||
      memcmp(b.buf, a.buf, 4096) != 0)
    fail("the peer cannot READ the MR before the attack");
  ok = 0;
  if (write(to_p[1], &ok, 1) != 1) fail("the connecting process is gone too early");
  return 0;
}

// argv: role sock_a sock_b addr_a addr_b result_fd [victim]
int attacker_exec(char** argv) {
  const std::string sock_a = argv[2], sock_b = argv[3], addr_a = argv[4], addr_b = argv[5];
  const int result = std::atoi(argv[6]);
  const std::string victim = argv[7];
  Side a, b;
  EXPECT(a.open(sock_a, kLen, kFixed) == 0, 2);
  int ready[2], go[2];
  EXPECT(pipe(ready) == 0 && pipe(go) == 0, 2);
  bool parent = false;
  if (fork_peer(a, b, sock_b, addr_a, addr_b, result, &parent) != 0) return 2;
  if (parent) {  // the process that connected: becomes the setuid victim
    close(ready[0]);
    close(go[1]);
    char addr[32], len[32], rfd[16], gfd[16];
    snprintf(addr, sizeof addr, "%llx", static_cast<unsigned long long>(kFixed));
    snprintf(len, sizeof len, "%zu", kLen);
    snprintf(rfd, sizeof rfd, "%d", ready[1]);
    snprintf(gfd, sizeof gfd, "%d", go[0]);
    execl(victim.c_str(), victim.c_str(), addr, len, rfd, gfd, nullptr);
    _exit(5);
  }
  // The forked child keeps the sockets, the rings and the connected peer.
  close(ready[1]);
  close(go[0]);
  auto finish = [&](uint8_t code) {
    (void)!write(go[1], "g", 1);
    (void)!write(result, &code, 1);
    _exit(0);
  };
  char line[32] = {};
  if (!wait_readable(ready[0], 30000) || read(ready[0], line, sizeof line - 1) <= 0) finish(4);
  std::fprintf(stderr, "attacker: the victim runs with euid %s", line);
  memset(b.buf, 0, kLen);
  const int rs = b.rdma(0, IBV_WR_RDMA_READ, 0, 4096, kFixed, a.mr.rkey, 2);
  std::fprintf(stderr, "attacker: RDMA READ of the old MR after the exec: status %d\n", rs);
  if (is_secret(b.buf, 4096)) finish(10);  // root read the setuid program's memory for us
  if (rs == IBV_WC_SUCCESS) finish(11);
  memset(b.buf, 'X', 4096);
  const int ws = b.rdma(1, IBV_WR_RDMA_WRITE, 0, 4096, kFixed, a.mr.rkey, 3);
  std::fprintf(stderr, "attacker: RDMA WRITE into the old MR after the exec: status %d\n", ws);
  if (ws == IBV_WC_SUCCESS) finish(12);
  sroce_reg_mr_resp mr{};
  const int rr = a.c.reg_mr(a.pd, reinterpret_cast<void*>(kFixed), 4096, kAccess, &mr);
  std::fprintf(stderr, "attacker: REG_MR on the old context after the exec: %d\n", rr);
  if (rr == 0) finish(13);
  finish(0);
  return 0;
}

int attacker_exit(char** argv) {
  const std::string sock_a = argv[2], sock_b = argv[3], addr_a = argv[4], addr_b = argv[5];
  const int result = std::atoi(argv[6]);
  Side a, b;
  EXPECT(a.open(sock_a, kLen) == 0, 2);
  int alive[2];
  EXPECT(pipe(alive) == 0, 2);
  bool parent = false;
  if (fork_peer(a, b, sock_b, addr_a, addr_b, result, &parent) != 0) return 2;
  if (parent) _exit(0);  // the connecting process exits; its child goes on with the context
  close(alive[1]);
  auto finish = [&](uint8_t code) {
    (void)!write(result, &code, 1);
    _exit(0);
  };
  // EOF once the parent is gone: do_exit() drops the mm (exit_mm) before the fds (exit_files).
  char c;
  while (read(alive[0], &c, 1) > 0) {
  }
  memset(b.buf, 0, kLen);
  const int rs = b.rdma(0, IBV_WR_RDMA_READ, 0, 4096, reinterpret_cast<uint64_t>(a.buf), a.mr.rkey, 2);
  std::fprintf(stderr, "attacker: RDMA READ after the connecting process exited: status %d\n", rs);
  if (rs == IBV_WC_SUCCESS) finish(11);
  sroce_reg_mr_resp mr{};
  const int rr = a.c.reg_mr(a.pd, a.buf, 4096, kAccess, &mr);
  std::fprintf(stderr, "attacker: REG_MR after the connecting process exited: %d\n", rr);
  if (rr == 0) finish(13);
  finish(0);
  return 0;
}

// HELLO with everything a hostile client could pass instead of its own /proc/self/mem; each is
// refused with its errno, then the real thing works on the same connection. argv: role sock_a
// result_fd
int attacker_hello(char** argv) {
  const std::string sock_a = argv[2];
  const int result = std::atoi(argv[3]);
  uint8_t code = 0;
  auto check = [&](const char* what, int fd, uint32_t flags, bool wrong_probe, int want) {
    AbiClient c;
    int rc = c.connect(sock_a);
    if (rc == 0) rc = c.hello_with(fd, flags, wrong_probe);
    std::fprintf(stderr, "attacker: HELLO with %s: %d (want %d)\n", what, rc, want);
    if (rc != want && code == 0) code = 30;
    if (fd >= 0) close(fd);
  };
  check("no descriptor", -1, 0, false, -EPERM);
  check("the flag but no descriptor", -1, SROCE_HELLO_MEM_FD, false, -EPERM);
  check("a descriptor but no flag", open("/proc/self/mem", O_RDWR | O_CLOEXEC), 0, false, -EPERM);
  check("a regular file", open("/etc/passwd", O_RDONLY | O_CLOEXEC), SROCE_HELLO_MEM_FD, false, -EBADF);
  check("a memfd", memfd_create("x", MFD_CLOEXEC), SROCE_HELLO_MEM_FD, false, -EBADF);
  check("/proc/self/environ", open("/proc/self/environ", O_RDONLY | O_CLOEXEC), SROCE_HELLO_MEM_FD, false,
        -EBADF);
  check("/proc/self/mem read-only", open("/proc/self/mem", O_RDONLY | O_CLOEXEC), SROCE_HELLO_MEM_FD, false,
        -EBADF);
  check("its own mem file and a wrong probe", open("/proc/self/mem", O_RDWR | O_CLOEXEC), SROCE_HELLO_MEM_FD, true,
        -EBADF);
  // Another process's memory it may open itself (its own child): not the peer's.
  int hold[2];
  if (pipe(hold) != 0) return 2;
  pid_t child = fork();
  if (child == 0) {
    char c;
    close(hold[1]);
    (void)!read(hold[0], &c, 1);
    _exit(0);
  }
  close(hold[0]);
  const std::string other = "/proc/" + std::to_string(child) + "/mem";
  int ofd = open(other.c_str(), O_RDWR | O_CLOEXEC);
  if (ofd < 0) {
    std::fprintf(stderr, "attacker: cannot open %s (%s): that case not tried\n", other.c_str(), strerror(errno));
  } else {
    check("another process's mem file", ofd, SROCE_HELLO_MEM_FD, false, -EBADF);
  }
  close(hold[1]);
  waitpid(child, nullptr, 0);
  // And the real thing, on a connection that was refused first.
  AbiClient c;
  uint32_t pd = 0;
  if (c.connect(sock_a) != 0 || c.hello_with(-1, 0, false) != -EPERM || c.hello() != 0 || c.alloc_pd(&pd) != 0) {
    std::fprintf(stderr, "attacker: the proper HELLO after a refused one failed\n");
    if (code == 0) code = 31;
  }
  (void)!write(result, &code, 1);
  return 0;
}

// argv: role sock_a sock_b addr_a addr_b result_fd victim_va hold_fd. The huge MR stays
// registered (the process waits for EOF on hold_fd) until the victim has checked its own MR.
int attacker_huge(char** argv) {
  const std::string sock_a = argv[2], sock_b = argv[3], addr_a = argv[4], addr_b = argv[5];
  const int result = std::atoi(argv[6]);
  const uint64_t victim_va = std::strtoull(argv[7], nullptr, 16);
  const int hold = std::atoi(argv[8]);
  uint8_t code = 0;
  auto done = [&](uint8_t c) {
    (void)!write(result, &c, 1);
    char b;
    while (read(hold, &b, 1) > 0) {
    }
    return 0;
  };
  // One page low and one page near the top of the address space: REG_MR probes only the ends,
  // so the MR covers every other process's buffers' addresses.
  const uint64_t low = 0x1000000;
  uint64_t high = 0;
  const uint64_t step = 0x10000000ull;  // 256 MiB: the first free one above the victim's buffer
  for (uint64_t h = (victim_va + kLen + step) & ~(step - 1); h < 0x7ffff0000000ull && !high; h += step)
    if (mmap(reinterpret_cast<void*>(h), 4096, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == reinterpret_cast<void*>(h))
      high = h;
  if (!high || victim_va < low || victim_va + kLen > high) return done(2);
  Side x, xb;
  if (x.open(sock_a, 4096, low) != 0 || xb.open(sock_b, kLen) != 0) return done(2);
  sroce_reg_mr_resp huge{};
  const int rc = x.c.reg_mr(x.pd, reinterpret_cast<void*>(low), high + 4096 - low, kAccess, &huge);
  std::fprintf(stderr, "attacker: REG_MR of [%#llx, %#llx): %d\n", static_cast<unsigned long long>(low),
               static_cast<unsigned long long>(high + 4096), rc);
  if (rc != 0) return done(2);  // the attack could not even be mounted: the test proves nothing
  if (connect_pair(x, xb, addr_a, addr_b) != 0) return done(2);
  // Through the huge MR's rkey at the victim's addresses: our own memory there (unmapped in this
  // process: an error), never the victim's.
  memset(xb.buf, 0, kLen);
  const int rs = xb.rdma(0, IBV_WR_RDMA_READ, 0, 4096, victim_va, huge.rkey, 1);
  std::fprintf(stderr, "attacker: RDMA READ at the victim's address: status %d\n", rs);
  if (is_secret(xb.buf, 4096)) code = 10;
  memset(xb.buf, 'X', kLen);
  const int ws = xb.rdma(1, IBV_WR_RDMA_WRITE, 0, 4096, victim_va, huge.rkey, 2);
  std::fprintf(stderr, "attacker: RDMA WRITE at the victim's address: status %d\n", ws);
  return done(code);
}

// uid kVictim: an MR with a secret and its own RC peer; checks the attack left it intact and
// that its MR still works both ways, byte for byte. argv: role sock_a sock_b addr_a addr_b
// va_fd go_fd result_fd
int victim_huge(char** argv) {
  const std::string sock_a = argv[2], sock_b = argv[3], addr_a = argv[4], addr_b = argv[5];
  const int va_fd = std::atoi(argv[6]), go_fd = std::atoi(argv[7]), result = std::atoi(argv[8]);
  auto done = [&](uint8_t c) {
    (void)!write(result, &c, 1);
    return 0;
  };
  Side v, vb;
  if (v.open(sock_a, kLen) != 0 || vb.open(sock_b, kLen) != 0 || connect_pair(v, vb, addr_a, addr_b) != 0)
    return done(2);
  for (size_t i = 0; i < kLen; ++i) v.buf[i] = secret_byte(i);
  const uint64_t va = reinterpret_cast<uint64_t>(v.buf);
  if (write(va_fd, &va, sizeof va) != sizeof va) return done(2);
  char c;
  if (!wait_readable(go_fd, 60000) || read(go_fd, &c, 1) != 1) return done(2);
  if (!is_secret(v.buf, kLen)) return done(20);  // the attacker wrote into our memory
  memset(vb.buf, 0, kLen);
  int rs = vb.rdma(0, IBV_WR_RDMA_READ, 0, kLen, va, v.mr.rkey, 1);
  std::fprintf(stderr, "victim: RDMA READ of its own MR: status %d\n", rs);
  if (rs != IBV_WC_SUCCESS || !is_secret(vb.buf, kLen)) return done(21);  // our MR was broken
  for (size_t i = 0; i < kLen; ++i) vb.buf[i] = static_cast<uint8_t>(i * 11 + 3);
  int ws = vb.rdma(1, IBV_WR_RDMA_WRITE, 0, kLen, va, v.mr.rkey, 2);
  std::fprintf(stderr, "victim: RDMA WRITE into its own MR: status %d\n", ws);
  if (ws != IBV_WC_SUCCESS || memcmp(v.buf, vb.buf, kLen) != 0) return done(22);
  return done(0);
}

// ------------------------------------------------------------------ the test (root)
struct Setup {
  NetnsPair ns;
  std::unique_ptr<DaemonProcess> da, db;
  bool start() {
    if (!ns.ok()) return false;
    const std::vector<std::string> policy = {
        "--set", "control.socket_mode=0o666", "--set",
        "control.allow_uids=[" + std::to_string(kAttacker) + "," + std::to_string(kVictim) + "]",
        // The huge-range attack tests MR ownership, not the per-uid byte limit (security.limits
        // does), which would refuse its 127 TB registration before ownership is reached.
        "--set", "limits.mr_bytes_per_uid=9223372036854775807"};
    auto args = [&](const std::string& addr) {
      std::vector<std::string> a = {"--address", addr};
      a.insert(a.end(), policy.begin(), policy.end());
      return a;
    };
    da = std::make_unique<DaemonProcess>(args(ns.addr_a), ns.ns_a);
    db = std::make_unique<DaemonProcess>(args(ns.addr_b), ns.ns_b);
    return da->ok() && db->ok();
  }
};

// Runs this program as `uid` with `args` (setpriv); the fds in `keep` stay open.
pid_t spawn_as(uid_t uid, const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=" + std::to_string(uid),
                                   "--regid=" + std::to_string(uid), "--clear-groups", "--"};
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) _exit(126);
  argv.push_back(self);
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> v;
  for (auto& a : argv) v.push_back(a.data());
  v.push_back(nullptr);
  execv(v[0], v.data());
  _exit(127);
}

int read_code(int fd, const char* who) {
  uint8_t code = 255;
  if (!wait_readable(fd, 90000) || read(fd, &code, 1) != 1) {
    std::fprintf(stderr, "%s: no result\n", who);
    return 255;
  }
  std::fprintf(stderr, "%s: result %u\n", who, code);
  return code;
}

int test_exec(const char* victim_bin) {
  Setup s;
  EXPECT(s.start(), 1);
  // A setuid copy of the victim, owned by another uid, where the attacker can run it.
  char dir[] = "/tmp/secmem-XXXXXX";
  EXPECT(mkdtemp(dir) != nullptr, 1);
  chmod(dir, 0755);
  const std::string victim = std::string(dir) + "/victim";
  EXPECT(run("cp '" + std::string(victim_bin) + "' '" + victim + "'") == 0, 1);
  EXPECT(chown(victim.c_str(), kVictim, kVictim) == 0 && chmod(victim.c_str(), 04755) == 0, 1);
  int res[2];
  EXPECT(pipe(res) == 0, 1);
  pid_t p = spawn_as(kAttacker, {"attacker-exec", s.da->socket(), s.db->socket(), s.ns.addr_a, s.ns.addr_b,
                                 std::to_string(res[1]), victim});
  close(res[1]);
  const int code = read_code(res[0], "attacker");
  int st = 0;
  waitpid(p, &st, 0);  // the connecting process, which became the victim
  unlink(victim.c_str());
  rmdir(dir);
  std::fprintf(stderr, "victim (the exec'd setuid program): exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  EXPECT(code == 0, 1);
  EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, 1);  // its secret is untouched
  EXPECT(context_gone_count(s.da->socket()) >= 1, 1);
  EXPECT(serving(s.da->socket()), 1);
  std::puts("exec attack: no byte of the setuid program read or written; the context was closed");
  return 0;
}

int test_exit() {
  Setup s;
  EXPECT(s.start(), 1);
  int res[2];
  EXPECT(pipe(res) == 0, 1);
  pid_t p = spawn_as(kAttacker, {"attacker-exit", s.da->socket(), s.db->socket(), s.ns.addr_a, s.ns.addr_b,
                                 std::to_string(res[1])});
  close(res[1]);
  const int code = read_code(res[0], "attacker");
  waitpid(p, nullptr, 0);
  EXPECT(code == 0, 1);
  EXPECT(context_gone_count(s.da->socket()) >= 1, 1);
  json j = stats_of(s.da->socket());
  EXPECT(!j.is_null() && j["memory"].value("gone", uint64_t{0}) >= 1, 1);
  EXPECT(serving(s.da->socket()), 1);
  std::puts("exit attack: the context's accesses failed and it was closed");
  return 0;
}

int test_hello() {
  Setup s;
  EXPECT(s.start(), 1);
  int res[2];
  EXPECT(pipe(res) == 0, 1);
  pid_t p = spawn_as(kAttacker, {"attacker-hello", s.da->socket(), std::to_string(res[1])});
  close(res[1]);
  const int code = read_code(res[0], "attacker");
  waitpid(p, nullptr, 0);
  EXPECT(code == 0, 1);
  EXPECT(serving(s.da->socket()), 1);
  std::puts("HELLO: every descriptor but the peer's own mem file was refused");
  return 0;
}

int test_huge() {
  Setup s;
  EXPECT(s.start(), 1);
  int va[2], go[2], vres[2], ares[2], hold[2];
  EXPECT(pipe(va) == 0 && pipe(go) == 0 && pipe(vres) == 0 && pipe(ares) == 0, 1);
  pid_t v = spawn_as(kVictim, {"victim-huge", s.da->socket(), s.db->socket(), s.ns.addr_a, s.ns.addr_b,
                               std::to_string(va[1]), std::to_string(go[0]), std::to_string(vres[1])});
  uint64_t victim_va = 0;
  EXPECT(wait_readable(va[0], 60000) && read(va[0], &victim_va, sizeof victim_va) == sizeof victim_va, 1);
  char hex[32];
  snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(victim_va));
  // Only we hold the write end (close-on-exec: not the attacker, and the victim is older).
  EXPECT(pipe(hold) == 0 && fcntl(hold[1], F_SETFD, FD_CLOEXEC) == 0, 1);
  pid_t a = spawn_as(kAttacker, {"attacker-huge", s.da->socket(), s.db->socket(), s.ns.addr_a, s.ns.addr_b,
                                 std::to_string(ares[1]), hex, std::to_string(hold[0])});
  close(ares[1]);
  close(hold[0]);
  const int acode = read_code(ares[0], "attacker");
  // The attacker's huge MR is still registered while the victim uses its own.
  json mid = stats_of(s.da->socket());
  const uint64_t mrs = mid.is_null() ? 0 : mid["objects"].value("mrs", uint64_t{0});
  std::fprintf(stderr, "daemon A holds %llu MRs while the victim checks its own\n",
               static_cast<unsigned long long>(mrs));
  (void)!write(go[1], "g", 1);
  const int vcode = read_code(vres[0], "victim");
  close(hold[1]);
  waitpid(a, nullptr, 0);
  waitpid(v, nullptr, 0);
  EXPECT(acode == 0, 1);
  EXPECT(vcode == 0, 1);
  EXPECT(mrs >= 3, 1);  // victim's, attacker's small and huge ones: the attack was in place
  EXPECT(serving(s.da->socket()), 1);
  std::puts("huge-range attack: the victim's MR kept working byte for byte and was never reached");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s exec VICTIM | exit | huge\n", argv[0]);
    return 1;
  }
  const std::string mode = argv[1];
  if (mode == "attacker-exec" && argc == 8) return attacker_exec(argv);
  if (mode == "attacker-exit" && argc == 7) return attacker_exit(argv);
  if (mode == "attacker-huge" && argc == 9) return attacker_huge(argv);
  if (mode == "attacker-hello" && argc == 4) return attacker_hello(argv);
  if (mode == "victim-huge" && argc == 9) return victim_huge(argv);
  if (!have_root() || access("/usr/bin/setpriv", X_OK) != 0) {
    std::puts("SKIP: needs root (namespaces, a second uid) and setpriv");
    return 77;
  }
  if (mode == "exec" && argc == 3) return test_exec(argv[2]);
  if (mode == "exit") return test_exit();
  if (mode == "huge") return test_huge();
  if (mode == "hello") return test_hello();
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 1;
}
