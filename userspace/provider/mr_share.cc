// Shared MRs on the socket path (docs/performance.md, "Shared memory"): at ibv_reg_mr the whole
// pages of an anonymous private buffer are moved onto a sealed memfd mapped MAP_SHARED at the
// same address with the same contents, and the memfd goes to sroced (SROCE_OP_SHARE_MR), which
// maps it once and copies with memcpy instead of a pread/pwrite of /proc/PID/mem per access.
// Whatever cannot be shared keeps working through the mem file; sharing is an optimisation
// that may fail at every step without changing what the program sees.
//
// What is shared: the whole pages inside [addr, addr + length) (the partial pages at the ends
// stay private, so data of neighbouring objects is never touched), only if they lie in
// adjacent VMAs that are anonymous, private, readable and writable (no path, or [heap]): file
// mappings, shared mappings, stacks, hugetlb, read-only memory and memory shared at that moment
// stay on the mem file. The hazards, and what is done about each:
// - fork(): a MAP_SHARED page would be shared with the child, where the program expects a
//   private copy (a pinned page is copied for the child: the kernel's copy-on-fork of pinned
//   pages, and ibv_fork_init's MADV_DONTFORK keeps it from the child). A pthread_atfork child
//   handler gives the child private copies of every such mapping; with ibv_fork_init
//   (IBV_FORK_ENABLED) the new mapping is MADV_DONTFORK, as rdma-core's registration made the
//   old one. A child made by a raw clone() without CLONE_VM runs no handler and shares them.
// - another MR on the same pages: a live MR that was not shared may have daemon writes in
//   flight to the old pages, which the copy would lose, so pages that such an MR covers are not
//   shared (the table below); pages shared at the moment are a memfd mapping and are not
//   shared again (the new MR uses the mem file, and the daemon's mapping of the first MR while
//   it lives).
// - the program writing the pages from another thread during ibv_reg_mr (or the dereg that
//   restores them): a write between the copy and the remap is lost. A program that registers
//   memory another thread is writing at that moment sees this; SROCE_SHARE_MR=0 turns sharing
//   off.
// - dereg: once no live MR touches the moved pages any more (the last dereg, or a rereg that
//   made the daemon drop its mapping), they go back to private anonymous memory with their
//   contents (restore_unused): a file mapping differs from anonymous memory after the MR is
//   gone too (MADV_DONTNEED keeps a memfd's contents, where allocators rely on it zeroing
//   their freed pages: calloc after a heap shrink). DEREG_MR and REREG_MR answer after the
//   daemon unmapped its side, so nothing writes the memfd during the copy. A later MR on those
//   pages is shared again.
// - unmapping the range, exec, exit while registered: the daemon's mapping keeps the memfd's
//   pages, which nobody else reaches (the same as pinned pages under a hardware RNIC); dereg
//   then restores only what is still this memfd's mapping (inode checked), never what the
//   program mapped there since.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
  uint64_t inode = 0;
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
      // offset, dev, inode (decimal), then the path (if any) after spaces
      for (int field = 0; field < 2; ++field) {
        while (p < nl && *p == ' ') ++p;
        while (p < nl && *p != ' ') ++p;
      }
      while (p < nl && *p == ' ') ++p;
      for (; p < nl && *p >= '0' && *p <= '9'; ++p) v.inode = v.inode * 10 + static_cast<uint64_t>(*p - '0');
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

// Replaces the pages [start, start + len) by private anonymous ones with the same contents and
// protection, in one step (mremap over them, the mm's lock held). Only system calls and memcpy
// (the fork child uses it). False with the memory as it was.
bool to_private(uintptr_t start, size_t len, const char* perms) {
  void* at = reinterpret_cast<void*>(start);
  const int prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                   (perms[2] == 'x' ? PROT_EXEC : 0);
  void* p = sys_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  const bool unreadable = (prot & PROT_READ) == 0;
  if (unreadable && sys_mprotect(at, len, prot | PROT_READ) != 0) {
    sys_munmap(p, len);
    return false;
  }
  memcpy(p, at, len);
  if ((prot != (PROT_READ | PROT_WRITE) && sys_mprotect(p, len, prot) != 0) ||
      sys_mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at) == MAP_FAILED) {
    sys_munmap(p, len);
    if (unreadable) (void)sys_mprotect(at, len, prot);
    return false;
  }
  return true;
}

bool is_our_mapping(const Vma& v) { return strncmp(v.path, kMapsTag, sizeof kMapsTag - 1) == 0 && v.perms[3] == 's'; }

// Every mapping of one of our memfds (inode 0: any) inside [start, end) becomes private memory;
// false if one could not (it stays on the memfd, which is memory like any other).
bool restore_mappings(uintptr_t start, uintptr_t end, uint64_t inode) {
  struct Range {
    uintptr_t start, end;
    char perms[5];
  };
  Range ranges[64];  // the stack: the fork child must not allocate
  bool ok = true;
  for (;;) {
    size_t n = 0;
    if (!for_each_vma([&](const Vma& v) {
          if (v.start >= end) return false;
          if (v.end > start && is_our_mapping(v) && (inode == 0 || v.inode == inode)) {
            Range& r = ranges[n++];
            r.start = v.start > start ? v.start : start;
            r.end = v.end < end ? v.end : end;
            memcpy(r.perms, v.perms, sizeof r.perms);
          }
          return n < sizeof ranges / sizeof ranges[0];
        }))
      return false;
    for (size_t i = 0; i < n; ++i) ok = to_private(ranges[i].start, ranges[i].end - ranges[i].start, ranges[i].perms) && ok;
    if (n < sizeof ranges / sizeof ranges[0] || !ok) return ok && n < sizeof ranges / sizeof ranges[0];
  }
}

// The fork child: every shared-MR mapping becomes a private copy (see above).
void fork_child() { (void)restore_mappings(0, UINTPTR_MAX, 0); }

// Every live MR of this process (all contexts): the pages it touches (partial ones included).
struct LiveMr {
  const Context* ctx;
  uint32_t lkey;
  uintptr_t start, end;
};
// The ranges moved onto a memfd (whole pages, disjoint: pages once moved are not anonymous
// any more, so they are not moved again while they stay on it), by the memfd's inode.
struct MovedRange {
  uintptr_t start, end;
  uint64_t inode;
};
std::mutex live_mutex;  // guards both tables
std::vector<LiveMr> live;
std::vector<MovedRange> moved;

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
int move_to_memfd(uintptr_t start, size_t len, uint64_t* inode) {
  const int fd = memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  struct stat st {};
  if (fstat(fd, &st) != 0 || ftruncate(fd, static_cast<off_t>(len)) != 0 ||
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
  *inode = st.st_ino;
  return fd;
}

// The moved ranges no live MR touches any more go back to private memory. Their MRs are
// deregistered (or rereg'd elsewhere), and DEREG_MR / REREG_MR answer after the daemon unmapped
// its side and fenced the MR's work (single-threaded), so nothing writes the memfd meanwhile.
void restore_unused() {
  for (size_t i = 0; i < moved.size();) {
    const MovedRange r = moved[i];
    bool used = false;
    for (const LiveMr& m : live) used = used || (m.start < r.end && r.start < m.end);
    if (used) {
      ++i;
      continue;
    }
    (void)restore_mappings(r.start, r.end, r.inode);  // on failure (ENOMEM) they stay on the memfd
    moved[i] = moved.back();
    moved.pop_back();
  }
}

// Under live_mutex: shares the whole pages of [addr, addr + length) if it may, and adds the MR
// to the table of live MRs.
void share_locked(Context* ctx, uint32_t lkey, const void* addr, size_t length) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t start = (a + page - 1) & ~(page - 1);
  const uintptr_t end = (a + length) & ~(page - 1);
  bool share = sharing_enabled() && end > start && a + length > a;
  // Pages another live MR touches may have daemon writes in flight through the mem file (and
  // pages a shared MR covers are no longer anonymous anyway).
  for (const LiveMr& m : live)
    if (m.start < end && start < m.end) share = false;
  if (share) {
    // One or more adjacent VMAs, each anonymous private read-write (a range restored after a
    // dereg is a VMA of its own, which a larger MR may span).
    uintptr_t at = start;
    for_each_vma([&](const Vma& v) {
      if (v.end <= at) return true;
      if (v.start > at || strcmp(v.perms, "rw-p") != 0 || !(v.path[0] == '\0' || strcmp(v.path, "[heap]") == 0))
        return false;
      at = v.end;
      return at < end;
    });
    share = at >= end;
  }
  uint64_t inode = 0;
  const int fd = share ? move_to_memfd(start, end - start, &inode) : -1;
  if (fd >= 0) {
    static std::once_flag atfork;
    std::call_once(atfork, [] { pthread_atfork(fork_prepare, fork_parent, fork_child_unlock); });
    moved.push_back(MovedRange{start, end, inode});
    sroce_share_mr req{};
    req.lkey = lkey;
    req.va = start;
    req.len = end - start;
    req.offset = 0;
    // A refusal (an older daemon: EOPNOTSUPP) leaves the MR on the mem file; the pages stay
    // on the memfd until the MR goes, which is memory like any other.
    (void)ctx->st->control.call_with_fd(SROCE_OP_SHARE_MR, &req, sizeof req, fd, nullptr, 0);
    close(fd);
  }
  live.push_back(LiveMr{ctx, lkey, a & ~(page - 1), (a + length + page - 1) & ~(page - 1)});
}

}  // namespace

void share_mr_pages(Context* ctx, uint32_t lkey, const void* addr, size_t length) {
  std::lock_guard<std::mutex> lock(live_mutex);
  share_locked(ctx, lkey, addr, length);
}

void forget_mr_pages(const Context* ctx, uint32_t lkey) {
  std::lock_guard<std::mutex> lock(live_mutex);
  for (auto it = live.begin(); it != live.end(); ++it) {
    if (it->ctx == ctx && it->lkey == lkey) {
      live.erase(it);
      restore_unused();
      return;
    }
  }
}

void rereg_mr_pages(Context* ctx, uint32_t lkey, const void* addr, size_t length, bool dropped) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<uintptr_t>(addr);
  std::lock_guard<std::mutex> lock(live_mutex);
  for (auto it = live.begin(); it != live.end(); ++it) {
    if (it->ctx != ctx || it->lkey != lkey) continue;
    if (!dropped) {  // the daemon keeps its mapping (same range, same rights)
      it->start = a & ~(page - 1);
      it->end = (a + length + page - 1) & ~(page - 1);
      return;
    }
    // The daemon dropped its mapping (a new range or new rights) and fenced the MR's work: as
    // a dereg and a new registration of the (new) range, which may share again.
    live.erase(it);
    restore_unused();
    share_locked(ctx, lkey, addr, length);
    return;
  }
}

}  // namespace sroce::provider
