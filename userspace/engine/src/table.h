// Fixed-capacity object tables with generation-checked identifiers.
//
// Every verbs object lives in a slot of a table whose capacity is set when
// the engine is built. An identifier handed out (handle, QPN, key) encodes
// (generation << slot_bits) | slot, so a stale identifier of a destroyed
// object never reaches the slot's new tenant. Allocation is O(1) from a free
// stack; lookup is a segment index, an array index and a generation compare.
//
// Memory follows use: slots are built only when first handed out, 16 at a
// time (one segment), so a table of capacity 1024 with 3 objects holds 16
// slots, and slots never move (a reference to an object stays valid while
// others are created). Growing happens in alloc(), which only the control
// path calls (create_*, reg_mr). Slots are handed out in the same order as a
// fully built table would: released slots first (the last released first),
// then the lowest never used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace sroce::eng {

constexpr uint32_t ceil_log2(uint32_t v) {
  uint32_t b = 0;
  while ((1ull << b) < v) ++b;
  return b;
}

template <typename T>
class Table {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // `id_bits`: width of the identifiers built from this table (24 or 32).
  void init(uint32_t capacity, uint32_t id_bits) {
    cap_ = capacity;
    slot_bits_ = ceil_log2(capacity < 2 ? 2 : capacity);
    gen_mask_ = static_cast<uint32_t>((1ull << (id_bits - slot_bits_)) - 1);
    segs_.clear();
    gen_.clear();
    used_.clear();
    free_.clear();
    built_ = 0;
  }

  // kNone when the table is full or the memory for a new segment is not
  // there (the caller reports ENOMEM either way).
  uint32_t alloc() {
    uint32_t s;
    if (!free_.empty()) {
      s = free_.back();
      free_.pop_back();
    } else {
      if (built_ >= cap_ || !grow()) return kNone;
      s = built_++;
    }
    used_[s] = 1;
    (*this)[s] = T{};
    return s;
  }
  void release(uint32_t s) {
    used_[s] = 0;
    gen_[s] = (gen_[s] + 1) & gen_mask_;
    (*this)[s] = T{};
    free_.push_back(s);
  }
  // Give a slot a new generation (used to skip reserved identifiers).
  void bump(uint32_t s) { gen_[s] = (gen_[s] + 1) & gen_mask_; }

  uint32_t id(uint32_t s) const { return (gen_[s] << slot_bits_) | s; }
  // Slot of an identifier, or kNone if it names no live object.
  uint32_t slot_of(uint32_t id) const {
    const uint32_t s = id & ((1u << slot_bits_) - 1);
    if (s >= built_ || !used_[s] || ((id >> slot_bits_) & gen_mask_) != gen_[s] ||
        (id >> slot_bits_) > gen_mask_)
      return kNone;
    return s;
  }

  T& operator[](uint32_t s) { return segs_[s >> kSegBits][s & (kSeg - 1)]; }
  const T& operator[](uint32_t s) const { return const_cast<Table*>(this)->operator[](s); }
  bool used(uint32_t s) const { return s < built_ && used_[s]; }
  uint32_t capacity() const { return cap_; }
  // Slots built so far (every used slot is below this).
  uint32_t built() const { return built_; }
  uint32_t in_use() const { return built_ - static_cast<uint32_t>(free_.size()); }
  // Bytes this table holds (slots built, per-slot bookkeeping); objects'
  // own heap memory is not included.
  size_t memory_bytes() const {
    return segs_.size() * kSeg * sizeof(T) + gen_.capacity() * sizeof(uint32_t) +
           used_.capacity() + free_.capacity() * sizeof(uint32_t) +
           segs_.capacity() * sizeof(segs_[0]);
  }

 private:
  static constexpr uint32_t kSegBits = 4;
  static constexpr uint32_t kSeg = 1u << kSegBits;

  // Makes slot built_ addressable.
  bool grow() {
    if ((built_ >> kSegBits) < segs_.size()) return true;
    std::unique_ptr<T[]> p(new (std::nothrow) T[kSeg]);
    if (!p) return false;
    segs_.push_back(std::move(p));
    gen_.resize(segs_.size() * kSeg, 1);
    used_.resize(segs_.size() * kSeg, 0);
    return true;
  }

  std::vector<std::unique_ptr<T[]>> segs_;
  std::vector<uint32_t> gen_;
  std::vector<uint8_t> used_;
  std::vector<uint32_t> free_;  // released slots
  uint32_t built_ = 0;          // slots [0, built_) have been handed out once
  uint32_t cap_ = 0;
  uint32_t slot_bits_ = 1;
  uint32_t gen_mask_ = 0;
};

}  // namespace sroce::eng
