// Single-producer single-consumer rings in memory shared with sroced (userspace/abi/sroce_abi.h).
//
// Locking rule: each ring has exactly one producer and one consumer *process*; inside the
// application the provider serialises its own threads with the owning object's lock (QP send
// lock, QP/SRQ receive lock, CQ poll lock), so these helpers need no lock of their own.
// Memory order: the producer publishes an entry with a release store of `prod`; the consumer
// reads `prod` with acquire, reads the entry, then releases `cons`.
#ifndef SROCE_PROVIDER_RING_H
#define SROCE_PROVIDER_RING_H

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "sroce_abi.h"

namespace sroce::provider {

// Offset of the first entry after the ring header ("entries follow, 64-byte aligned").
inline constexpr size_t kRingEntriesOffset = (sizeof(sroce_ring) + 63) & ~size_t{63};

class RingView {
 public:
  RingView() = default;
  explicit RingView(void* header) : hdr_(static_cast<sroce_ring*>(header)) {
    mask_ = hdr_->size - 1;
    entry_size_ = hdr_->entry_size;
    entries_ = static_cast<uint8_t*>(header) + kRingEntriesOffset;
  }

  bool valid() const { return hdr_ != nullptr; }
  uint32_t size() const { return mask_ + 1; }
  uint32_t entry_size() const { return entry_size_; }
  sroce_ring* header() const { return hdr_; }

  // Bytes needed for a ring of `size` entries of `entry_size` bytes.
  static size_t bytes_for(uint32_t size, uint32_t entry_size) {
    return kRingEntriesOffset + size_t{size} * entry_size;
  }

  uint8_t* slot(uint32_t index) const { return entries_ + size_t{index & mask_} * entry_size_; }

  uint32_t load_prod_acquire() const { return ref(hdr_->prod).load(std::memory_order_acquire); }
  uint32_t load_cons_acquire() const { return ref(hdr_->cons).load(std::memory_order_acquire); }
  void store_prod_release(uint32_t v) const { ref(hdr_->prod).store(v, std::memory_order_release); }
  void store_cons_release(uint32_t v) const { ref(hdr_->cons).store(v, std::memory_order_release); }

  // After publishing, the producer must see `sleeping` as the consumer saw `prod` before it
  // slept: a full fence pairs with the consumer's fence between setting `sleeping` and its
  // last look at `prod`, so one of the two always sees the other (no lost wakeup).
  bool consumer_sleeping() const {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ref(hdr_->sleeping).load(std::memory_order_relaxed) != 0;
  }

  uint32_t error() const { return ref(hdr_->error).load(std::memory_order_acquire); }
  void set_armed(uint32_t v) const { ref(hdr_->armed).store(v, std::memory_order_seq_cst); }
  uint32_t armed() const { return ref(hdr_->armed).load(std::memory_order_acquire); }

 private:
  static std::atomic_ref<uint32_t> ref(uint32_t& v) { return std::atomic_ref<uint32_t>(v); }

  sroce_ring* hdr_ = nullptr;
  uint8_t* entries_ = nullptr;
  uint32_t mask_ = 0;
  uint32_t entry_size_ = 0;
};

}  // namespace sroce::provider

#endif  // SROCE_PROVIDER_RING_H
