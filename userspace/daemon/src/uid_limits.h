// Per-uid limits of sroced and the counters that show them at work
// (docs/security.md, "Limits"; the [limits] keys of sroced.toml).
//
// One user must not exhaust the daemon for everyone: every uid (but root,
// unless limits.root) may hold at most so many connections, QPs, MRs and
// registered bytes and ring descriptors. A request past a limit fails with
// the errno libibverbs programs expect of a kernel device (ENOMEM for
// objects and memory, as the kernel's RLIMIT_MEMLOCK check in ib_umem_get;
// EMFILE for descriptors and connections) and is counted. Connections that
// do not say HELLO in time, and peers refused by the uid policy, are closed
// at once; a failing accept (EMFILE) pauses the listening socket for a while
// rather than spin on it.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace sroce::daemon {

struct LimitStats {
  uint64_t contexts = 0;     // connections refused: limits.contexts_per_uid
  uint64_t qps = 0;          // CREATE_QP refused: limits.qps_per_uid
  uint64_t mrs = 0;          // REG_MR / ALLOC_MW refused: limits.mrs_per_uid
  uint64_t mr_bytes = 0;     // REG_MR / REREG_MR refused: limits.mr_bytes_per_uid
  uint64_t ring_fds = 0;     // CREATE_CQ/QP/SRQ/COMP_CHANNEL refused: limits.ring_fds_per_uid
  uint64_t hello_timeouts = 0;  // connections closed: no HELLO within limits.hello_timeout_ms
  uint64_t accept_errors = 0;   // accept(2) failures (EMFILE, ENFILE, ENOBUFS, ENOMEM)
  uint64_t accept_pauses = 0;   // times the listening socket was set aside after one
  uint64_t qkey_eperm = 0;      // privileged Q_Keys refused (no CAP_NET_RAW)
};

// What one uid holds now, summed over its contexts.
struct UidUsage {
  uint32_t contexts = 0;
  uint32_t qps = 0;
  uint32_t mrs = 0;  // MRs and memory windows
  uint64_t mr_bytes = 0;
  uint32_t ring_fds = 0;
};

// IBA 10.2.4 / Linux uverbs: a Q_Key with the high bit set is privileged.
inline constexpr uint32_t kPrivilegedQkeyBit = 0x80000000u;

// Whether process `pid` of `uid` has CAP_NET_RAW in its effective set, read
// from /proc/<pid>/status at accept time (docs/security.md explains the race
// and why the uid is compared too). False when the file cannot be read.
bool proc_has_net_raw(pid_t pid, uid_t uid);

}  // namespace sroce::daemon
