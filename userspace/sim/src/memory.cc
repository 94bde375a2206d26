#include "sroce/sim/memory.h"

#include <cstdio>
#include <cstdlib>

#include "proto/icrc.h"

namespace sroce::sim {

ArenaMemory::Block::Block(uint64_t n) : p_(static_cast<std::byte*>(std::calloc(n ? n : 1, 1))), n_(n) {
  if (p_ == nullptr) {
    std::fprintf(stderr, "sroce-sim: no memory for an arena of %llu bytes\n",
                 static_cast<unsigned long long>(n));
    std::abort();
  }
}

ArenaMemory::Block::~Block() { std::free(p_); }

ArenaMemory::ArenaMemory(uint64_t base, uint64_t size) : base_(base), bytes_(size) {}

bool ArenaMemory::read(uint64_t addr, std::span<std::byte> out) {
  if (!contains(addr, out.size())) {
    ++stats_.faults;
    return false;
  }
  ++stats_.reads;
  stats_.read_bytes += out.size();
  if (!out.empty()) std::memcpy(out.data(), bytes_.data() + (addr - base_), out.size());
  return true;
}

bool ArenaMemory::read_mr_crc(uint32_t, uint64_t addr, std::span<std::byte> out, uint32_t& crc) {
  if (!contains(addr, out.size())) {
    ++stats_.faults;
    return false;
  }
  ++stats_.reads;
  stats_.read_bytes += out.size();
  crc = sroce_crc32_copy(crc, reinterpret_cast<uint8_t*>(out.data()),
                         reinterpret_cast<const uint8_t*>(bytes_.data() + (addr - base_)), out.size());
  return true;
}

bool ArenaMemory::write(uint64_t addr, std::span<const std::byte> in) {
  if (!contains(addr, in.size())) {
    ++stats_.faults;
    return false;
  }
  ++stats_.writes;
  stats_.write_bytes += in.size();
  if (!audit_.empty() && !in.empty()) {
    bool ok = false;
    for (const Range& r : audit_)
      if (addr >= r.addr && addr - r.addr <= r.len && in.size() <= r.len - (addr - r.addr)) {
        ok = true;
        break;
      }
    if (!ok) ++stats_.audit_violations;
  }
  if (!in.empty()) std::memcpy(bytes_.data() + (addr - base_), in.data(), in.size());
  if (fault_countdown_ != 0 && !in.empty() && --fault_countdown_ == 0)
    bytes_[addr - base_] ^= std::byte{1};
  return true;
}

uint64_t ArenaMemory::alloc(uint64_t size, uint64_t align) {
  const uint64_t start = (next_ + align - 1) / align * align;
  if (start + size > bytes_.size()) {
    std::fprintf(stderr, "sroce-sim: memory arena of %llu bytes exhausted (asked %llu more)\n",
                 static_cast<unsigned long long>(bytes_.size()),
                 static_cast<unsigned long long>(size));
    std::abort();
  }
  next_ = start + size;
  return base_ + start;
}

std::span<std::byte> ArenaMemory::at(uint64_t addr, uint64_t len) {
  if (!contains(addr, len)) return {};
  return {bytes_.data() + (addr - base_), len};
}

}  // namespace sroce::sim
