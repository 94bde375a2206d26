// sroced end to end, SROCE_OP_SHARE_MR (docs/performance.md "Shared memory", docs/security.md
// "Shared MRs"): two daemons in two namespaces, the test client speaking the ABI.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>

#include "two_daemons.h"

using namespace sroce::test;
using nlohmann::json;


// SROCE_OP_SHARE_MR (docs/performance.md "Shared memory", docs/security.md "Memory"): what a
// hostile client could hand over is refused, a shared MR is read and written through the
// daemon's mapping (byte for byte), and a client that punches holes into its memfd or tries to
// shrink it cannot make the daemon fault.
TEST_CASE("SHARE_MR: hostile memfds are refused, a shared MR moves data through the mapping",
          "[daemon][netns]") {
  REQUIRE_ROOT();
  TwoDaemons t;
  auto& [ns, da, db] = t;
  Side a, b;
  t.connect(a, b);
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const auto bb = reinterpret_cast<uint64_t>(b.buf.data());
  const uint64_t va = (bb + page - 1) & ~(page - 1);
  const uint64_t len = ((bb + b.buf.size()) & ~(page - 1)) - va;
  auto share = [&](int fd, uint64_t at, uint64_t n, uint32_t lkey) {
    sroce_share_mr req{lkey, 0, at, n, 0};
    return b.c.call_fd(SROCE_OP_SHARE_MR, &req, sizeof req, fd);
  };
  auto memfd = [](uint64_t size, unsigned flags, int seals) {
    int fd = memfd_create("test-share", flags);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, static_cast<off_t>(size)) == 0);
    if (seals) REQUIRE(fcntl(fd, F_ADD_SEALS, seals) == 0);
    return fd;
  };
  // Refused, each for its own reason.
  CHECK(share(-1, va, len, b.mr.lkey) == -EINVAL);  // no descriptor
  int pfd[2];
  REQUIRE(pipe(pfd) == 0);
  CHECK(share(pfd[0], va, len, b.mr.lkey) == -EBADF);  // not a tmpfs file
  close(pfd[0]);
  close(pfd[1]);
  int f = memfd(len, MFD_CLOEXEC, 0);  // no seals possible (F_SEAL_SEAL from birth)
  CHECK(share(f, va, len, b.mr.lkey) == -EBADF);
  close(f);
  f = memfd(len, MFD_CLOEXEC | MFD_ALLOW_SEALING, 0);  // may still shrink: SIGBUS later
  CHECK(share(f, va, len, b.mr.lkey) == -EBADF);
  close(f);
  f = memfd(len - page, MFD_CLOEXEC | MFD_ALLOW_SEALING, F_SEAL_SHRINK);  // shorter than claimed
  CHECK(share(f, va, len, b.mr.lkey) == -EBADF);
  close(f);
  f = memfd(len, MFD_CLOEXEC | MFD_ALLOW_SEALING, F_SEAL_SHRINK);
  const int ro = open(("/proc/self/fd/" + std::to_string(f)).c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(ro >= 0);
  CHECK(share(ro, va, len, b.mr.lkey) == -EBADF);  // read-only
  close(ro);
  CHECK(share(f, va + 1, len - page, b.mr.lkey) == -EINVAL);  // not page-aligned
  CHECK(share(f, va, len + page, b.mr.lkey) == -EINVAL);      // beyond the MR
  CHECK(share(f, va, len, b.mr.lkey ^ 0x100) == -EINVAL);      // no such MR
  CHECK(stats_of(db.socket())["service"]["mrs_shared"] == 0);

  // As the provider does it: B's whole pages move onto the memfd, then the daemon maps it.
  for (size_t i = 0; i < b.buf.size(); ++i) b.buf[i] = static_cast<char>(i * 5 + 3);
  void* tmp = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
  REQUIRE(tmp != MAP_FAILED);
  memcpy(tmp, reinterpret_cast<void*>(va), len);
  REQUIRE(mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(va)) != MAP_FAILED);
  REQUIRE(share(f, va, len, b.mr.lkey) == 0);
  CHECK(share(f, va, len, b.mr.lkey) == -EINVAL);  // already shared
  CHECK(ftruncate(f, 0) != 0);                     // the seal holds

  // RDMA WRITE A -> B across B's partial first page and its shared pages.
  for (size_t i = 0; i < 262144; ++i) a.buf[i] = static_cast<char>(i * 7 + 1);
  auto w = wqe(1, IBV_WR_RDMA_WRITE);
  w.remote_addr = bb + 100;
  w.rkey = b.mr.rkey;
  auto sge = a.sge(0, 262144);
  a.c.post_send(a.qp, w, &sge);
  auto cqes = a.c.wait_cqes(a.cq, 1, 10000);
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].status == IBV_WC_SUCCESS);
  CHECK(memcmp(b.buf.data() + 100, a.buf.data(), 262144) == 0);
  // RDMA READ B -> A: the daemon reads B's pages through the mapping.
  auto r = wqe(2, IBV_WR_RDMA_READ);
  r.remote_addr = bb + 300000;
  r.rkey = b.mr.rkey;
  auto rsge = a.sge(300000, 131072);
  a.c.post_send(a.qp, r, &rsge);
  cqes = a.c.wait_cqes(a.cq, 1, 10000);
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].status == IBV_WC_SUCCESS);
  CHECK(memcmp(a.buf.data() + 300000, b.buf.data() + 300000, 131072) == 0);
  json sb = stats_of(db.socket());
  CHECK(sb["service"]["mrs_shared"] == 1);
  CHECK(sb["memory"]["shared_bytes"].get<uint64_t>() >= 262144 + 131072 - 2 * page);

  // Holes punched into the memfd: the daemon reads zeros there (as B does), no fault.
  REQUIRE(fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(len)) == 0);
  a.c.post_send(a.qp, r, &rsge);
  cqes = a.c.wait_cqes(a.cq, 1, 10000);
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].status == IBV_WC_SUCCESS);
  CHECK(memcmp(a.buf.data() + 300000, b.buf.data() + 300000, 131072) == 0);
  CHECK(a.buf[300000] == 0);
  close(f);

  // DEREG_MR unmaps it; the daemon keeps serving B.
  sroce_handle_req dr{b.mr.lkey, 0};
  CHECK(b.c.call(SROCE_OP_DEREG_MR, &dr, sizeof dr) == 0);
  sroce_reg_mr_resp mr2{};
  CHECK(b.c.reg_mr(b.pd, b.buf.data(), b.buf.size(), IBV_ACCESS_LOCAL_WRITE, &mr2) == 0);
}

// A shared MR's range unmapped while the MR is still registered, fresh memory mapped at the
// same address and a new MR registered on it (UCX's rcache deregisters lazily after munmap):
// the peer's READ and WRITE through the new MR reach the new memory, never the old memfd's
// pages that the daemon still maps for the old MR (docs/security.md, "Shared MRs").
TEST_CASE("SHARE_MR: a new MR where a shared MR's range was remapped reaches the new memory",
          "[daemon][netns]") {
  REQUIRE_ROOT();
  TwoDaemons t;
  Side a, b;
  t.connect(a, b);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t len = 16 * page;
  constexpr uint32_t kAccess =
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  void* region = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(region != MAP_FAILED);
  auto* p = static_cast<unsigned char*>(region);
  const auto va = reinterpret_cast<uint64_t>(region);
  for (size_t i = 0; i < len; ++i) p[i] = static_cast<unsigned char>(0xa5 ^ (i * 13));
  std::vector<unsigned char> old_bytes(p, p + len);
  sroce_reg_mr_resp old_mr{};
  REQUIRE(b.c.reg_mr(b.pd, region, len, kAccess, &old_mr) == 0);
  // As the provider does it: the pages move onto a memfd the daemon maps (SHARE_MR).
  const int f = memfd_create("test-remap", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  REQUIRE(f >= 0);
  REQUIRE(ftruncate(f, static_cast<off_t>(len)) == 0);
  REQUIRE(fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  void* tmp = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
  REQUIRE(tmp != MAP_FAILED);
  memcpy(tmp, region, len);
  REQUIRE(mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, region) != MAP_FAILED);
  sroce_share_mr req{old_mr.lkey, 0, va, len, 0};
  REQUIRE(b.c.call_fd(SROCE_OP_SHARE_MR, &req, sizeof req, f) == 0);

  // The program unmaps the range (the old MR stays registered) and maps fresh memory there.
  REQUIRE(munmap(region, len) == 0);
  void* again = mmap(region, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  REQUIRE(again == region);
  for (size_t i = 0; i < len; ++i) p[i] = static_cast<unsigned char>(0x3c + i * 7);
  const std::vector<unsigned char> fresh(p, p + len);
  REQUIRE(fresh != old_bytes);
  sroce_reg_mr_resp new_mr{};
  REQUIRE(b.c.reg_mr(b.pd, region, len, kAccess, &new_mr) == 0);

  // RDMA READ through the new MR: the new memory, byte for byte.
  memset(a.buf.data(), 0, len);
  auto r = wqe(1, IBV_WR_RDMA_READ);
  r.remote_addr = va;
  r.rkey = new_mr.rkey;
  auto rsge = a.sge(0, static_cast<uint32_t>(len));
  a.c.post_send(a.qp, r, &rsge);
  auto cqes = a.c.wait_cqes(a.cq, 1, 10000);
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].status == IBV_WC_SUCCESS);
  CHECK(memcmp(a.buf.data(), fresh.data(), len) == 0);
  CHECK(memcmp(a.buf.data(), old_bytes.data(), len) != 0);

  // RDMA WRITE through the new MR: it lands in the new memory; the old pages keep their bytes.
  for (size_t i = 0; i < len; ++i) a.buf[len + i] = static_cast<char>(0x5a ^ (i * 11));
  auto w = wqe(2, IBV_WR_RDMA_WRITE);
  w.remote_addr = va;
  w.rkey = new_mr.rkey;
  auto wsge = a.sge(len, static_cast<uint32_t>(len));
  a.c.post_send(a.qp, w, &wsge);
  cqes = a.c.wait_cqes(a.cq, 1, 10000);
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].status == IBV_WC_SUCCESS);
  CHECK(memcmp(p, a.buf.data() + len, len) == 0);
  std::vector<unsigned char> memfd_now(len);
  REQUIRE(pread(f, memfd_now.data(), len, 0) == static_cast<ssize_t>(len));
  CHECK(memfd_now == old_bytes);

  // The old MR still reaches its own (old) pages: what a pinning RNIC does.
  auto r2 = wqe(3, IBV_WR_RDMA_READ);
  r2.remote_addr = va;
  r2.rkey = old_mr.rkey;
  auto r2sge = a.sge(2 * len, static_cast<uint32_t>(len));
  a.c.post_send(a.qp, r2, &r2sge);
  cqes = a.c.wait_cqes(a.cq, 1, 10000);
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].status == IBV_WC_SUCCESS);
  CHECK(memcmp(a.buf.data() + 2 * len, old_bytes.data(), len) == 0);

  sroce_handle_req dr{old_mr.lkey, 0};
  CHECK(b.c.call(SROCE_OP_DEREG_MR, &dr, sizeof dr) == 0);
  dr.handle = new_mr.lkey;
  CHECK(b.c.call(SROCE_OP_DEREG_MR, &dr, sizeof dr) == 0);
  close(f);
  munmap(region, len);
}
