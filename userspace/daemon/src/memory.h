// Application memory for the engine, reached only through the address space
// each process had when it connected (docs/security.md, "Memory").
//
// A socket-path context hands the daemon, with HELLO, a descriptor of its own
// /proc/self/mem (service_control.cc checks it). Such a file is bound to the
// mm it was opened on: pread/pwrite through it reach exactly that address
// space, with the opener's rights, and nothing else. After the process execs
// (a new mm) or exits, the old mm is gone and every access reads 0 bytes; the
// owner is then marked dead, every later access is refused without a system
// call, and the service closes the context (take_dead()). No pid is ever named
// after HELLO, so neither pid reuse nor an exec'd setuid image is reachable.
//
// One engine serves every local process, so an address alone does not say
// whose memory it is. The daemon gives every context a 16-bit tag and hands
// the engine host addresses (tag << 48) | va for the memory that context
// registers (Engine::reg_mr_host, the iova apart); user virtual addresses on
// x86-64 and arm64 fit in 48 bits. On top of the engine's key and bounds
// checks this class refuses any access that is not entirely inside a range the
// tagged context registered, so a bug in key handling still cannot reach
// another process or unregistered memory of the same process. An untagged
// address (tag 0) names nobody and is refused.
//
// Contexts of the kernel path (rdma_sroce.ko, docs/kmod.md) are "mapped":
// the module pins their MRs and the daemon maps the very pages from the
// control channel, so their ranges are read and written with memcpy through
// that mapping, never through a mem file.
//
// Shared MRs of the socket path (docs/performance.md, "Shared memory"): at
// ibv_reg_mr the provider may back the whole pages of an anonymous private
// buffer with a sealed memfd mapped at the same address (the same pages the
// process sees from then on) and hand the memfd over (SROCE_OP_SHARE_MR); the
// service maps it and records it with add_shared_range(). An access through
// that MR that lies entirely inside its mapping is a memcpy, anything else
// (the partial pages at an MR's ends, MRs that could not be shared) goes
// through the mem file as before. The bounds checks are the same for both:
// the registered ranges decide what may be reached, the mapping only how.
//
// Mappings belong to MRs, not to addresses: each one is recorded with the
// L_Key of its MR, and an access uses only the mapping of the MR it goes
// through (read_mr / write_mr, which the engine calls with that L_Key). Two
// MRs may name the same address with different memory behind it: a program
// that unmaps a still-registered shared MR's range and maps new memory there
// (UCX's rcache deregisters lazily after munmap) and registers a new MR on it
// must reach the new memory through the new MR, not the old memfd's pages
// that the old MR's mapping still holds. An access through no MR (read /
// write) uses no mapping: the mem file of a socket context, nothing of a
// mapped one.
//
// Inline send data (IBV_SEND_INLINE) lives in the daemon, copied out of the
// send ring: tag kLocalTag denotes daemon memory, only inside windows the
// daemon itself opened with allow_local().
//
// Read-ahead (the data path's largest cost was one system call per packet: a
// 64 KiB RDMA WRITE at MTU 4096 made 16). A read that continues where an
// earlier read of the same context ended is a stream (the engine gathers a
// message packet by packet, several QPs interleaved): it fills one of a few
// windows with up to kWindowBytes of that context's memory in one pread, and
// the next packets of the stream are copied from the window. Nothing changes
// for what may be read (every read is checked against the registered ranges
// first; the window only holds bytes the process has). A window is only a
// copy taken a moment earlier, so the daemon drops all windows whenever the
// application may have written memory since: forget_windows() at the start of
// every loop pass and after new work requests were taken from the rings (a
// program writes a buffer, then posts it), and any write of the daemon into a
// window's range drops that window.
//
// Write batching, the same cost on the receive side: writes into a process
// are checked at once (the engine learns of a refused range immediately) and
// staged; consecutive writes of one context leave in one pwrite per run of
// contiguous bytes. flush_writes() sends them; the loop calls it after the
// received packets were processed and before completions reach any ring (a
// completion, or an ACK the peer acts on, must find the data in place), and
// every read, detach and remove_range flushes first. The kernel refusing a
// staged write (the process unmapped registered memory, or died) is counted
// in `failed` but cannot fail the request any more; rxe cannot fail there
// either (its pages are pinned).
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sroce/engine/engine.h"

namespace sroce::daemon {

class ProcessMemory final : public MemoryAccess {
 public:
  static constexpr uint16_t kLocalTag = 0xffff;
  static constexpr unsigned kTagShift = 48;
  static constexpr uint64_t kVaMask = (1ull << kTagShift) - 1;

  static uint64_t tagged(uint16_t tag, uint64_t va) { return (uint64_t{tag} << kTagShift) | (va & kVaMask); }

  // `batching`: read-ahead windows and staged writes (below); false: one
  // pread / pwrite per access.
  explicit ProcessMemory(size_t max_tags = 65535, bool batching = true);
  ~ProcessMemory() override;
  ProcessMemory(const ProcessMemory&) = delete;
  ProcessMemory& operator=(const ProcessMemory&) = delete;

  // A socket-path context: `mem_fd` is the process's /proc/<pid>/mem, opened
  // by the process itself (checked by the caller); this class owns it from
  // now on and closes it on detach.
  void attach(uint16_t tag, int mem_fd);
  // A kernel-path context: only mapped ranges, no process.
  void attach_mapped(uint16_t tag);
  // A mapped context registers [va, va + len), which the MR `lkey` reaches at `at` in the
  // daemon (replacing an earlier mapping of that MR: REREG_MR); a range mapped read-only
  // (`writable` false) refuses writes instead of faulting. remove_range() and
  // remove_mr_map() undo it.
  void add_mapped_range(uint16_t tag, uint32_t lkey, uint64_t va, uint64_t len, std::byte* at,
                        bool writable);
  // Socket path: [va, va + len) of the MR `lkey` (inside its registered range) also lives at
  // `at` (its memfd, mapped by the service, which unmaps it after remove_mr_map()).
  void add_shared_range(uint16_t tag, uint32_t lkey, uint64_t va, uint64_t len, std::byte* at,
                        bool writable);
  // Forgets the mapping of MR `lkey` (if any): DEREG_MR, a dropped share.
  void remove_mr_map(uint16_t tag, uint32_t lkey);
  void detach(uint16_t tag);  // forgets the mem file and every range of the tag
  void add_range(uint16_t tag, uint64_t va, uint64_t len);
  void remove_range(uint16_t tag, uint64_t va, uint64_t len);
  size_t range_count(uint16_t tag) const;

  // One byte at `va` of the tag's address space, registered or not (REG_MR's
  // EFAULT check): 0, -EFAULT (not mapped), -ESRCH (the address space is gone:
  // the owner is marked dead) or -EINVAL (no such tag).
  int probe(uint16_t tag, uint64_t va);
  // The tag's address space still exists (false marks it dead). A mapped
  // context is always alive. One pread of one byte.
  bool alive(uint16_t tag);
  bool dead(uint16_t tag) const { return tag < owners_.size() && owners_[tag].dead; }
  // Tags whose address space went away since the last call (each reported
  // once), for the service to close their contexts; up to `out.size()`.
  size_t take_dead(std::span<uint16_t> out);

  // A window of daemon memory the engine may read through kLocalTag
  // addresses; returns the address to give the engine.
  uint64_t allow_local(const void* p, size_t len);
  void clear_local();

  // Drops every read-ahead window (see above). Cheap: the loop calls it
  // several times per pass.
  void forget_windows() { windows_valid_ = 0; }
  // Sends the staged writes (see above); true if there were any.
  bool flush_writes();
  static constexpr size_t kWindowBytes = 64 * 1024;
  static constexpr size_t kWindows = 8;
  static constexpr size_t kMinStreamRead = 1024;

  bool read(uint64_t addr, std::span<std::byte> out) override {
    return read_via(false, 0, addr, out);
  }
  bool write(uint64_t addr, std::span<const std::byte> in) override {
    return write_via(false, 0, addr, in);
  }
  bool read_mr(uint32_t lkey, uint64_t addr, std::span<std::byte> out) override {
    return read_via(true, lkey, addr, out);
  }
  // The copies out of a mapping (kernel path, shared MRs), a read-ahead window or inline
  // data are sroce_crc32_copy: the CRC in the same pass; a pread is followed by the CRC.
  bool read_mr_crc(uint32_t lkey, uint64_t addr, std::span<std::byte> out, uint32_t& crc) override {
    return read_via(true, lkey, addr, out, &crc);
  }
  bool write_mr(uint32_t lkey, uint64_t addr, std::span<const std::byte> in) override {
    return write_via(true, lkey, addr, in);
  }

  struct Stats {
    uint64_t reads = 0, writes = 0, bytes_read = 0, bytes_written = 0;
    uint64_t refused = 0;  // outside every registered range, unknown or untagged tag
    uint64_t failed = 0;   // the kernel refused (page unmapped)
    uint64_t gone = 0;     // contexts whose address space was found gone (exec, exit)
    uint64_t window_fills = 0;  // read-ahead preads
    uint64_t window_hits = 0;   // reads served from a window
    uint64_t write_flushes = 0;  // staged runs written
    uint64_t shared_bytes = 0;   // bytes read or written by memcpy through a shared MR's mapping
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Range {
    uint64_t va, len;
  };
  struct MappedRange {
    uint32_t lkey;  // the MR it belongs to
    uint64_t va, len;
    std::byte* at;
    bool writable;
  };
  struct Owner {
    bool used = false;
    bool mapped = false;  // a kernel-path context
    bool dead = false;    // the address space is gone: refuse everything
    bool dead_reported = false;
    int fd = -1;          // /proc/<pid>/mem of the process (socket path)
    std::vector<Range> ranges;  // sorted by va; may overlap
    uint64_t max_len = 0;
    std::vector<MappedRange>
        maps;  // per MR: a mapped context's pinned pages, a socket context's shared MRs
  };
  // Where [va, va + len) lives in the daemon through the mapping of MR `lkey` (`keyed`: the
  // access goes through an MR), or nullptr: no such mapping, not entirely inside it, or a
  // write to a read-only one.
  static std::byte* mapped_at(const Owner& o, bool keyed, uint32_t lkey, uint64_t va, size_t len,
                              bool write);
  // `crc`: also the CRC-32 register over what was read (read_mr_crc).
  bool read_via(bool keyed, uint32_t lkey, uint64_t addr, std::span<std::byte> out,
                uint32_t* crc = nullptr);
  bool write_via(bool keyed, uint32_t lkey, uint64_t addr, std::span<const std::byte> in);
  // The context `addr` names, if [addr, addr+len) lies in one of its ranges.
  Owner* check(uint64_t addr, size_t len);
  // A pread/pwrite result of `want` bytes on owner `tag`: true if complete;
  // 0 bytes (the mm is gone) marks the owner dead.
  bool account(uint16_t tag, ssize_t n, size_t want);
  void mark_dead(uint16_t tag);

  struct Window {
    uint16_t tag = 0;
    uint64_t va = 0;
    size_t len = 0;
    std::byte* data = nullptr;
  };
  // Reads of a context: from a window, or a stream's read-ahead; false: read directly.
  bool read_windowed(uint16_t tag, uint64_t va, std::span<std::byte> out, uint32_t* crc);
  void drop_windows(uint16_t tag, uint64_t va, size_t len);  // a write overlapping them
  bool stage_write(uint16_t tag, uint64_t va, std::span<const std::byte> in);
  static constexpr size_t kStageBytes = 256 * 1024;
  static constexpr size_t kStageIovs = 64;
  bool batching_ = true;
  std::unique_ptr<std::byte[]> stage_mem_;
  size_t stage_len_ = 0;
  uint16_t stage_tag_ = 0;
  iovec stage_local_[kStageIovs];
  iovec stage_remote_[kStageIovs];
  size_t stage_iovs_ = 0;
  std::unique_ptr<std::byte[]> window_mem_;
  Window windows_[kWindows];
  uint32_t windows_valid_ = 0;  // bit i: windows_[i] holds data
  uint32_t window_next_ = 0;    // round-robin replacement
  // Ends of the last reads (a read starting at one of them continues a stream).
  static constexpr size_t kStreams = 16;
  uint64_t stream_end_[kStreams] = {};
  uint16_t stream_tag_[kStreams] = {};
  uint32_t stream_next_ = 0;

  std::vector<Owner> owners_;
  size_t dead_pending_ = 0;  // owners marked dead and not yet reported by take_dead()
  const std::byte* local_base_ = nullptr;
  size_t local_len_ = 0;
  Stats stats_;
};

}  // namespace sroce::daemon
