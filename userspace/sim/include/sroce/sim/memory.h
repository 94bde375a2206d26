// In-process MemoryAccess over a host's own memory arena: a contiguous block
// that stands for the application's address space, placed at a virtual base
// address that differs per host (so an address from the wrong host faults).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "sroce/engine/engine.h"

namespace sroce::sim {

struct MemoryStats {
  uint64_t reads = 0;
  uint64_t writes = 0;
  uint64_t read_bytes = 0;
  uint64_t write_bytes = 0;
  uint64_t faults = 0;            // accesses outside the arena (refused)
  uint64_t audit_violations = 0;  // writes outside every audited range (performed)
};

// The arena's bytes come zeroed from calloc, which maps large blocks from the
// kernel's zero pages: a page costs memory only once it is written, so a
// host whose payload is discarded (HostConfig::discard_payload) or that
// touches a few buffers holds only those pages, whatever the arena's size.
class ArenaMemory final : public MemoryAccess {
 public:
  ArenaMemory(uint64_t base, uint64_t size);

  bool read(uint64_t addr, std::span<std::byte> out) override;
  bool write(uint64_t addr, std::span<const std::byte> in) override;
  // read, with the CRC taken in the same pass (sroce_crc32_copy).
  bool read_mr_crc(uint32_t lkey, uint64_t addr, std::span<std::byte> out, uint32_t& crc) override;

  // Bump allocation inside the arena; returns the virtual address. Aborts the
  // run (std::abort with a message) when the arena is exhausted: that is a
  // scenario sizing bug, not a protocol event.
  uint64_t alloc(uint64_t size, uint64_t align = 64);
  void reset_alloc() { next_ = 0; }

  // Direct view for the application side (filling buffers, verifying data).
  std::span<std::byte> at(uint64_t addr, uint64_t len);
  bool contains(uint64_t addr, uint64_t len) const {
    return addr >= base_ && len <= bytes_.size() && addr - base_ <= bytes_.size() - len;
  }

  // Write auditing: when any range is registered, every engine write that is
  // not inside one of them counts as a violation (the write still happens,
  // so guard-byte checks see it too).
  void audit_allow(uint64_t addr, uint64_t len) { audit_.push_back({addr, len}); }
  void audit_clear() { audit_.clear(); }

  // Fault injection for testing the checkers: the `nth` engine write from
  // now on (1 = the next) lands with its first byte's low bit flipped.
  void inject_write_fault(uint64_t nth) { fault_countdown_ = nth; }

  uint64_t base() const { return base_; }
  uint64_t size() const { return bytes_.size(); }
  const MemoryStats& stats() const { return stats_; }

 private:
  struct Range {
    uint64_t addr;
    uint64_t len;
  };
  // A zeroed block of memory from calloc (see above).
  class Block {
   public:
    explicit Block(uint64_t n);
    ~Block();
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    std::byte* data() const { return p_; }
    uint64_t size() const { return n_; }
    std::byte& operator[](uint64_t i) const { return p_[i]; }

   private:
    std::byte* p_ = nullptr;
    uint64_t n_ = 0;
  };
  uint64_t base_;
  Block bytes_;
  uint64_t next_ = 0;
  std::vector<Range> audit_;
  MemoryStats stats_;
  uint64_t fault_countdown_ = 0;
};

// MemoryAccess that moves no bytes (reads leave the buffer as is, writes are
// discarded): measures the engine without the payload copy.
class NullMemory final : public MemoryAccess {
 public:
  bool read(uint64_t, std::span<std::byte>) override { return true; }
  bool write(uint64_t, std::span<const std::byte>) override { return true; }
};

}  // namespace sroce::sim
