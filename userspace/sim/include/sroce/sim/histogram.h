// A fixed-size log-linear histogram of non-negative integers (queue bytes,
// picoseconds): values below 16 exactly, above that 16 buckets per power of
// two, so a quantile is off by at most 1/16 (6.25 %) of its value. Fixed
// storage (8 KiB), no allocation when adding: usable on the packet path.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace sroce::sim {

class LogHistogram {
 public:
  static constexpr uint32_t kSub = 16;  // buckets per octave
  static constexpr uint32_t kBuckets = kSub + (64 - 4) * kSub;

  static uint32_t index(uint64_t v) {
    if (v < kSub) return static_cast<uint32_t>(v);
    const uint32_t msb = 63u - static_cast<uint32_t>(std::countl_zero(v));
    const uint32_t sub = static_cast<uint32_t>(v >> (msb - 4)) & (kSub - 1);
    return kSub + (msb - 4) * kSub + sub;
  }
  // The largest value that falls into bucket `i`.
  static uint64_t upper(uint32_t i) {
    if (i < kSub) return i;
    const uint32_t shift = (i - kSub) / kSub;
    const uint64_t lower = (uint64_t{kSub} + (i - kSub) % kSub) << shift;
    return lower + ((uint64_t{1} << shift) - 1);
  }

  void add(uint64_t v, uint64_t n = 1) {
    counts_[index(v)] += n;
    total_ += n;
    if (v > max_) max_ = v;
  }
  void merge(const LogHistogram& o) {
    for (uint32_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
    if (o.max_ > max_) max_ = o.max_;
  }
  uint64_t count() const { return total_; }
  uint64_t max() const { return max_; }
  // The smallest bucket bound with at least q of the samples at or below it
  // (an upper estimate); 0 when empty.
  uint64_t quantile(double q) const {
    if (total_ == 0) return 0;
    const double want = q * static_cast<double>(total_);
    uint64_t seen = 0;
    for (uint32_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (counts_[i] != 0 && static_cast<double>(seen) >= want) {
        const uint64_t u = upper(i);
        return u < max_ ? u : max_;
      }
    }
    return max_;
  }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t total_ = 0;
  uint64_t max_ = 0;
};

}  // namespace sroce::sim
