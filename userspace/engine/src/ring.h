// A bounded FIFO preallocated at setup (async events, CQ notifications).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "objects.h"

namespace sroce::eng {

template <typename T>
class Ring {
 public:
  void init(uint32_t capacity) {
    mask_ = round_pow2(capacity) - 1;
    buf_.assign(mask_ + 1, T{});
    head_ = tail_ = 0;
  }
  bool push(const T& v) {
    if (tail_ - head_ > mask_) return false;
    buf_[tail_++ & mask_] = v;
    return true;
  }
  std::optional<T> pop() {
    if (head_ == tail_) return std::nullopt;
    return buf_[head_++ & mask_];
  }
  bool empty() const { return head_ == tail_; }
  size_t memory_bytes() const { return buf_.capacity() * sizeof(T); }

 private:
  std::vector<T> buf_;
  uint32_t mask_ = 0;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
};

}  // namespace sroce::eng
