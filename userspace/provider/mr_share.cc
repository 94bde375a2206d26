// Shared MRs on the socket path (docs/performance.md, "Shared memory"): at ibv_reg_mr the whole
// pages of an anonymous private buffer are moved onto a sealed memfd mapped MAP_SHARED at the
// same address with the same contents, and the memfd goes to sroced (SROCE_OP_SHARE_MR), which
// maps it once and copies with memcpy instead of a pread/pwrite of /proc/PID/mem per access.
// Whatever cannot be shared keeps working through the mem file; sharing is an optimisation
// that may fail at every step without changing what the program sees.
//
// What is shared: the whole pages inside [addr, addr + length) (the partial pages at the ends
// stay private, so data of neighbouring objects is never touched), only if they lie in one
// VMA that is anonymous, private, readable and writable (no path, or [heap]): file mappings,
// shared mappings, stacks, hugetlb, read-only memory and memory already shared stay on the
// mem file. The hazards, and what is done about each:
// - fork(): a MAP_SHARED page would be shared with the child, where the program expects a
//   private copy (a pinned page is copied for the child: the kernel's copy-on-fork of pinned
//   pages, and ibv_fork_init's MADV_DONTFORK keeps it from the child). A pthread_atfork child
//   handler gives the child private copies of every such mapping; with ibv_fork_init
//   (IBV_FORK_ENABLED) the new mapping is MADV_DONTFORK, as rdma-core's registration made the
//   old one. A child made by a raw clone() without CLONE_VM runs no handler and shares them.
// - another MR on the same pages: a live MR that was not shared may have daemon writes in
//   flight to the old pages, which the copy would lose, so pages that such an MR covers are not
//   shared (the table below); pages already shared are a memfd mapping and are not shared
//   again (the new MR uses the mem file, and the daemon's mapping of the first MR while it
//   lives).
// - the program writing the pages from another thread during ibv_reg_mr: a write between the
//   copy and the remap is lost. A program that registers memory another thread is writing at
//   that moment sees this; SROCE_SHARE_MR=0 turns sharing off.
// - dereg, unmapping the range, exec, exit: the daemon's mapping keeps the memfd's pages, which
//   nobody else reaches (the same as pinned pages under a hardware RNIC); dereg unmaps it.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "provider.h"

namespace sroce::provider {

namespace {

constexpr char kMemfdName[] = "sroce-mr";

// The remapping is invisible to the program (same bytes, same addresses), so the memory hooks
// some libraries put on mmap/mremap/munmap must not see it. With the libc calls, UCX (whose UCM
// hooks report an mremap as an unmap of the range to its registration cache) failed
// `ucx_perftest -t tag_bw/tag_lat` with a UD wire-up timeout; with UCX_MEM_EVENTS=n, or with
// these raw system calls, it passes (the path inside UCX was not traced further).
void* sys_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return reinterpret_cast<void*>(syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}
int sys_munmap(void* addr, size_t len) { return static_cast<int>(syscall(SYS_munmap, addr, len)); }
void* sys_mremap(void* old, size_t old_len, size_t new_len, int flags, void* to) {
  return reinterpret_cast<void*>(syscall(SYS_mremap, old, old_len, new_len, flags, to));
}
int sys_mprotect(void* addr, size_t len, int prot) { return static_cast<int>(syscall(SYS_mprotect, addr, len, prot)); }
int sys_madvise(void* addr, size_t len, int advice) {
  return static_cast<int>(syscall(SYS_madvise, addr, len, advice));
}
constexpr char kMapsTag[] = "/memfd:sroce-mr";

struct Vma {
  uintptr_t start = 0, end = 0;
  char perms[5] = {};
  const char* path = "";  // valid only during the callback
};

uintptr_t parse_hex(const char*& p, const char* end) {
  uintptr_t v = 0;
  for (; p < end; ++p) {
    const char c = *p;
    unsigned d;
    if (c >= '0' && c <= '9') d = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f') d = static_cast<unsigned>(c - 'a' + 10);
    else break;
    v = v * 16 + d;
  }
  return v;
}

// Calls f(const Vma&) for every line of /proc/self/maps until it returns false. Only system
// calls and the stack (the fork child handler uses it too). False if the file could not be read.
template <typename F>
bool for_each_vma(F f) {
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[8192];
  size_t have = 0;
  bool ok = true, go = true;
  while (go) {
    const ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    have += static_cast<size_t>(n);
    size_t at = 0;
    for (;;) {
      char* nl = static_cast<char*>(memchr(buf + at, '\n', have - at));
      if (!nl) break;
      *nl = '\0';
      const char* p = buf + at;
      Vma v;
      v.start = parse_hex(p, nl);
      if (p < nl && *p == '-') ++p;
      v.end = parse_hex(p, nl);
      if (p < nl) ++p;
      for (int i = 0; i < 4 && p < nl; ++i) v.perms[i] = *p++;
      // offset, dev, inode, then the path (if any) after spaces
      for (int field = 0; field < 3; ++field) {
        while (p < nl && *p == ' ') ++p;
        while (p < nl && *p != ' ') ++p;
      }
      while (p < nl && *p == ' ') ++p;
      v.path = p;
      at = static_cast<size_t>(nl - buf) + 1;
      if (!f(v)) {
        go = false;
        break;
      }
    }
    memmove(buf, buf + at, have - at);
    have -= at;
    if (have == sizeof buf - 1) {  // a line longer than the buffer: not a maps file we know
      ok = false;
      break;
    }
  }
  close(fd);
  return ok;
}

// The fork child: every shared-MR mapping becomes a private copy (see above). Only system calls
// and memcpy: a forked child of a threaded program may run nothing else here.
void fork_child() {
  struct Range {
    uintptr_t start, end;
    int prot;
  };
  static Range ranges[512];
  size_t n = 0;
  for_each_vma([&](const Vma& v) {
    if (strncmp(v.path, kMapsTag, sizeof kMapsTag - 1) == 0 && v.perms[0] == 'r' && v.perms[3] == 's') {
      ranges[n++] = {v.start, v.end, PROT_READ | (v.perms[1] == 'w' ? PROT_WRITE : 0)};
    }
    return n < sizeof ranges / sizeof ranges[0];
  });
  for (size_t i = 0; i < n; ++i) {
    const size_t len = ranges[i].end - ranges[i].start;
    void* at = reinterpret_cast<void*>(ranges[i].start);
    void* p = sys_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) continue;  // the child goes on sharing these pages with its parent
    memcpy(p, at, len);
    if (ranges[i].prot != (PROT_READ | PROT_WRITE)) sys_mprotect(p, len, ranges[i].prot);
    if (sys_mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at) == MAP_FAILED) sys_munmap(p, len);
  }
}

// Every live MR of this process (all contexts): the pages it touches (partial ones included).
struct LiveMr {
  const Context* ctx;
  uint32_t lkey;
  uintptr_t start, end;
};
std::mutex live_mutex;
std::vector<LiveMr> live;

// fork() with the table locked by another thread would leave the child's copy locked for ever
// (a new context of the child registering memory would hang): the table is held across fork.
void fork_prepare() { live_mutex.lock(); }
void fork_parent() { live_mutex.unlock(); }
void fork_child_unlock() {
  fork_child();
  live_mutex.unlock();
}

bool sharing_enabled() {
  static const bool on = [] {
    const char* e = getenv("SROCE_SHARE_MR");
    return !(e && strcmp(e, "0") == 0);
  }();
  return on;
}

// Moves [start, end) onto a new sealed memfd (same contents, same address); returns the fd, or
// -1 with the memory untouched.
int move_to_memfd(uintptr_t start, size_t len) {
  const int fd = memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(len)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return -1;
  }
  void* tmp = sys_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (tmp == MAP_FAILED) {
    close(fd);
    return -1;
  }
  memcpy(tmp, reinterpret_cast<const void*>(start), len);
  if (ibv_is_fork_initialized() == IBV_FORK_ENABLED) (void)sys_madvise(tmp, len, MADV_DONTFORK);
  // One step: the old pages go and the memfd's take their place (mmap_lock held throughout).
  if (sys_mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(start)) == MAP_FAILED) {
    sys_munmap(tmp, len);
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

void share_mr_pages(Context* ctx, uint32_t lkey, const void* addr, size_t length) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t start = (a + page - 1) & ~(page - 1);
  const uintptr_t end = (a + length) & ~(page - 1);
  std::lock_guard<std::mutex> lock(live_mutex);
  bool share = sharing_enabled() && end > start && a + length > a;
  // Pages another live MR touches may have daemon writes in flight through the mem file (and
  // pages a shared MR covers are no longer anonymous anyway).
  for (const LiveMr& m : live)
    if (m.start < end && start < m.end) share = false;
  if (share) {
    bool found = false;
    for_each_vma([&](const Vma& v) {
      if (v.end <= start) return true;
      found = v.start <= start && end <= v.end && strcmp(v.perms, "rw-p") == 0 &&
              (v.path[0] == '\0' || strcmp(v.path, "[heap]") == 0);
      return false;
    });
    share = found;
  }
  int fd = share ? move_to_memfd(start, end - start) : -1;
  if (fd >= 0) {
    static std::once_flag atfork;
    std::call_once(atfork, [] { pthread_atfork(fork_prepare, fork_parent, fork_child_unlock); });
    sroce_share_mr req{};
    req.lkey = lkey;
    req.va = start;
    req.len = end - start;
    req.offset = 0;
    // A refusal (an older daemon: EOPNOTSUPP) leaves the MR on the mem file; the pages stay
    // on the memfd, which is memory like any other.
    (void)ctx->st->control.call_with_fd(SROCE_OP_SHARE_MR, &req, sizeof req, fd, nullptr, 0);
    close(fd);
  }
  live.push_back(LiveMr{ctx, lkey, a & ~(page - 1), (a + length + page - 1) & ~(page - 1)});
}

void forget_mr_pages(const Context* ctx, uint32_t lkey) {
  std::lock_guard<std::mutex> lock(live_mutex);
  for (auto it = live.begin(); it != live.end(); ++it) {
    if (it->ctx == ctx && it->lkey == lkey) {
      live.erase(it);
      return;
    }
  }
}

void rereg_mr_pages(const Context* ctx, uint32_t lkey, const void* addr, size_t length) {
  // The daemon dropped the mapping (a new translation or new rights): the MR is on the mem file.
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<uintptr_t>(addr);
  std::lock_guard<std::mutex> lock(live_mutex);
  for (LiveMr& m : live) {
    if (m.ctx == ctx && m.lkey == lkey) {
      m.start = a & ~(page - 1);
      m.end = (a + length + page - 1) & ~(page - 1);
    }
  }
}

}  // namespace sroce::provider
