// The simulator's only source of randomness: xoshiro256** seeded by
// splitmix64, with our own integer/real helpers. std::uniform_*_distribution
// is implementation-defined, so a run would not be byte-for-byte reproducible
// across standard libraries; these helpers are.
#pragma once

#include <cstdint>

namespace sroce::sim {

class Rng {
 public:
  explicit Rng(uint64_t seed = 1) { reseed(seed); }

  void reseed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& w : s_) w = splitmix64(x);
  }

  // splitmix64 step: also used to derive independent child seeds.
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // A stateless 64-bit mixer (the splitmix64 finalizer), for hashing.
  static constexpr uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n) without modulo bias (Lemire's multiply-and-reject).
  uint64_t below(uint64_t n) {
    if (n <= 1) return 0;
    __uint128_t m = static_cast<__uint128_t>(next()) * n;
    auto lo = static_cast<uint64_t>(m);
    if (lo < n) {
      const uint64_t threshold = (0 - n) % n;
      while (lo < threshold) {
        m = static_cast<__uint128_t>(next()) * n;
        lo = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  // Uniform in [lo, hi] (inclusive).
  int64_t range(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }
  // Uniform real in [0, 1) with 53 bits.
  double real() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // True with probability p. p <= 0 never draws, so a disabled impairment
  // does not shift the random stream of the enabled ones.
  bool chance(double p) {
    if (p <= 0) return false;
    if (p >= 1) return true;
    return real() < p;
  }

  // A child generator whose stream is independent of this one's future draws.
  Rng fork() { return Rng(next()); }

 private:
  static constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4] = {};
};

}  // namespace sroce::sim
