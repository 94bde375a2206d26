// Unguessable, reproducible identifiers (QPNs, L_Keys, R_Keys).
//
// A key must not be predictable by a remote peer (IBA 10.6: an R_Key is a
// capability), yet the simulator needs the same keys for the same seed. We
// take a small counter value v = (generation << slot_bits) | slot and put it
// through a keyed 24-bit Feistel permutation whose round keys come from
// EngineConfig::seed. Because the permutation is a bijection we can invert it
// on receive: an incoming QPN or R_Key is turned back into a table slot with a
// few multiply-xor rounds, an array index instead of a hash lookup.
#pragma once

#include <cstdint>

namespace sroce::eng {

// splitmix64 finalizer: a strong 64-bit mixer.
constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Keyed permutation of [0, 2^24): 4 Feistel rounds over two 12-bit halves.
// The round function is one keyed multiply (odd multiplier and xor key drawn
// from the seed), so that inverting an identifier on the receive path costs a
// few cycles; the permutation is a bijection whatever the round function is.
class Perm24 {
 public:
  void init(uint64_t seed, uint64_t domain) {
    for (int i = 0; i < kRounds; ++i) {
      const uint64_t k =
          mix64(seed ^ mix64(domain * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i) + 1));
      xor_[i] = static_cast<uint32_t>(k);
      mul_[i] = static_cast<uint32_t>(k >> 32) | 1u;
    }
  }
  uint32_t fwd(uint32_t v) const {
    uint32_t l = (v >> 12) & 0xfff, r = v & 0xfff;
    for (int i = 0; i < kRounds; ++i) {
      const uint32_t t = l ^ f(i, r);
      l = r;
      r = t;
    }
    return (l << 12) | r;
  }
  uint32_t inv(uint32_t v) const {
    uint32_t l = (v >> 12) & 0xfff, r = v & 0xfff;
    for (int i = kRounds - 1; i >= 0; --i) {
      const uint32_t t = r ^ f(i, l);
      r = l;
      l = t;
    }
    return (l << 12) | r;
  }

 private:
  static constexpr int kRounds = 4;
  uint32_t f(int i, uint32_t x) const { return ((x ^ xor_[i]) * mul_[i]) >> 20; }
  uint32_t xor_[kRounds] = {};
  uint32_t mul_[kRounds] = {};
};

}  // namespace sroce::eng
