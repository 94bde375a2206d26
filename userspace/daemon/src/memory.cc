// process_vm_readv/writev memory access, limited to registered ranges.
#include "memory.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>

namespace sroce::daemon {

ProcessMemory::ProcessMemory(size_t max_tags, bool batching) : batching_(batching), owners_(max_tags + 1) {}

void ProcessMemory::attach(uint16_t tag, pid_t pid) {
  if (tag >= owners_.size() || tag == kLocalTag) return;
  owners_[tag] = Owner{};
  owners_[tag].pid = pid;
}

void ProcessMemory::attach_mapped(uint16_t tag) {
  if (tag >= owners_.size() || tag == kLocalTag) return;
  owners_[tag] = Owner{};
  owners_[tag].pid = kMappedPid;
}

void ProcessMemory::add_mapped_range(uint16_t tag, uint64_t va, uint64_t len, std::byte* at, bool writable) {
  if (tag >= owners_.size() || owners_[tag].pid != kMappedPid) return;
  owners_[tag].maps.push_back(MappedRange{va, len, at, writable});
  add_range(tag, va, len);
}

std::byte* ProcessMemory::mapped_at(const Owner& o, uint64_t va, size_t len, bool write) {
  for (const auto& m : o.maps)
    if ((!write || m.writable) && va >= m.va && va - m.va <= m.len && len <= m.len - (va - m.va)) return m.at + (va - m.va);
  return nullptr;
}

void ProcessMemory::detach(uint16_t tag) {
  flush_writes();
  forget_windows();
  if (tag >= owners_.size()) return;
  owners_[tag] = Owner{};
  std::erase_if(global_, [tag](const GlobalRange& g) { return g.tag == tag; });
}

void ProcessMemory::add_range(uint16_t tag, uint64_t va, uint64_t len) {
  if (tag >= owners_.size()) return;
  Owner& o = owners_[tag];
  auto it = std::upper_bound(o.ranges.begin(), o.ranges.end(), va, [](uint64_t v, const Range& r) { return v < r.va; });
  o.ranges.insert(it, Range{va, len});
  o.max_len = std::max(o.max_len, len);
  auto git = std::upper_bound(global_.begin(), global_.end(), va,
                              [](uint64_t v, const GlobalRange& r) { return v < r.va; });
  global_.insert(git, GlobalRange{va, len, tag});
  global_max_len_ = std::max(global_max_len_, len);
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
  for (auto it = o.maps.begin(); it != o.maps.end(); ++it) {
    if (it->va == va && it->len == len) {
      o.maps.erase(it);
      break;
    }
  }
  o.max_len = 0;
  for (const auto& r : o.ranges) o.max_len = std::max(o.max_len, r.len);
  for (auto it = global_.begin(); it != global_.end(); ++it) {
    if (it->va == va && it->len == len && it->tag == tag) {
      global_.erase(it);
      break;
    }
  }
}

size_t ProcessMemory::range_count(uint16_t tag) const { return tag < owners_.size() ? owners_[tag].ranges.size() : 0; }

uint64_t ProcessMemory::allow_local(const void* p, size_t len) {
  local_base_ = static_cast<const std::byte*>(p);
  local_len_ = len;
  return tagged(kLocalTag, 0);
}

void ProcessMemory::clear_local() {
  local_base_ = nullptr;
  local_len_ = 0;
}

ProcessMemory::Owner* ProcessMemory::find_untagged(uint64_t va, size_t len) {
  if (va + len < va) return nullptr;
  auto it = std::upper_bound(global_.begin(), global_.end(), va,
                             [](uint64_t v, const GlobalRange& r) { return v < r.va; });
  int found = -1;
  while (it != global_.begin()) {
    --it;
    if (it->va + global_max_len_ < va + len) break;
    if (it->va + it->len >= va + len) {
      if (found >= 0 && found != it->tag) {
        ++stats_.ambiguous;
        return nullptr;
      }
      found = it->tag;
    }
  }
  if (found < 0 || owners_[found].pid == 0) return nullptr;
  return &owners_[found];
}

ProcessMemory::Owner* ProcessMemory::check(uint64_t addr, size_t len) {
  uint64_t tag = addr >> kTagShift;
  uint64_t va = addr & kVaMask;
  if (tag == 0) return find_untagged(va, len);
  if (tag >= owners_.size() || owners_[tag].pid == 0) return nullptr;
  Owner& o = owners_[tag];
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

bool ProcessMemory::read(uint64_t addr, std::span<std::byte> out) {
  if (out.empty()) return true;
  if (stage_iovs_ != 0) flush_writes();  // a read sees every earlier write
  if ((addr >> kTagShift) == kLocalTag) {
    uint64_t off = addr & kVaMask;
    if (off > local_len_ || out.size() > local_len_ - off) {
      ++stats_.refused;
      return false;
    }
    memcpy(out.data(), local_base_ + off, out.size());
    return true;
  }
  Owner* o = check(addr, out.size());
  if (!o) {
    ++stats_.refused;
    return false;
  }
  if (o->pid == kMappedPid) {
    const std::byte* at = mapped_at(*o, addr & kVaMask, out.size(), false);
    if (!at) {
      ++stats_.refused;
      return false;
    }
    memcpy(out.data(), at, out.size());
    ++stats_.reads;
    stats_.bytes_read += out.size();
    return true;
  }
  if (batching_ && read_windowed(o->pid, addr & kVaMask, out)) {
    ++stats_.reads;
    stats_.bytes_read += out.size();
    return true;
  }
  iovec local{out.data(), out.size()};
  iovec remote{reinterpret_cast<void*>(addr & kVaMask), out.size()};
  ssize_t n = process_vm_readv(o->pid, &local, 1, &remote, 1, 0);
  if (n != static_cast<ssize_t>(out.size())) {
    ++stats_.failed;
    return false;
  }
  ++stats_.reads;
  stats_.bytes_read += out.size();
  return true;
}

bool ProcessMemory::write(uint64_t addr, std::span<const std::byte> in) {
  if (in.empty()) return true;
  Owner* o = check(addr, in.size());
  if (!o) {
    ++stats_.refused;
    return false;
  }
  if (o->pid == kMappedPid) {
    std::byte* at = mapped_at(*o, addr & kVaMask, in.size(), true);
    if (!at) {
      ++stats_.refused;
      return false;
    }
    memcpy(at, in.data(), in.size());
    ++stats_.writes;
    stats_.bytes_written += in.size();
    return true;
  }
  drop_windows(o->pid, addr & kVaMask, in.size());
  if (batching_ && stage_write(o->pid, addr & kVaMask, in)) {
    ++stats_.writes;
    stats_.bytes_written += in.size();
    return true;
  }
  iovec local{const_cast<std::byte*>(in.data()), in.size()};
  iovec remote{reinterpret_cast<void*>(addr & kVaMask), in.size()};
  ssize_t n = process_vm_writev(o->pid, &local, 1, &remote, 1, 0);
  if (n != static_cast<ssize_t>(in.size())) {
    ++stats_.failed;
    return false;
  }
  ++stats_.writes;
  stats_.bytes_written += in.size();
  return true;
}

bool ProcessMemory::read_windowed(pid_t pid, uint64_t va, std::span<std::byte> out) {
  const size_t len = out.size();
  for (uint32_t i = 0; i < kWindows; ++i) {
    const Window& w = windows_[i];
    if (!(windows_valid_ & (1u << i)) || w.pid != pid || va < w.va || va - w.va > w.len ||
        len > w.len - (va - w.va))
      continue;
    memcpy(out.data(), w.data + (va - w.va), len);
    ++stats_.window_hits;
    return true;
  }
  // A stream: this read starts where a recent one of the same process ended.
  bool stream = false;
  for (size_t i = 0; i < kStreams && !stream; ++i) stream = stream_end_[i] == va && stream_pid_[i] == pid;
  stream_end_[stream_next_] = va + len;
  stream_pid_[stream_next_] = pid;
  stream_next_ = (stream_next_ + 1) % kStreams;
  // Small reads (atomics, short messages) are cheaper as they are than as a 64 KiB copy.
  if (!stream || len < kMinStreamRead || len >= kWindowBytes) return false;
  if (!window_mem_) window_mem_ = std::make_unique<std::byte[]>(kWindowBytes * kWindows);
  const uint32_t i = window_next_;
  window_next_ = (window_next_ + 1) % kWindows;
  Window& w = windows_[i];
  w.data = window_mem_.get() + i * kWindowBytes;
  // Up to kWindowBytes: a short count (the process's mapping ends) still serves this read if
  // it covers it; the bytes are only ever handed out after check() of the exact range.
  iovec local{w.data, kWindowBytes};
  iovec remote{reinterpret_cast<void*>(va), kWindowBytes};
  ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  ++stats_.window_fills;
  if (n < static_cast<ssize_t>(len)) {
    windows_valid_ &= ~(1u << i);
    return false;
  }
  w.pid = pid;
  w.va = va;
  w.len = static_cast<size_t>(n);
  windows_valid_ |= 1u << i;
  memcpy(out.data(), w.data, len);
  return true;
}

void ProcessMemory::drop_windows(pid_t pid, uint64_t va, size_t len) {
  for (uint32_t i = 0; i < kWindows; ++i) {
    const Window& w = windows_[i];
    if ((windows_valid_ & (1u << i)) && w.pid == pid && va < w.va + w.len && w.va < va + len)
      windows_valid_ &= ~(1u << i);
  }
}

// Stages a write of `pid` (see memory.h); false: too big to stage, write it directly.
bool ProcessMemory::stage_write(pid_t pid, uint64_t va, std::span<const std::byte> in) {
  const size_t len = in.size();
  if (len > kStageBytes / 4) return false;
  auto extends = [&] {
    const iovec& last = stage_remote_[stage_iovs_ - 1];
    return reinterpret_cast<uint64_t>(last.iov_base) + last.iov_len == va;
  };
  if (stage_iovs_ != 0 && (stage_pid_ != pid || stage_len_ + len > kStageBytes ||
                           (stage_iovs_ == kStageIovs && !extends())))
    flush_writes();
  if (!stage_mem_) stage_mem_ = std::make_unique<std::byte[]>(kStageBytes);
  std::byte* at = stage_mem_.get() + stage_len_;
  memcpy(at, in.data(), len);
  stage_len_ += len;
  stage_pid_ = pid;
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

bool ProcessMemory::flush_writes() {
  if (stage_iovs_ == 0) return false;
  ssize_t n = process_vm_writev(stage_pid_, stage_local_, stage_iovs_, stage_remote_, stage_iovs_, 0);
  ++stats_.write_flushes;
  if (n != static_cast<ssize_t>(stage_len_)) ++stats_.failed;
  stage_iovs_ = 0;
  stage_len_ = 0;
  return true;
}

}  // namespace sroce::daemon
