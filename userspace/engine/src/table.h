// Fixed-capacity object tables with generation-checked identifiers.
//
// Every verbs object lives in a slot of a table sized when the engine is
// built. An identifier handed out (handle, QPN, key) encodes
// (generation << slot_bits) | slot, so a stale identifier of a destroyed
// object never reaches the slot's new tenant. Allocation is O(1) from a free
// stack; lookup is an array index plus a generation compare.
#pragma once

#include <cstdint>
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
    objs_.assign(capacity, T{});
    gen_.assign(capacity, 1);
    used_.assign(capacity, 0);
    free_.clear();
    free_.reserve(capacity);
    for (uint32_t i = capacity; i-- > 0;) free_.push_back(i);
  }

  uint32_t alloc() {
    if (free_.empty()) return kNone;
    const uint32_t s = free_.back();
    free_.pop_back();
    used_[s] = 1;
    objs_[s] = T{};
    return s;
  }
  void release(uint32_t s) {
    used_[s] = 0;
    gen_[s] = (gen_[s] + 1) & gen_mask_;
    objs_[s] = T{};
    free_.push_back(s);
  }
  // Give a slot a new generation (used to skip reserved identifiers).
  void bump(uint32_t s) { gen_[s] = (gen_[s] + 1) & gen_mask_; }

  uint32_t id(uint32_t s) const { return (gen_[s] << slot_bits_) | s; }
  // Slot of an identifier, or kNone if it names no live object.
  uint32_t slot_of(uint32_t id) const {
    const uint32_t s = id & ((1u << slot_bits_) - 1);
    if (s >= cap_ || !used_[s] || ((id >> slot_bits_) & gen_mask_) != gen_[s] ||
        (id >> slot_bits_) > gen_mask_)
      return kNone;
    return s;
  }

  T& operator[](uint32_t s) { return objs_[s]; }
  const T& operator[](uint32_t s) const { return objs_[s]; }
  bool used(uint32_t s) const { return s < cap_ && used_[s]; }
  uint32_t capacity() const { return cap_; }
  uint32_t in_use() const { return cap_ - static_cast<uint32_t>(free_.size()); }

 private:
  std::vector<T> objs_;
  std::vector<uint32_t> gen_;
  std::vector<uint8_t> used_;
  std::vector<uint32_t> free_;
  uint32_t cap_ = 0;
  uint32_t slot_bits_ = 1;
  uint32_t gen_mask_ = 0;
};

}  // namespace sroce::eng
