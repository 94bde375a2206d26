// Application memory through each context's own /proc/<pid>/mem, limited to
// registered ranges (memory.h, docs/security.md "Memory").
#include "memory.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "copy.h"
#include "proto/icrc.h"

namespace sroce::daemon {

ProcessMemory::ProcessMemory(size_t max_tags, bool batching) : batching_(batching), owners_(max_tags + 1) {}

ProcessMemory::~ProcessMemory() {
  for (auto& o : owners_)
    if (o.fd >= 0) close(o.fd);
}

void ProcessMemory::attach(uint16_t tag, int mem_fd) {
  if (tag == 0 || tag >= owners_.size() || tag == kLocalTag) {
    if (mem_fd >= 0) close(mem_fd);
    return;
  }
  detach(tag);
  owners_[tag].used = true;
  owners_[tag].fd = mem_fd;
}

void ProcessMemory::attach_mapped(uint16_t tag) {
  if (tag == 0 || tag >= owners_.size() || tag == kLocalTag) return;
  detach(tag);
  owners_[tag].used = true;
  owners_[tag].mapped = true;
}

void ProcessMemory::add_mapped_range(uint16_t tag, uint32_t lkey, uint64_t va, uint64_t len,
                                     std::byte* at, bool writable) {
  if (tag >= owners_.size() || !owners_[tag].mapped) return;
  remove_mr_map(tag, lkey);
  owners_[tag].maps.push_back(MappedRange{lkey, va, len, at, writable});
  add_range(tag, va, len);
}

void ProcessMemory::add_shared_range(uint16_t tag, uint32_t lkey, uint64_t va, uint64_t len,
                                     std::byte* at, bool writable) {
  if (tag >= owners_.size() || !owners_[tag].used || owners_[tag].mapped) return;
  remove_mr_map(tag, lkey);
  owners_[tag].maps.push_back(MappedRange{lkey, va, len, at, writable});
}

void ProcessMemory::remove_mr_map(uint16_t tag, uint32_t lkey) {
  flush_writes();
  forget_windows();
  if (tag >= owners_.size()) return;
  auto& maps = owners_[tag].maps;
  for (auto it = maps.begin(); it != maps.end(); ++it) {
    if (it->lkey == lkey) {
      maps.erase(it);
      return;
    }
  }
}

std::byte* ProcessMemory::mapped_at(const Owner& o, bool keyed, uint32_t lkey, uint64_t va,
                                    size_t len, bool write) {
  if (!keyed) return nullptr;
  for (const auto& m : o.maps) {
    if (m.lkey != lkey) continue;
    if ((!write || m.writable) && va >= m.va && va - m.va <= m.len && len <= m.len - (va - m.va))
      return m.at + (va - m.va);
    return nullptr;  // one mapping per MR
  }
  return nullptr;
}

void ProcessMemory::detach(uint16_t tag) {
  flush_writes();
  forget_windows();
  if (tag >= owners_.size()) return;
  Owner& o = owners_[tag];
  if (o.fd >= 0) close(o.fd);
  if (o.dead && !o.dead_reported && dead_pending_ > 0) --dead_pending_;
  o = Owner{};
}

void ProcessMemory::add_range(uint16_t tag, uint64_t va, uint64_t len) {
  if (tag >= owners_.size() || !owners_[tag].used) return;
  Owner& o = owners_[tag];
  auto it = std::upper_bound(o.ranges.begin(), o.ranges.end(), va, [](uint64_t v, const Range& r) { return v < r.va; });
  o.ranges.insert(it, Range{va, len});
  o.max_len = std::max(o.max_len, len);
}

void ProcessMemory::remove_range(uint16_t tag, uint64_t va, uint64_t len) {
  flush_writes();
  forget_windows();
  if (tag >= owners_.size()) return;
  Owner& o = owners_[tag];
  for (auto it = o.ranges.begin(); it != o.ranges.end(); ++it) {
    if (it->va == va && it->len == len) {
      o.ranges.erase(it);
      break;
    }
  }
  o.max_len = 0;
  for (const auto& r : o.ranges) o.max_len = std::max(o.max_len, r.len);
}

size_t ProcessMemory::range_count(uint16_t tag) const { return tag < owners_.size() ? owners_[tag].ranges.size() : 0; }

void ProcessMemory::mark_dead(uint16_t tag) {
  Owner& o = owners_[tag];
  if (o.dead) return;
  o.dead = true;
  ++stats_.gone;
  ++dead_pending_;
  forget_windows();
  if (stage_iovs_ != 0 && stage_tag_ == tag) {  // nowhere to write them any more
    stage_iovs_ = 0;
    stage_len_ = 0;
  }
}

size_t ProcessMemory::take_dead(std::span<uint16_t> out) {
  size_t n = 0;
  for (size_t t = 1; t < owners_.size() && n < out.size() && dead_pending_ > 0; ++t) {
    Owner& o = owners_[t];
    if (o.used && o.dead && !o.dead_reported) {
      o.dead_reported = true;
      --dead_pending_;
      out[n++] = static_cast<uint16_t>(t);
    }
  }
  return n;
}

// /proc/<pid>/mem reads and writes return 0 for a non-empty request only when the mm the file
// was opened on has no users left (the process exec'd or exited): fs/proc/base.c mem_rw(),
// mmget_not_zero(). An unmapped page is -EIO (or a short count after the mapped part).
bool ProcessMemory::account(uint16_t tag, ssize_t n, size_t want) {
  if (n == static_cast<ssize_t>(want)) return true;
  if (n == 0 && want > 0) {
    mark_dead(tag);
  } else {
    ++stats_.failed;
  }
  return false;
}

int ProcessMemory::probe(uint16_t tag, uint64_t va) {
  if (tag == 0 || tag >= owners_.size() || !owners_[tag].used || owners_[tag].mapped) return -EINVAL;
  Owner& o = owners_[tag];
  if (o.dead) return -ESRCH;
  std::byte b;
  ssize_t n = pread(o.fd, &b, 1, static_cast<off_t>(va & kVaMask));
  if (n == 1) return 0;
  if (n == 0) {
    mark_dead(tag);
    return -ESRCH;
  }
  return -EFAULT;
}

bool ProcessMemory::alive(uint16_t tag) {
  if (tag >= owners_.size() || !owners_[tag].used) return false;
  Owner& o = owners_[tag];
  if (o.mapped) return true;
  if (o.dead) return false;
  // Address 0 is unmapped in nearly every process (-EIO: alive); a mapped page 0 reads 1 byte
  // (alive); only a gone mm reads 0 bytes.
  std::byte b;
  if (pread(o.fd, &b, 1, 0) == 0) {
    mark_dead(tag);
    return false;
  }
  return true;
}

uint64_t ProcessMemory::allow_local(const void* p, size_t len) {
  local_base_ = static_cast<const std::byte*>(p);
  local_len_ = len;
  return tagged(kLocalTag, 0);
}

void ProcessMemory::clear_local() {
  local_base_ = nullptr;
  local_len_ = 0;
}

ProcessMemory::Owner* ProcessMemory::check(uint64_t addr, size_t len) {
  uint64_t tag = addr >> kTagShift;
  uint64_t va = addr & kVaMask;
  // Tag 0 is never handed out: an untagged address names nobody.
  if (tag == 0 || tag >= owners_.size() || !owners_[tag].used) return nullptr;
  Owner& o = owners_[tag];
  if (o.dead) return nullptr;  // refused: the address space is gone
  if (va + len < va || va + len > kVaMask + 1) return nullptr;
  // Ranges are sorted by start; walk back from the last one starting at or
  // before va until no range could still reach va + len.
  auto it = std::upper_bound(o.ranges.begin(), o.ranges.end(), va, [](uint64_t v, const Range& r) { return v < r.va; });
  while (it != o.ranges.begin()) {
    --it;
    if (it->va + it->len >= va + len) return &o;
    if (it->va + o.max_len < va + len) break;
  }
  return nullptr;
}

namespace {

// A copy (copy.h), or with `crc` the copy and its CRC in one pass (read_mr_crc).
inline void copy_out(std::span<std::byte> out, const std::byte* from, uint32_t* crc) {
  if (crc)
    *crc = sroce_crc32_copy(*crc, reinterpret_cast<uint8_t*>(out.data()),
                            reinterpret_cast<const uint8_t*>(from), out.size());
  else
    copy_bytes(out.data(), from, out.size());
}

}  // namespace

bool ProcessMemory::read_via(bool keyed, uint32_t lkey, uint64_t addr, std::span<std::byte> out,
                             uint32_t* crc) {
  if (out.empty()) return true;
  if (stage_iovs_ != 0) flush_writes();  // a read sees every earlier write
  if ((addr >> kTagShift) == kLocalTag) {
    uint64_t off = addr & kVaMask;
    if (off > local_len_ || out.size() > local_len_ - off) {
      ++stats_.refused;
      return false;
    }
    copy_out(out, local_base_ + off, crc);
    return true;
  }
  Owner* o = check(addr, out.size());
  if (!o) {
    ++stats_.refused;
    return false;
  }
  const auto tag = static_cast<uint16_t>(addr >> kTagShift);
  const uint64_t va = addr & kVaMask;
  if (o->mapped) {
    const std::byte* at = mapped_at(*o, keyed, lkey, va, out.size(), false);
    if (!at) {
      ++stats_.refused;
      return false;
    }
    copy_out(out, at, crc);
  } else if (const std::byte* sh =
                 o->maps.empty() ? nullptr : mapped_at(*o, keyed, lkey, va, out.size(), false)) {
    copy_out(out, sh, crc);
    stats_.shared_bytes += out.size();
  } else if (!(batching_ && read_windowed(tag, va, out, crc))) {
    if (o->dead) return false;  // the window fill found the mm gone
    if (!account(tag, pread(o->fd, out.data(), out.size(), static_cast<off_t>(va)), out.size())) return false;
    // The kernel copied: the CRC is a pass of its own here.
    if (crc)
      *crc = sroce_crc32_update(*crc, reinterpret_cast<const uint8_t*>(out.data()), out.size());
  }
  ++stats_.reads;
  stats_.bytes_read += out.size();
  return true;
}

bool ProcessMemory::write_via(bool keyed, uint32_t lkey, uint64_t addr,
                              std::span<const std::byte> in) {
  if (in.empty()) return true;
  Owner* o = check(addr, in.size());
  if (!o) {
    ++stats_.refused;
    return false;
  }
  const auto tag = static_cast<uint16_t>(addr >> kTagShift);
  const uint64_t va = addr & kVaMask;
  if (o->mapped) {
    std::byte* at = mapped_at(*o, keyed, lkey, va, in.size(), true);
    if (!at) {
      ++stats_.refused;
      return false;
    }
    copy_bytes(at, in.data(), in.size());
  } else if (std::byte* sh =
                 o->maps.empty() ? nullptr : mapped_at(*o, keyed, lkey, va, in.size(), true)) {
    // After every staged write of this context (a later pwrite must not overwrite it), and
    // no window may keep the old bytes.
    if (stage_iovs_ != 0 && stage_tag_ == tag) flush_writes();
    drop_windows(tag, va, in.size());
    copy_bytes(sh, in.data(), in.size());
    stats_.shared_bytes += in.size();
  } else {
    drop_windows(tag, va, in.size());
    if (!(batching_ && stage_write(tag, va, in)) &&
        !account(tag, pwrite(o->fd, in.data(), in.size(), static_cast<off_t>(va)), in.size()))
      return false;
  }
  ++stats_.writes;
  stats_.bytes_written += in.size();
  return true;
}

bool ProcessMemory::read_windowed(uint16_t tag, uint64_t va, std::span<std::byte> out, uint32_t* crc) {
  const size_t len = out.size();
  for (uint32_t i = 0; i < kWindows; ++i) {
    const Window& w = windows_[i];
    if (!(windows_valid_ & (1u << i)) || w.tag != tag || va < w.va || va - w.va > w.len ||
        len > w.len - (va - w.va))
      continue;
    copy_out(out, w.data + (va - w.va), crc);
    ++stats_.window_hits;
    return true;
  }
  // A stream: this read starts where a recent one of the same context ended.
  bool stream = false;
  for (size_t i = 0; i < kStreams && !stream; ++i) stream = stream_end_[i] == va && stream_tag_[i] == tag;
  stream_end_[stream_next_] = va + len;
  stream_tag_[stream_next_] = tag;
  stream_next_ = (stream_next_ + 1) % kStreams;
  // Small reads (atomics, short messages) are cheaper as they are than as a 64 KiB copy.
  if (!stream || len < kMinStreamRead || len >= kWindowBytes) return false;
  if (!window_mem_) window_mem_ = std::make_unique<std::byte[]>(kWindowBytes * kWindows);
  const uint32_t i = window_next_;
  window_next_ = (window_next_ + 1) % kWindows;
  Window& w = windows_[i];
  w.data = window_mem_.get() + i * kWindowBytes;
  windows_valid_ &= ~(1u << i);
  // Up to kWindowBytes: a short count (the process's mapping ends) still serves this read if
  // it covers it; the bytes are only ever handed out after check() of the exact range.
  ssize_t n = pread(owners_[tag].fd, w.data, kWindowBytes, static_cast<off_t>(va));
  ++stats_.window_fills;
  if (n == 0) {
    mark_dead(tag);
    return false;
  }
  if (n < static_cast<ssize_t>(len)) return false;
  w.tag = tag;
  w.va = va;
  w.len = static_cast<size_t>(n);
  windows_valid_ |= 1u << i;
  copy_out(out, w.data, crc);
  return true;
}

void ProcessMemory::drop_windows(uint16_t tag, uint64_t va, size_t len) {
  for (uint32_t i = 0; i < kWindows; ++i) {
    const Window& w = windows_[i];
    if ((windows_valid_ & (1u << i)) && w.tag == tag && va < w.va + w.len && w.va < va + len)
      windows_valid_ &= ~(1u << i);
  }
}

// Stages a write of `tag` (see memory.h); false: too big to stage, write it directly.
bool ProcessMemory::stage_write(uint16_t tag, uint64_t va, std::span<const std::byte> in) {
  const size_t len = in.size();
  if (len > kStageBytes / 4) return false;
  auto extends = [&] {
    const iovec& last = stage_remote_[stage_iovs_ - 1];
    return reinterpret_cast<uint64_t>(last.iov_base) + last.iov_len == va;
  };
  if (stage_iovs_ != 0 && (stage_tag_ != tag || stage_len_ + len > kStageBytes ||
                           (stage_iovs_ == kStageIovs && !extends())))
    flush_writes();
  if (!stage_mem_) stage_mem_ = std::make_unique<std::byte[]>(kStageBytes);
  std::byte* at = stage_mem_.get() + stage_len_;
  copy_bytes(at, in.data(), len);
  stage_len_ += len;
  stage_tag_ = tag;
  if (stage_iovs_ != 0 && extends()) {
    // Continues the previous run; the staging buffer is contiguous too.
    stage_remote_[stage_iovs_ - 1].iov_len += len;
    stage_local_[stage_iovs_ - 1].iov_len += len;
  } else {
    stage_local_[stage_iovs_] = {at, len};
    stage_remote_[stage_iovs_] = {reinterpret_cast<void*>(va), len};
    ++stage_iovs_;
  }
  return true;
}

// One pwrite per run of contiguous bytes: a mem file is written at one offset per call
// (pwritev would place the runs back to back).
bool ProcessMemory::flush_writes() {
  if (stage_iovs_ == 0) return false;
  const uint16_t tag = stage_tag_;
  const size_t runs = stage_iovs_;
  stage_iovs_ = 0;
  stage_len_ = 0;
  Owner& o = owners_[tag];
  for (size_t i = 0; i < runs && !o.dead; ++i) {
    ++stats_.write_flushes;
    const iovec& l = stage_local_[i];
    const iovec& r = stage_remote_[i];
    account(tag, pwrite(o.fd, l.iov_base, l.iov_len, static_cast<off_t>(reinterpret_cast<uint64_t>(r.iov_base))),
            l.iov_len);
  }
  return true;
}

}  // namespace sroce::daemon
