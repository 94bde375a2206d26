// The daemon's view of one shared-memory ring (userspace/abi/sroce_abi.h).
//
// Locking rule: the daemon is single-threaded, so the daemon side needs no
// lock; the other side is one application process. Memory order as the ABI
// states: the producer writes an entry, then stores `prod` with release; the
// consumer loads `prod` with acquire, copies the entry out, then stores `cons`
// with release. Entries written by the application are copied into daemon
// memory before they are validated, so a concurrent rewrite cannot change
// what was checked.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "sroce_abi.h"

namespace sroce::daemon {

inline constexpr size_t kRingEntriesOffset = (sizeof(sroce_ring) + 63) & ~size_t{63};

inline uint32_t next_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

inline size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// A memfd shared with one application, mapped in the daemon. The memfd is
// sealed against shrinking so the application cannot make daemon accesses
// fault (SIGBUS) by truncating it.
class SharedMemory {
 public:
  SharedMemory() = default;
  ~SharedMemory() { reset(); }
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  SharedMemory(SharedMemory&& o) noexcept { *this = std::move(o); }
  SharedMemory& operator=(SharedMemory&& o) noexcept {
    if (this != &o) {
      reset();
      base_ = o.base_;
      len_ = o.len_;
      fd_ = o.fd_;
      o.base_ = nullptr;
      o.len_ = 0;
      o.fd_ = -1;
    }
    return *this;
  }

  // Returns 0 or -errno.
  int create(const char* name, size_t len);
  // The kernel path: a region of rdma_sroce.ko's control channel (a ring,
  // or an MR's pinned pages), mapped whole at its offset; no fd of its own.
  int map(int chan_fd, uint64_t offset, size_t len, int prot) {
    reset();
    void* p = mmap(nullptr, len, prot, MAP_SHARED, chan_fd, static_cast<off_t>(offset));
    if (p == MAP_FAILED) return -errno;
    base_ = p;
    len_ = len;
    return 0;
  }
  void reset() {
    if (base_) munmap(base_, len_);
    if (fd_ >= 0) close(fd_);
    base_ = nullptr;
    len_ = 0;
    fd_ = -1;
  }

  std::byte* base() const { return static_cast<std::byte*>(base_); }
  size_t size() const { return len_; }
  int fd() const { return fd_; }

 private:
  void* base_ = nullptr;
  size_t len_ = 0;
  int fd_ = -1;
};

class ShmRing {
 public:
  ShmRing() = default;
  // Initialises the header at `at` (daemon side creates every ring).
  void init(std::byte* at, uint32_t size, uint32_t entry_size) {
    hdr_ = reinterpret_cast<sroce_ring*>(at);
    memset(hdr_, 0, sizeof *hdr_);
    hdr_->size = size;
    hdr_->entry_size = entry_size;
    entries_ = at + kRingEntriesOffset;
    size_ = size;
    entry_size_ = entry_size;
  }
  static size_t bytes_for(uint32_t size, uint32_t entry_size) {
    return kRingEntriesOffset + size_t{size} * entry_size;
  }

  bool valid() const { return hdr_ != nullptr; }
  uint32_t size() const { return size_; }
  uint32_t entry_size() const { return entry_size_; }
  std::byte* slot(uint32_t index) const { return entries_ + size_t{index & (size_ - 1)} * entry_size_; }

  uint32_t prod_acquire() const { return ref(hdr_->prod).load(std::memory_order_acquire); }
  uint32_t cons_acquire() const { return ref(hdr_->cons).load(std::memory_order_acquire); }
  void set_prod(uint32_t v) const { ref(hdr_->prod).store(v, std::memory_order_release); }
  void set_cons(uint32_t v) const { ref(hdr_->cons).store(v, std::memory_order_release); }

  // Consumer side of the doorbell handshake: publish `sleeping`, then a full
  // fence before the last look at `prod` (pairs with the producer's fence
  // between publishing `prod` and reading `sleeping`).
  void set_sleeping(bool s) const {
    ref(hdr_->sleeping).store(s ? 1u : 0u, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  uint32_t armed() const { return ref(hdr_->armed).load(std::memory_order_acquire); }
  // Clears `armed` if it still holds `expected` (the app may re-arm meanwhile).
  bool disarm(uint32_t expected) const {
    return ref(hdr_->armed).compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
  }
  // A resized CQ's new ring takes over the old one's pending ibv_req_notify_cq.
  void rearm(uint32_t v) const { ref(hdr_->armed).store(v, std::memory_order_release); }
  void set_error() const { ref(hdr_->error).store(1, std::memory_order_release); }

 private:
  static std::atomic_ref<uint32_t> ref(uint32_t& v) { return std::atomic_ref<uint32_t>(v); }

  sroce_ring* hdr_ = nullptr;
  std::byte* entries_ = nullptr;
  uint32_t size_ = 0;
  uint32_t entry_size_ = 0;
};

}  // namespace sroce::daemon
