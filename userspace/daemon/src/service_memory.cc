// Whose memory a context reaches (docs/security.md, "Memory"): the mem file a process hands
// over with HELLO, and closing a context whose address space went away.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>

#include <spdlog/spdlog.h>

#include "service.h"

namespace sroce::daemon {

namespace {

// The pid of a procfs path ".../<pid>/mem" or ".../<pid>/task/<tid>/mem"; -1 if `path` is not
// a mem file of a process directory.
pid_t mem_file_pid(std::string_view path) {
  auto strip = [&](std::string_view tail) {
    if (path.size() < tail.size() || path.substr(path.size() - tail.size()) != tail) return false;
    path.remove_suffix(tail.size());
    return true;
  };
  auto number = [&](pid_t& out) {
    const size_t slash = path.rfind('/');
    if (slash == std::string_view::npos) return false;
    std::string_view digits = path.substr(slash + 1);
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    if (digits.empty() || ec != std::errc{} || p != digits.data() + digits.size() || out <= 0) return false;
    path.remove_suffix(digits.size() + 1);
    return true;
  };
  pid_t pid = -1;
  if (!strip("/mem") || !number(pid)) return -1;
  if (strip("/task") && !number(pid)) return -1;  // a thread's: the number before /task
  return pid;
}

}  // namespace

// What a hostile client could pass instead of its own /proc/self/mem, and why each is refused
// or harmless (docs/security.md): a regular file, pipe or socket (not procfs: EBADF); another
// procfs file (environ, pagemap, a sysctl: not ".../<pid>/mem": EBADF); a read-only mem file
// (writes would fail later: EBADF now); the mem file of another process on the daemon's own
// procfs (its pid is not the peer's: EBADF). A mem file of another process seen through
// another procfs instance (a pid namespace) is only checked by the probe: to have opened it,
// the client needed ptrace rights over that process (PTRACE_MODE_ATTACH at open,
// fs/proc/base.c proc_mem_open), so it reaches nothing it could not reach itself.
int Service::hello_mem_fd(Context& c, int fd, const sroce_hello_mem& hm) {
  struct statfs sfs {};
  struct stat st {};
  if (fstatfs(fd, &sfs) != 0 || sfs.f_type != PROC_SUPER_MAGIC || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    spdlog::warn("context {}: pid {}: the HELLO descriptor is not a procfs file: refused", c.id, c.pid);
    return -EBADF;
  }
  const int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || (fl & O_ACCMODE) != O_RDWR) {
    spdlog::warn("context {}: pid {}: the HELLO mem file is not open for reading and writing: refused", c.id, c.pid);
    return -EBADF;
  }
  std::array<char, 256> link{};
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t ln = readlink(self.c_str(), link.data(), link.size() - 1);
  const pid_t pid = ln > 0 ? mem_file_pid({link.data(), static_cast<size_t>(ln)}) : -1;
  if (pid < 0) {
    spdlog::warn("context {}: pid {}: the HELLO descriptor ({}) is not a /proc/<pid>/mem: refused", c.id, c.pid,
                 ln > 0 ? std::string_view(link.data(), static_cast<size_t>(ln)) : "?");
    return -EBADF;
  }
  // On the daemon's own procfs the pid is comparable with SO_PEERCRED's (same pid namespace).
  struct stat proc {};
  if (stat("/proc/self", &proc) == 0 && proc.st_dev == st.st_dev && pid != c.pid) {
    spdlog::warn("context {}: pid {} handed over the memory of pid {}: refused", c.id, c.pid, pid);
    return -EBADF;
  }
  // Reading through it works and shows what the process says is at probe_addr.
  uint64_t v = 0;
  if (hm.probe_addr == 0 || hm.probe_addr > ProcessMemory::kVaMask ||
      pread(fd, &v, sizeof v, static_cast<off_t>(hm.probe_addr)) != static_cast<ssize_t>(sizeof v) ||
      v != hm.probe) {
    spdlog::warn("context {}: pid {}: the HELLO mem file does not read back the probe: refused", c.id, c.pid);
    return -EBADF;
  }
  return 0;
}

// SROCE_OP_SHARE_MR (sroce_abi.h; docs/performance.md, "Shared memory"; docs/security.md,
// "Memory"). What a hostile client could do with it and why it is harmless:
// - a descriptor of something else: only a tmpfs file with seals can pass (fstatfs, F_GET_SEALS),
//   which a client has only if it made it or was given it (its own data);
// - a memfd shorter than claimed, or one it truncates afterwards (SIGBUS in the daemon): the size
//   is checked after F_SEAL_SHRINK is seen, and with that seal the file can never shrink again
//   (F_SEAL_SHRINK cannot be removed, and a sealed-off seal set stays as it is);
// - holes punched into it afterwards: the daemon's access allocates a zero page, as for any
//   page the process never touched; bounded by the MR's length, which limits.mr_bytes_per_uid
//   bounds;
// - a memfd with contents other than its memory at va: the daemon then reads and writes that
//   file instead of the process's pages, i.e. the client's own data only (what a peer may reach
//   stays what the MR's keys and bounds allow);
// - F_SEAL_WRITE / F_SEAL_FUTURE_WRITE afterwards: refused by the kernel while the daemon's
//   writable mapping exists (EBUSY), or without effect on existing mappings.
int Service::op_share_mr(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_share_mr req;
  if (c.kernel) return -EOPNOTSUPP;  // the kernel path maps pinned pages already
  if (body.size() < sizeof req || r.in_nfds != 1) return -EINVAL;
  memcpy(&req, body.data(), sizeof req);
  auto it = c.mrs.find(req.lkey);
  if (it == c.mrs.end()) return -EINVAL;
  MrObj& m = it->second;
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (req.len == 0 || req.va % page || req.len % page || req.offset % page || req.va < m.addr ||
      req.va + req.len < req.va || req.va + req.len > m.addr + m.length || req.offset + req.len < req.offset ||
      req.offset > static_cast<uint64_t>(INT64_MAX) - req.len || m.share.base() != nullptr)
    return -EINVAL;
  const int fd = r.in_fds[0];
  struct statfs sfs {};
  struct stat st {};
  const int seals = fcntl(fd, F_GET_SEALS);
  const int fl = fcntl(fd, F_GETFL);
  if (fstatfs(fd, &sfs) != 0 || sfs.f_type != TMPFS_MAGIC || seals < 0 || !(seals & F_SEAL_SHRINK) || fl < 0 ||
      (fl & O_ACCMODE) != O_RDWR || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) < req.offset + req.len) {
    spdlog::warn("context {}: pid {}: SHARE_MR of lkey {:#x}: not a shrink-sealed tmpfs memfd of {} bytes: refused",
                 c.id, c.pid, req.lkey, req.offset + req.len);
    return -EBADF;
  }
  // Writable only if the MR may be written at all (remote write and atomics need local write).
  const bool writable = (m.access & IBV_ACCESS_LOCAL_WRITE) != 0;
  SharedMemory map;
  if (int rc = map.map(fd, req.offset, req.len, PROT_READ | (writable ? PROT_WRITE : 0)); rc != 0) return rc;
  m.share = std::move(map);
  mem_.add_shared_range(c.tag, req.lkey, req.va, req.len, m.share.base(),
                        writable);  // this MR's only
  ++stats_.mrs_shared;
  return 0;
}

void Service::unshare_mr(Context& c, uint32_t lkey, MrObj& m) {
  if (!m.share.base()) return;
  mem_.remove_mr_map(c.tag, lkey);
  m.share.reset();
}

void Service::close_gone_context(uint32_t id) {
  Context* c = find(id);
  if (!c) return;
  spdlog::warn("context {}: pid {}: its address space is gone (the process exec'd or exited): closing", c->id,
               c->pid);
  ++stats_.contexts_gone;
  // As shutdown() for one context: work the engine holds completes with IBV_WC_WR_FLUSH_ERR
  // into the CQ rings (IBA 10.3.1), the rings get their error flag, the socket's holder gets
  // IBV_EVENT_DEVICE_FATAL; then the context is closed. Nothing of it touches the memory.
  for (auto& [qpn, qp] : c->qps) {
    QpAttr err;
    err.qp_state = QpState::kErr;
    (void)engine_.modify_qp(qpn, err, kQpState, now_);
  }
  poll_completions();
  c = find(id);
  if (!c) return;
  send_async_event(*c, 0, IBV_EVENT_DEVICE_FATAL);
  for (auto& [h, cq] : c->cqs) cq.ring.set_error();
  for (auto& [h, srq] : c->srqs) srq.ring.set_error();
  for (auto& [q, qp] : c->qps) {
    if (qp.sq.valid()) qp.sq.set_error();
    if (qp.rq.valid()) qp.rq.set_error();
  }
  close_context(id, "address space gone");
}

// Contexts whose address space ProcessMemory found gone during an access, and every
// kGoneSweep a look at each socket context (a process that exec'd while a forked child keeps
// the socket and posts nothing would otherwise stay open until its next request).
void Service::reap_gone_contexts(Time now) {
  constexpr Duration kGoneSweep = Duration::millis(100);
  if (now - last_gone_sweep_ >= kGoneSweep || now < last_gone_sweep_) {
    last_gone_sweep_ = now;
    for (auto& [id, c] : contexts_)
      if (c->hello && !c->kernel) (void)mem_.alive(c->tag);
  }
  std::array<uint16_t, 16> tags;
  for (;;) {
    const size_t n = mem_.take_dead(tags);
    if (n == 0) return;
    for (size_t i = 0; i < n; ++i) {
      uint32_t id = 0;
      for (auto& [cid, c] : contexts_)
        if (c->tag == tags[i] && !c->kernel) id = cid;
      if (id) close_gone_context(id);
    }
  }
}

}  // namespace sroce::daemon
