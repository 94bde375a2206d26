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
#pragma once

#include <sys/types.h>

#include <cstdint>
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

  explicit ProcessMemory(size_t max_tags = 65535);

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

  bool read(uint64_t addr, std::span<std::byte> out) override;
  bool write(uint64_t addr, std::span<const std::byte> in) override;

  struct Stats {
    uint64_t reads = 0, writes = 0, bytes_read = 0, bytes_written = 0;
    uint64_t refused = 0;  // outside every registered range, or unknown tag
    uint64_t ambiguous = 0;  // untagged address registered by several contexts
    uint64_t failed = 0;   // the kernel refused (process gone, page unmapped)
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

  std::vector<Owner> owners_;
  std::vector<GlobalRange> global_;  // every range of every context, sorted by va
  uint64_t global_max_len_ = 0;
  const std::byte* local_base_ = nullptr;
  size_t local_len_ = 0;
  Stats stats_;
};

}  // namespace sroce::daemon
