// copy_bytes: memcpy for payloads, around one slow case of REP MOVSB.
//
// glibc (2.36, Debian 12) copies 2113 bytes and more with REP MOVSB on CPUs
// with FSRM (its x86_rep_movsb_threshold, 2112 there). On AMD Zen 3 REP
// MOVSB is 20-30x slower when the destination is 1..31 bytes ahead of the
// source modulo 4 KiB: a 4 KiB copy takes 1.4 us instead of 50-70 ns
// (measured on the EPYC this project's CI runs on, every offset 0..4095,
// docs/performance.md; lunnova.dev/articles/ryzen-slow-short-rep-mov
// reports the 20x on Zen 3 for a destination 15 bytes off alignment;
// GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold also avoids it, but only
// for a program started with it). A
// daemon hits it all the time: a GSO send buffer from malloc starts 16 bytes
// into a page, the first packet's payload 12 bytes after that, and the
// application's buffer is page aligned. Such copies go in 2 KiB pieces,
// which glibc moves with vector loads and stores; every other copy is a
// plain memcpy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sroce::daemon {

inline constexpr size_t kCopyPiece = 2048;  // at or below glibc's REP MOVSB threshold

// True when a REP MOVSB copy from `src` to `dst` would be in the slow case.
inline bool copy_aliases(const void* dst, const void* src) {
  const uintptr_t d = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  return d - 1 < 63;  // 1..63: the measured 1..31 and a margin
}

inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (n > kCopyPiece && copy_aliases(dst, src)) {
    auto* d = static_cast<std::byte*>(dst);
    const auto* s = static_cast<const std::byte*>(src);
    while (n > kCopyPiece) {
      std::memcpy(d, s, kCopyPiece);
      d += kCopyPiece;
      s += kCopyPiece;
      n -= kCopyPiece;
    }
    std::memcpy(d, s, n);
    return;
  }
  std::memcpy(dst, src, n);
}

}  // namespace sroce::daemon
