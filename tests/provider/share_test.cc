// Shared MRs (userspace/provider/mr_share.cc, docs/performance.md "Shared memory"): what
// share_mr_pages does to the program's memory and what it hands the daemon, against a
// scripted daemon end of the control socket. Contents are compared byte for byte.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "provider.h"
#include "sroce_abi.h"

using namespace sroce::provider;

namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

uint8_t pattern(size_t i, uint8_t seed) { return static_cast<uint8_t>(i * 31 + seed + (i >> 12)); }
void fill(uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = pattern(i, seed);
}
bool holds(const uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != pattern(i, seed)) return false;
  return true;
}

// The maps line of the mapping that contains `addr` ("" if none).
std::string maps_line(const void* addr) {
  std::ifstream f("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  while (std::getline(f, line)) {
    uintptr_t s = 0, e = 0;
    if (sscanf(line.c_str(), "%lx-%lx", &s, &e) == 2 && s <= a && a < e) return line;
  }
  return "";
}
bool on_memfd(const void* addr) { return maps_line(addr).find("/memfd:sroce-mr") != std::string::npos; }
// Whether some page of [p, p + n) is still one of the provider's memfds.
bool any_on_memfd(const uint8_t* p, size_t n) {
  for (size_t off = 0; off < n; off += kPage)
    if (on_memfd(p + off)) return true;
  return false;
}
bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

// The daemon's end: answers every SHARE_MR it is sent with `status` and keeps the memfd.
struct FakeDaemon {
  int fd[2] = {-1, -1};
  ContextState st;
  Context ctx{};
  uint64_t seq = 0;
  FakeDaemon() {
    REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fd) == 0);
    st.control.adopt(fd[0]);
    st.control.set_timeout_ms(2000);
    ctx.st = &st;
  }
  ~FakeDaemon() { close(fd[1]); }
  // Queues the reply to the next request (the channel numbers them 1, 2, ...).
  void answer_next(int32_t status) {
    sroce_msg_hdr h{SROCE_ABI_MAGIC, SROCE_OP_SHARE_MR, 0, ++seq, status, 0};
    REQUIRE(send(fd[1], &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h));
  }
  // The request that came, with its fd; false if none is waiting.
  bool take(sroce_share_mr& req, int& memfd) {
    uint8_t buf[SROCE_MAX_MSG];
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
    iovec iov{buf, sizeof buf};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof cbuf;
    const ssize_t n = recvmsg(fd[1], &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) return false;
    sroce_msg_hdr h;
    REQUIRE(static_cast<size_t>(n) == sizeof h + sizeof req);
    memcpy(&h, buf, sizeof h);
    CHECK(h.op == SROCE_OP_SHARE_MR);
    memcpy(&req, buf + sizeof h, sizeof req);
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    REQUIRE(cm != nullptr);
    REQUIRE(cm->cmsg_type == SCM_RIGHTS);
    memcpy(&memfd, CMSG_DATA(cm), sizeof memfd);
    return true;
  }
  // One registration (or rereg, when `rereg`) the daemon accepts: the request it got, the
  // memfd closed at once.
  sroce_share_mr share(uint32_t key, uint8_t* p, size_t len, bool rereg = false) {
    answer_next(0);
    if (rereg) {
      rereg_mr_pages(&ctx, key, p, len, true);
    } else {
      share_mr_pages(&ctx, key, p, len);
    }
    sroce_share_mr req{};
    int memfd = -1;
    REQUIRE(take(req, memfd));
    close(memfd);
    return req;
  }
};

uint8_t* anon(size_t len, int prot = PROT_READ | PROT_WRITE) {
  void* p = mmap(nullptr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  return static_cast<uint8_t*>(p);
}

}  // namespace

TEST_CASE("share: the whole pages of an anonymous buffer move onto a sealed memfd the daemon gets",
          "[share]") {
  FakeDaemon d;
  const size_t total = 18 * kPage;
  uint8_t* base = anon(total);
  fill(base, total, 1);
  uint8_t* buf = base + 100;  // partial pages at both ends
  const size_t len = 16 * kPage;
  d.answer_next(0);
  share_mr_pages(&d.ctx, 7, buf, len);
  sroce_share_mr req{};
  int memfd = -1;
  REQUIRE(d.take(req, memfd));
  CHECK(req.lkey == 7);
  CHECK(req.va == reinterpret_cast<uintptr_t>(base + kPage));
  CHECK(req.len == 15 * kPage);  // [base + 100, base + 16 pages + 100): 15 whole pages
  CHECK(req.offset == 0);
  // What the daemon checks: sealed against shrinking, long enough.
  const int seals = fcntl(memfd, F_GET_SEALS);
  CHECK((seals & F_SEAL_SHRINK) != 0);
  CHECK((seals & F_SEAL_SEAL) != 0);
  CHECK(lseek(memfd, 0, SEEK_END) == static_cast<off_t>(req.len));
  CHECK(ftruncate(memfd, 0) != 0);  // a hostile program cannot shrink it either
  // The program's memory is unchanged byte for byte, its whole pages are the memfd's.
  CHECK(holds(base, total, 1));
  CHECK(on_memfd(base + kPage));
  CHECK(on_memfd(base + 15 * kPage));
  CHECK_FALSE(on_memfd(base));               // the partial head page stays private
  CHECK_FALSE(on_memfd(base + 16 * kPage));  // and the tail
  // The daemon's mapping and the program's are the same pages, both ways.
  auto* dm = static_cast<uint8_t*>(mmap(nullptr, req.len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0));
  REQUIRE(dm != MAP_FAILED);
  CHECK(memcmp(dm, base + kPage, req.len) == 0);
  dm[5] = 0xee;
  CHECK(base[kPage + 5] == 0xee);
  base[kPage + 6] = 0xdd;
  CHECK(dm[6] == 0xdd);
  fill(base, total, 2);

  SECTION("fork: the child gets a private copy, the parent's pages stay shared with the daemon") {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      bool ok = holds(base, total, 2) && !on_memfd(base + kPage) && !on_memfd(base + 15 * kPage);
      fill(base, total, 3);  // must not reach the parent nor the daemon
      ok = ok && holds(base, total, 3);
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(holds(base, total, 2));
    CHECK(memcmp(dm, base + kPage, req.len) == 0);
    dm[0] = 0x11;  // the daemon writes after the fork: the parent sees it
    CHECK(base[kPage] == 0x11);
  }
  SECTION("a second MR on the same pages is not shared again (the daemon reads it through the mem file)") {
    share_mr_pages(&d.ctx, 8, buf, len);
    sroce_share_mr r2{};
    int fd2 = -1;
    CHECK_FALSE(d.take(r2, fd2));
    CHECK(holds(base, total, 2));
    forget_mr_pages(&d.ctx, 8);
  }
  forget_mr_pages(&d.ctx, 7);
  munmap(dm, req.len);
  close(memfd);
  munmap(base, total);
}

TEST_CASE("share: pages another live MR touches, and memory that is not anonymous, stay as they are",
          "[share]") {
  FakeDaemon d;
  const size_t total = 8 * kPage;
  uint8_t* base = anon(total);
  fill(base, total, 4);
  sroce_share_mr req{};
  int memfd = -1;
  // A small MR (no whole page) on page 2, which the daemon may be writing through the mem file.
  share_mr_pages(&d.ctx, 20, base + 2 * kPage + 10, 100);
  CHECK_FALSE(d.take(req, memfd));
  share_mr_pages(&d.ctx, 21, base, total);  // covers page 2: not shared
  CHECK_FALSE(d.take(req, memfd));
  CHECK_FALSE(on_memfd(base));
  forget_mr_pages(&d.ctx, 21);
  forget_mr_pages(&d.ctx, 20);
  d.answer_next(-EOPNOTSUPP);  // an older daemon: the pages move, the MR stays on the mem file
  share_mr_pages(&d.ctx, 22, base, total);
  REQUIRE(d.take(req, memfd));
  close(memfd);
  CHECK(req.len == total);
  CHECK(holds(base, total, 4));
  forget_mr_pages(&d.ctx, 22);
  CHECK_FALSE(on_memfd(base));  // the MR went: the pages are private again
  CHECK(holds(base, total, 4));
  munmap(base, total);

  // Read-only anonymous memory, a shared mapping, the stack: never moved.
  uint8_t* ro = anon(4 * kPage, PROT_READ);
  share_mr_pages(&d.ctx, 23, ro, 4 * kPage);
  CHECK_FALSE(d.take(req, memfd));
  forget_mr_pages(&d.ctx, 23);
  munmap(ro, 4 * kPage);
  auto* sh = static_cast<uint8_t*>(mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  REQUIRE(sh != MAP_FAILED);
  share_mr_pages(&d.ctx, 24, sh, 4 * kPage);
  CHECK_FALSE(d.take(req, memfd));
  forget_mr_pages(&d.ctx, 24);
  munmap(sh, 4 * kPage);
  uint8_t stack[6 * 4096];
  memset(stack, 0x5a, sizeof stack);
  share_mr_pages(&d.ctx, 25, stack, sizeof stack);
  CHECK_FALSE(d.take(req, memfd));
  forget_mr_pages(&d.ctx, 25);
  CHECK(stack[100] == 0x5a);
}

TEST_CASE("share: a fork while another thread registers memory leaves the child able to register",
          "[share]") {
  FakeDaemon d;
  const size_t total = 4 * kPage;
  uint8_t* base = anon(total);
  fill(base, total, 6);
  // Thread T registers and waits for the daemon's answer, which comes 300 ms later; meanwhile
  // the main thread forks. The child must not inherit the provider's table locked.
  std::thread answer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    d.answer_next(0);
  });
  std::thread t([&] { share_mr_pages(&d.ctx, 30, base, total); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    alarm(5);  // a deadlock ends in SIGALRM
    forget_mr_pages(&d.ctx, 12345);  // takes the table's lock
    _exit(holds(base, total, 6) ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  t.join();
  answer.join();
  sroce_share_mr req{};
  int memfd = -1;
  REQUIRE(d.take(req, memfd));
  close(memfd);
  CHECK(holds(base, total, 6));
  forget_mr_pages(&d.ctx, 30);
  munmap(base, total);
}

// Issue 21: after the last MR on moved pages goes, they are private anonymous memory again with
// the contents the program and the daemon wrote, so MADV_DONTNEED zeroes them (what calloc after
// a heap shrink, jemalloc and tcmalloc rely on). Fails without the restore: a memfd mapping keeps
// its contents through MADV_DONTNEED and /proc/self/maps names the memfd.
TEST_CASE("share: dereg puts the pages back as private memory: same bytes, MADV_DONTNEED zeroes",
          "[share]") {
  FakeDaemon d;
  const size_t total = 18 * kPage;
  uint8_t* base = anon(total);
  fill(base, total, 1);
  uint8_t* buf = base + 100;
  const size_t len = 16 * kPage;
  d.answer_next(0);
  share_mr_pages(&d.ctx, 7, buf, len);
  sroce_share_mr req{};
  int memfd = -1;
  REQUIRE(d.take(req, memfd));
  REQUIRE(req.va == reinterpret_cast<uintptr_t>(base + kPage));
  REQUIRE(on_memfd(base + kPage));
  auto* dm = static_cast<uint8_t*>(mmap(nullptr, req.len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0));
  REQUIRE(dm != MAP_FAILED);
  // The program writes the buffer, then the daemon writes pages 2..9 (an RDMA WRITE landing).
  fill(base, total, 2);
  for (size_t i = 0; i < 8 * kPage; ++i) dm[kPage + i] = pattern(i, 9);
  std::vector<uint8_t> expect(total);
  for (size_t i = 0; i < total; ++i) expect[i] = pattern(i, 2);
  for (size_t i = 0; i < 8 * kPage; ++i) expect[2 * kPage + i] = pattern(i, 9);
  REQUIRE(memcmp(base, expect.data(), total) == 0);
  // DEREG_MR: the daemon unmaps its side and answers, then the provider forgets the MR.
  munmap(dm, req.len);
  close(memfd);
  forget_mr_pages(&d.ctx, 7);
  CHECK_FALSE(any_on_memfd(base, total));
  const std::string line = maps_line(base + kPage);
  INFO(line);
  CHECK(line.find(" rw-p ") != std::string::npos);
  CHECK(memcmp(base, expect.data(), total) == 0);  // byte for byte, before the madvise
  REQUIRE(madvise(base + kPage, 15 * kPage, MADV_DONTNEED) == 0);
  CHECK(all_zero(base + kPage, 15 * kPage));
  CHECK(memcmp(base, expect.data(), kPage) == 0);  // the partial pages were never moved
  CHECK(memcmp(base + 16 * kPage, expect.data() + 16 * kPage, 2 * kPage) == 0);

  SECTION("a later MR on the same pages is shared again, and one spanning the restored pages too") {
    fill(base, total, 3);
    d.answer_next(0);
    share_mr_pages(&d.ctx, 8, buf, len);
    REQUIRE(d.take(req, memfd));
    CHECK(req.va == reinterpret_cast<uintptr_t>(base + kPage));
    CHECK(req.len == 15 * kPage);
    close(memfd);
    CHECK(on_memfd(base + kPage));
    forget_mr_pages(&d.ctx, 8);
    CHECK_FALSE(any_on_memfd(base, total));
    // The whole buffer: three VMAs now (the restored pages are one of their own).
    d.answer_next(0);
    share_mr_pages(&d.ctx, 9, base, total);
    REQUIRE(d.take(req, memfd));
    CHECK(req.va == reinterpret_cast<uintptr_t>(base));
    CHECK(req.len == total);
    close(memfd);
    CHECK(holds(base, total, 3));
    forget_mr_pages(&d.ctx, 9);
    CHECK_FALSE(any_on_memfd(base, total));
    CHECK(holds(base, total, 3));
  }
  munmap(base, total);
}

TEST_CASE("share: pages stay on the memfd while any MR touches them, and go back when the last goes",
          "[share]") {
  FakeDaemon d;
  const size_t total = 8 * kPage;
  uint8_t* base = anon(total);
  fill(base, total, 5);
  sroce_share_mr req = d.share(40, base, total);
  int memfd = -1;
  share_mr_pages(&d.ctx, 41, base + 3 * kPage + 7, 10);  // on the mem file, over the moved pages
  CHECK_FALSE(d.take(req, memfd));
  forget_mr_pages(&d.ctx, 40);
  CHECK(on_memfd(base));  // MR 41 lives: the daemon may be writing page 3 through the mem file
  CHECK(on_memfd(base + 3 * kPage));
  fill(base, total, 6);
  forget_mr_pages(&d.ctx, 41);
  CHECK_FALSE(any_on_memfd(base, total));
  CHECK(holds(base, total, 6));
  munmap(base, total);
}

TEST_CASE("share: a range the program unmapped and mapped again while registered is left alone at dereg",
          "[share]") {
  FakeDaemon d;
  const size_t total = 6 * kPage;
  uint8_t* base = anon(total);
  fill(base, total, 7);
  d.share(50, base, total);
  // A program bug (freeing registered memory), but dereg must not clobber what is there now:
  // shared anonymous memory over the first half, the memfd's mapping still over the second.
  void* p = mmap(base, 3 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  REQUIRE(p == base);
  fill(base, 3 * kPage, 8);
  forget_mr_pages(&d.ctx, 50);
  const std::string line = maps_line(base);
  INFO(line);
  CHECK(line.find(" rw-s ") != std::string::npos);  // still the program's shared mapping
  CHECK(holds(base, 3 * kPage, 8));
  CHECK_FALSE(any_on_memfd(base, total));  // the rest of the moved range went back
  bool rest_holds = true;  // the second half kept what was written before
  for (size_t i = 3 * kPage; i < total; ++i) rest_holds = rest_holds && base[i] == pattern(i, 7);
  CHECK(rest_holds);
  munmap(base, total);
}

TEST_CASE("share: a rereg that drops the daemon's mapping restores the old pages and shares the new",
          "[share]") {
  FakeDaemon d;
  const size_t total = 4 * kPage;
  uint8_t* a = anon(total);
  uint8_t* b = anon(total);
  fill(a, total, 10);
  fill(b, total, 11);
  sroce_share_mr req = d.share(60, a, total);
  int memfd = -1;
  // Same range, same rights: the daemon keeps its mapping, so do the pages.
  rereg_mr_pages(&d.ctx, 60, a, total, false);
  CHECK_FALSE(d.take(req, memfd));
  CHECK(on_memfd(a));
  // A new range: a goes back, b is shared.
  req = d.share(60, b, total, true);
  CHECK(req.lkey == 60);
  CHECK(req.va == reinterpret_cast<uintptr_t>(b));
  CHECK_FALSE(any_on_memfd(a, total));
  CHECK(on_memfd(b));
  CHECK(holds(a, total, 10));
  CHECK(holds(b, total, 11));
  // New rights on the same range: shared again with a new memfd.
  req = d.share(60, b, total, true);
  CHECK(on_memfd(b));
  CHECK(holds(b, total, 11));
  forget_mr_pages(&d.ctx, 60);
  CHECK_FALSE(any_on_memfd(b, total));
  CHECK(holds(b, total, 11));
  munmap(a, total);
  munmap(b, total);
}

// What a registration and a deregistration cost in the provider (the moves onto the memfd and
// back: one copy of the MR's pages each, page faults included), for docs/performance.md.
// Hidden (not run by ctest): `provider_share_test "[.bench]"` prints one JSON line.
TEST_CASE("share: cost of the move at reg and of the restore at dereg", "[.bench]") {
  FakeDaemon d;
  std::string json = "{\"bench\":\"share_mr\"";
  for (const size_t mib : {size_t{1}, size_t{64}}) {
    const size_t len = mib << 20;
    const int reps = mib == 1 ? 40 : 6;
    std::vector<double> reg, dereg, copy;
    for (int r = 0; r < reps; ++r) {
      uint8_t* p = anon(len);
      memset(p, 0x5a + r, len);
      uint8_t* q = anon(len);  // the floor: one memcpy into fresh anonymous pages
      const auto c0 = std::chrono::steady_clock::now();
      memcpy(q, p, len);
      const auto c1 = std::chrono::steady_clock::now();
      REQUIRE(q[len / 2] == p[len / 2]);
      munmap(q, len);
      copy.push_back(std::chrono::duration<double, std::micro>(c1 - c0).count());
      d.answer_next(0);
      const auto t0 = std::chrono::steady_clock::now();
      share_mr_pages(&d.ctx, 70, p, len);
      const auto t1 = std::chrono::steady_clock::now();
      forget_mr_pages(&d.ctx, 70);
      const auto t2 = std::chrono::steady_clock::now();
      sroce_share_mr req{};
      int memfd = -1;
      REQUIRE(d.take(req, memfd));
      close(memfd);
      REQUIRE(!on_memfd(p));
      REQUIRE(p[len - 1] == static_cast<uint8_t>(0x5a + r));
      munmap(p, len);
      reg.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      dereg.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
    std::sort(reg.begin(), reg.end());
    std::sort(dereg.begin(), dereg.end());
    std::sort(copy.begin(), copy.end());
    const double reg_us = reg[reg.size() / 2], dereg_us = dereg[dereg.size() / 2];
    json += ",\"memcpy_fresh_us_" + std::to_string(mib) + "mib\":" + std::to_string(static_cast<long>(copy[copy.size() / 2])) + ",\"reg_us_" + std::to_string(mib) + "mib\":" + std::to_string(static_cast<long>(reg_us)) +
            ",\"dereg_us_" + std::to_string(mib) + "mib\":" + std::to_string(static_cast<long>(dereg_us)) +
            ",\"dereg_gbyte_per_s_" + std::to_string(mib) + "mib\":" +
            std::to_string(static_cast<double>(len) / (dereg_us * 1e3));
  }
  printf("%s}\n", json.c_str());
}
