// copy_bytes (userspace/daemon/src/copy.h): memcpy around REP MOVSB's slow case.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "copy.h"

using sroce::daemon::copy_aliases;
using sroce::daemon::copy_bytes;

namespace {

constexpr size_t kPage = 4096;
constexpr uint8_t kGuard = 0x5a;

uint8_t at(size_t i) { return static_cast<uint8_t>(i * 167 + 13); }

}  // namespace

TEST_CASE("copy_aliases names exactly a destination 1..63 bytes ahead modulo 4 KiB", "[copy]") {
  std::vector<uint8_t> buf(3 * kPage);
  const uint8_t* src = buf.data() + 100;
  for (size_t d = 0; d < 2 * kPage; ++d) {
    INFO("dst - src = " << d);
    const bool ahead = (d % kPage) >= 1 && (d % kPage) <= 63;
    CHECK(copy_aliases(src + d, src) == ahead);
  }
  // A destination behind the source: dst - src wraps, so 4033..4095 behind is 1..63 ahead.
  CHECK(copy_aliases(buf.data(), buf.data() + kPage - 28));
  CHECK_FALSE(copy_aliases(buf.data(), buf.data() + 28));
}

TEST_CASE("copy_bytes copies every byte at every relation of the addresses, and nothing more", "[copy]") {
  const size_t lens[] = {0, 1, 63, 2047, 2048, 2049, 2112, 2113, 4096, 4096 + 77, 3 * 2048, 65536 + 5};
  const size_t rels[] = {0, 1, 12, 28, 31, 32, 63, 64, 100, 2048, 4095};
  std::vector<uint8_t> src_buf(65536 + 5 + 2 * kPage);
  for (size_t i = 0; i < src_buf.size(); ++i) src_buf[i] = at(i);
  for (size_t len : lens) {
    for (size_t rel : rels) {
      INFO("len " << len << ", dst - src = " << rel << " mod 4096");
      const uint8_t* src = src_buf.data() + 300;
      std::vector<uint8_t> dst_buf(len + 3 * kPage, kGuard);
      // The destination `rel` bytes ahead of the source modulo a page, after a guard page.
      const uintptr_t s = reinterpret_cast<uintptr_t>(src);
      uint8_t* dst = dst_buf.data() + kPage;
      dst += (s + rel - reinterpret_cast<uintptr_t>(dst)) % kPage;
      REQUIRE(((reinterpret_cast<uintptr_t>(dst) - s) & (kPage - 1)) == rel % kPage);
      copy_bytes(dst, src, len);
      REQUIRE(std::memcmp(dst, src, len) == 0);
      for (uint8_t* p = dst_buf.data(); p < dst; ++p) REQUIRE(*p == kGuard);
      for (uint8_t* p = dst + len; p < dst_buf.data() + dst_buf.size(); ++p) REQUIRE(*p == kGuard);
    }
  }
}
