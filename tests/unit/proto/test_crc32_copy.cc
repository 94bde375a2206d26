// The copy-and-CRC primitive (sroce_crc32_copy and its table / PCLMULQDQ / wide
// variants), the CRC-32 combination (sroce_crc32_combine, crc32_combine.c) and
// the fused ICRC (sroce_icrc_payload_fused) against the plain paths: a CRC-32
// written here bit by bit, memcmp of every copied byte, guard bytes on both
// sides of each destination, random sizes 0..9000 at odd offsets.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "proto/crc32_fast.h"
#include "proto/icrc.h"
#include "proto/packet.h"

namespace {

using Bytes = std::vector<uint8_t>;

uint32_t ref_crc32(uint32_t crc, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ ((crc & 1) ? 0xEDB88320u : 0u);
  }
  return crc;
}

// x^(8n) mod P by shifting n zero bytes through the bit-by-bit register: the
// register after n zero bytes from `c` is c * x^(8n) mod P.
uint32_t ref_shift(uint32_t c, size_t n) {
  const Bytes zeros(n, 0);
  return ref_crc32(c, zeros.data(), n);
}

using CopyFn = uint32_t (*)(uint32_t, uint8_t*, const uint8_t*, size_t);

struct Impl {
  const char* name;
  CopyFn fn;
  bool usable;
};

std::vector<Impl> impls() {
  return {{"dispatch", sroce_crc32_copy, true},
          {"table", sroce_crc32_copy_table, true},
          {"pclmul", sroce_crc32_copy_pclmul, sroce_crc32_pclmul_supported() != 0},
          {"vpclmul", sroce_crc32_copy_vpclmul, sroce_crc32_vpclmul_supported() != 0},
          {"vpclmul256", sroce_crc32_copy_vpclmul256, sroce_crc32_vpclmul256_supported() != 0}};
}

constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xa5;

// Copies `n` bytes from `soff` into a destination at `doff`, both in fresh
// allocations that end exactly where the data ends (a load or store past the
// end is an ASan error); checks the CRC, every byte, and the guards before.
void check_copy(const Impl& im, const Bytes& data, size_t soff, size_t doff, size_t n, uint32_t seed) {
  Bytes src(soff + n);
  std::memcpy(src.data() + soff, data.data(), n);
  Bytes dst(kGuard + doff + n, kGuardByte);
  const uint32_t want = ref_crc32(seed, src.data() + soff, n);
  INFO(im.name << " len " << n << " src offset " << soff << " dst offset " << doff);
  REQUIRE(im.fn(seed, dst.data() + kGuard + doff, src.data() + soff, n) == want);
  REQUIRE(std::memcmp(dst.data() + kGuard + doff, src.data() + soff, n) == 0);
  for (size_t i = 0; i < kGuard + doff; i++) REQUIRE(dst[i] == kGuardByte);
}

}  // namespace

TEST_CASE("copy+CRC: every implementation copies byte for byte and returns the CRC", "[proto][crc][copy]") {
  std::mt19937 rng(0xc0b1);
  Bytes data(9000);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (const Impl& im : impls()) {
    if (!im.usable) {
      WARN(im.name << ": not on this CPU, not tested");
      continue;
    }
    // Every length 0..600 (all remainders of the 16-, 64- and 256-byte steps) ...
    for (size_t n = 0; n <= 600; n++) check_copy(im, data, rng() % 64, rng() % 64, n, static_cast<uint32_t>(rng()));
    // ... and random ones up to 9000 (jumbo frames), odd offsets on both sides.
    for (int k = 0; k < 400; k++) {
      const size_t n = rng() % 9001;
      check_copy(im, data, 1 + 2 * (rng() % 32), 1 + 2 * (rng() % 32), n, static_cast<uint32_t>(rng()));
    }
    for (size_t n : {4096u, 4095u, 4097u, 8192u, 9000u})
      check_copy(im, data, 0, 0, n, 0);
  }
}

TEST_CASE("copy+CRC: the source is not changed and a chained copy equals one copy", "[proto][crc][copy]") {
  std::mt19937 rng(17);
  Bytes src(5000);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  const Bytes before = src;
  const uint32_t whole = ref_crc32(0, src.data(), src.size());
  for (int k = 0; k < 200; k++) {
    const size_t cut = rng() % (src.size() + 1);
    Bytes dst(src.size());
    uint32_t c = sroce_crc32_copy(0, dst.data(), src.data(), cut);
    c = sroce_crc32_copy(c, dst.data() + cut, src.data() + cut, src.size() - cut);
    REQUIRE(c == whole);
    REQUIRE(dst == src);
  }
  CHECK(src == before);
}

TEST_CASE("CRC-32 combine: the powers table is x^8 squared again and again", "[proto][crc][combine]") {
  // Entry 0: the register 1 (reflected: bit 31) after one zero byte is x^8.
  CHECK(sroce_crc32_x8pow[0] == ref_shift(0x80000000u, 1));
  for (int k = 0; k < 31; k++) {
    INFO("k " << k);
    CHECK(sroce_crc32_x8pow[k + 1] == sroce_crc32_mulmod(sroce_crc32_x8pow[k], sroce_crc32_x8pow[k]));
  }
  // Period 32: squaring the last gives the first again.
  CHECK(sroce_crc32_mulmod(sroce_crc32_x8pow[31], sroce_crc32_x8pow[31]) == sroce_crc32_x8pow[0]);
  // Small powers against the bit-by-bit register.
  for (int k = 0; k < 13; k++) CHECK(sroce_crc32_x8pow[k] == ref_shift(0x80000000u, size_t{1} << k));
}

TEST_CASE("CRC-32 combine: crc(A||B) from crc(A), crc(B), len(B) over random splits", "[proto][crc][combine]") {
  std::mt19937 rng(0x5eed);
  Bytes data(9000);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (int k = 0; k < 3000; k++) {
    const size_t n = rng() % 9001;
    const size_t cut = n ? rng() % (n + 1) : 0;
    const uint32_t seed = (k % 3 == 0) ? 0xffffffffu : static_cast<uint32_t>(rng());
    const uint32_t want = ref_crc32(seed, data.data(), n);
    const uint32_t a = sroce_crc32_update(seed, data.data(), cut);
    const uint32_t b = sroce_crc32_update(0, data.data() + cut, n - cut);
    INFO("len " << n << " cut " << cut);
    REQUIRE(sroce_crc32_combine(a, b, n - cut) == want);
  }
  // Shift against zero bytes, lengths with many bits set.
  for (size_t n : {0u, 1u, 3u, 255u, 4096u, 4099u, 65535u, 100000u})
    CHECK(sroce_crc32_shift(0x12345678u, n) == ref_shift(0x12345678u, n));
  // Lengths past 2^32 wrap the table (period 32): x^(8 * 2^32) == x^8.
  CHECK(sroce_crc32_shift(0x12345678u, uint64_t{1} << 32) == sroce_crc32_shift(0x12345678u, 1));
}

TEST_CASE("fused ICRC equals the two-pass ICRC for headers, data and tail of every size", "[proto][icrc][fused]") {
  std::mt19937 rng(4791);
  for (int k = 0; k < 2000; k++) {
    const size_t hdr = SROCE_BTH_LEN + (rng() % 4) * 4 + (k % 2 ? SROCE_RETH_LEN : 0);
    const size_t data = rng() % 9001;
    const size_t tail = (rng() % 4) + (k % 3 ? SROCE_LEH_LEN : 0);
    Bytes pkt(hdr + data + tail);
    for (auto& b : pkt) b = static_cast<uint8_t>(rng());
    sroce_icrc_addr a{};
    if (k % 2) {  // IPv4-mapped
      a.src_gid[10] = a.src_gid[11] = a.dst_gid[10] = a.dst_gid[11] = 0xff;
      sroce_put_be32(a.src_gid + 12, static_cast<uint32_t>(rng()));
      sroce_put_be32(a.dst_gid + 12, static_cast<uint32_t>(rng()));
    } else {
      for (int i = 0; i < 16; i++) a.src_gid[i] = static_cast<uint8_t>(rng()), a.dst_gid[i] = static_cast<uint8_t>(rng());
      a.src_gid[0] = 0xfd;
    }
    a.src_port = static_cast<uint16_t>(rng());
    a.dst_port = SROCE_UDP_PORT;
    const uint32_t want = sroce_icrc_payload(&a, pkt.data(), pkt.size());
    // The data's CRC as a transmitter takes it: copied in from elsewhere.
    Bytes src(pkt.begin() + static_cast<long>(hdr), pkt.begin() + static_cast<long>(hdr + data));
    Bytes into(pkt);
    const uint32_t dc = sroce_crc32_copy(0, into.data() + hdr, src.data(), data);
    INFO("hdr " << hdr << " data " << data << " tail " << tail);
    REQUIRE(into == pkt);
    REQUIRE(sroce_icrc_payload_fused(&a, pkt.data(), hdr, dc, data, pkt.size()) == want);
    // The data bytes are not read: the same CRC with them overwritten.
    std::memset(into.data() + hdr, 0x5a, data);
    REQUIRE(sroce_icrc_payload_fused(&a, into.data(), hdr, dc, data, into.size()) == want);
  }
}
