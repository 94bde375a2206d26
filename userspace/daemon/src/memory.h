// Application memory for the engine: process_vm_readv / process_vm_writev on
// the process that registered it.
//
// One engine serves every local process, so an address alone does not say
// whose memory it is. The daemon gives every context a 16-bit tag and hands
// the engine host addresses (tag << 48) | va for the memory that context
// registers; user virtual addresses on x86-64 and arm64 fit in 48 bits. On
// top of the engine's key and bounds checks this class refuses any access
// that is not entirely inside a range the tagged context registered, so a
// bug in key handling still cannot reach another process or unregistered
// memory of the same process.
//
// Untagged addresses (tag 0) are the fallback for an engine that cannot
// separate the address it checks keys against (the iova peers use) from the
// address it hands to MemoryAccess: the daemon then registers plain virtual
// addresses and this class finds the owner by range; an address that lies in
// ranges of two different contexts is ambiguous and refused (never guessed).
//
// Contexts of the kernel path (rdma_sroce.ko, docs/kmod.md) are "mapped":
// the module pins their MRs and the daemon maps the very pages from the
// control channel, so their ranges are read and written with memcpy through
// that mapping, never with process_vm_readv (there is no pid to name).
//
// Inline send data (IBV_SEND_INLINE) lives in the daemon, copied out of the
// send ring: tag kLocalTag denotes daemon memory, only inside windows the
// daemon itself opened with allow_local().
//
// Read-ahead (the data path's largest cost was one process_vm_readv per
// packet: a 64 KiB RDMA WRITE at MTU 4096 made 16). A read that continues where
// an earlier read of the same process ended is a stream (the engine gathers a
// message packet by packet, several QPs interleaved): it fills one of a few
// windows with up to kWindowBytes of that process's memory in one call, and
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
// staged; consecutive writes of one process leave in one process_vm_writev
// with one iovec per run of contiguous bytes. flush_writes() sends them; the
// loop calls it after the received packets were processed and before
// completions reach any ring (a completion, or an ACK the peer acts on, must
// find the data in place), and every read, detach and remove_range flushes
// first. The kernel refusing a staged write (the process unmapped registered
// memory, or died) is counted in `failed` but cannot fail the request any
// more; rxe cannot fail there either (its pages are pinned).
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
  // process_vm_readv / writev per access.
  explicit ProcessMemory(size_t max_tags = 65535, bool batching = true);

  void attach(uint16_t tag, pid_t pid);
  // A kernel-path context: only mapped ranges, no process.
  void attach_mapped(uint16_t tag);
  // Range [va, va + len) of a mapped context lives at `at` in the daemon;
  // a range mapped read-only (`writable` false) refuses writes instead of
  // faulting.
  void add_mapped_range(uint16_t tag, uint64_t va, uint64_t len, std::byte* at, bool writable);
  void detach(uint16_t tag);  // forgets the pid and every range of the tag
  void add_range(uint16_t tag, uint64_t va, uint64_t len);
  void remove_range(uint16_t tag, uint64_t va, uint64_t len);
  size_t range_count(uint16_t tag) const;

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

  bool read(uint64_t addr, std::span<std::byte> out) override;
  bool write(uint64_t addr, std::span<const std::byte> in) override;

  struct Stats {
    uint64_t reads = 0, writes = 0, bytes_read = 0, bytes_written = 0;
    uint64_t refused = 0;  // outside every registered range, or unknown tag
    uint64_t ambiguous = 0;  // untagged address registered by several contexts
    uint64_t failed = 0;   // the kernel refused (process gone, page unmapped)
    uint64_t window_fills = 0;  // read-ahead process_vm_readv calls
    uint64_t window_hits = 0;   // reads served from a window
    uint64_t write_flushes = 0;  // process_vm_writev calls for staged writes
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Range {
    uint64_t va, len;
  };
  struct MappedRange {
    uint64_t va, len;
    std::byte* at;
    bool writable;
  };
  struct Owner {
    pid_t pid = 0;  // kMappedPid for a kernel-path context
    std::vector<Range> ranges;  // sorted by va; may overlap
    uint64_t max_len = 0;
    std::vector<MappedRange> maps;  // a mapped context's windows
  };
  static constexpr pid_t kMappedPid = -1;
  // Where [va, va + len) of a mapped owner lives in the daemon, or nullptr.
  static std::byte* mapped_at(const Owner& o, uint64_t va, size_t len, bool write);
  struct GlobalRange {
    uint64_t va, len;
    uint16_t tag;
  };
  // The context `addr` names, if [addr, addr+len) lies in one of its ranges.
  Owner* check(uint64_t addr, size_t len);

  Owner* find_untagged(uint64_t va, size_t len);

  struct Window {
    pid_t pid = 0;
    uint64_t va = 0;
    size_t len = 0;
    std::byte* data = nullptr;
  };
  // Reads of a process: from a window, or a stream's read-ahead; false: read directly.
  bool read_windowed(pid_t pid, uint64_t va, std::span<std::byte> out);
  void drop_windows(pid_t pid, uint64_t va, size_t len);  // a write overlapping them
  bool stage_write(pid_t pid, uint64_t va, std::span<const std::byte> in);
  static constexpr size_t kStageBytes = 256 * 1024;
  static constexpr size_t kStageIovs = 64;
  bool batching_ = true;
  std::unique_ptr<std::byte[]> stage_mem_;
  size_t stage_len_ = 0;
  pid_t stage_pid_ = 0;
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
  pid_t stream_pid_[kStreams] = {};
  uint32_t stream_next_ = 0;

  std::vector<Owner> owners_;
  std::vector<GlobalRange> global_;  // every range of every context, sorted by va
  uint64_t global_max_len_ = 0;
  const std::byte* local_base_ = nullptr;
  size_t local_len_ = 0;
  Stats stats_;
};

}  // namespace sroce::daemon
