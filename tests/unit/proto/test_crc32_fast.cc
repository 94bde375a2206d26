// The PCLMULQDQ CRC-32 (proto/crc32_fast.c) against the slicing-by-8 tables and a
// bit-by-bit CRC-32 written here, which shares nothing with proto/: every length
// 0..1024 at random alignments and seeds, large sizes, all-zero and all-ones
// data, chaining across the fold boundaries. Each buffer ends exactly where its
// allocation ends, so a load past the end (the 16-byte tail load, the lanes)
// is an ASan error, not a silent read.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "proto/crc32_fast.h"
#include "proto/icrc.h"
#include "proto/packet.h"

namespace {

using Bytes = std::vector<uint8_t>;

// CRC-32 one bit at a time: reflected 0xEDB88320, no pre/post inversion.
uint32_t ref_crc32(uint32_t crc, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ ((crc & 1) ? 0xEDB88320u : 0u);
  }
  return crc;
}

bool cpu_has_pclmul() {
#if defined(__x86_64__)
  // The compiler's own CPUID probe (libgcc / compiler-rt), not proto's.
  __builtin_cpu_init();
  return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#else
  return false;
#endif
}

// All three implementations and the dispatcher on `n` bytes that start `off`
// bytes into a fresh allocation of exactly off + n bytes.
void check_all(const Bytes& src, size_t off, size_t n, uint32_t seed) {
  Bytes buf(off + n);
  for (size_t i = 0; i < n; i++) buf[off + i] = src[i];
  const uint8_t* p = buf.data() + off;
  const uint32_t want = ref_crc32(seed, p, n);
  INFO("len " << n << " offset " << off << " seed " << seed);
  REQUIRE(sroce_crc32_update_table(seed, p, n) == want);
  REQUIRE(sroce_crc32_update(seed, p, n) == want);
  if (sroce_crc32_pclmul_supported()) REQUIRE(sroce_crc32_update_pclmul(seed, p, n) == want);
  if (sroce_crc32_vpclmul_supported()) REQUIRE(sroce_crc32_update_vpclmul(seed, p, n) == want);
  if (sroce_crc32_vpclmul256_supported()) REQUIRE(sroce_crc32_update_vpclmul256(seed, p, n) == want);
}

Bytes random_bytes(std::mt19937& rng, size_t n) {
  Bytes b(n);
  for (auto& x : b) x = (uint8_t)rng();
  return b;
}

}  // namespace

TEST_CASE("CPUID probe agrees with the compiler's and the fast path is built here", "[proto][crc]") {
  CHECK((sroce_crc32_pclmul_supported() != 0) == (SROCE_CRC32_HAVE_PCLMUL && cpu_has_pclmul()));
  // The target of this project (x86-64 servers) has PCLMULQDQ since 2010;
  // a build there without the fast path would be a silent 10x regression.
#if defined(__x86_64__)
  CHECK(SROCE_CRC32_HAVE_PCLMUL == 1);
#endif
  if (!sroce_crc32_pclmul_supported()) WARN("no PCLMULQDQ here: only the table path is tested");
  if (!sroce_crc32_vpclmul_supported()) WARN("no VPCLMULQDQ/AVX-512 here: the wide path is not tested");
  if (!sroce_crc32_vpclmul256_supported()) WARN("no VPCLMULQDQ/AVX2 here: the 256-bit path is not tested");
}

TEST_CASE("wide-path CPUID probe agrees with the compiler's", "[proto][crc]") {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
                   cpu_has_pclmul();
  CHECK((sroce_crc32_vpclmul_supported() != 0) == (SROCE_CRC32_HAVE_PCLMUL && cpu));
#else
  CHECK(sroce_crc32_vpclmul_supported() == 0);
#endif
}

TEST_CASE("256-bit-path CPUID probe agrees with the compiler's", "[proto][crc]") {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool cpu = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") &&
                   cpu_has_pclmul();
  CHECK((sroce_crc32_vpclmul256_supported() != 0) == (SROCE_CRC32_HAVE_PCLMUL && cpu));
#else
  CHECK(sroce_crc32_vpclmul256_supported() == 0);
#endif
}

TEST_CASE("fast CRC-32 equals tables and bit-by-bit at every length 0..1024", "[proto][crc]") {
  std::mt19937 rng(0x1c5c);
  const Bytes src = random_bytes(rng, 1024);
  // (Up to 1024: every remainder of the wide path's 256-byte steps and 64-byte blocks, and of
  // the 256-bit path's 128-byte steps and 32-byte blocks, too.)
  for (size_t n = 0; n <= 1024; n++) {
    // Offset 0 (allocation start) and three random misalignments up to 63.
    check_all(src, 0, n, (uint32_t)rng());
    for (int a = 0; a < 3; a++) check_all(src, rng() % 64, n, (uint32_t)rng());
  }
}

TEST_CASE("fast CRC-32 on large buffers", "[proto][crc]") {
  std::mt19937 rng(7);
  for (size_t n : {4096u, 4096u + 15u, 9000u, 65536u, 65536u + 63u, (1u << 20) + 7u}) {
    const Bytes src = random_bytes(rng, n);
    check_all(src, 0, n, 0xffffffffu);
    check_all(src, 1 + rng() % 15, n, (uint32_t)rng());
  }
}

TEST_CASE("fast CRC-32 on all-zero and all-ones data", "[proto][crc]") {
  for (size_t n : {0u, 1u, 63u, 64u, 65u, 79u, 80u, 127u, 128u, 129u, 1000u, 4096u, 4111u}) {
    for (uint8_t fill : {(uint8_t)0x00, (uint8_t)0xff}) {
      const Bytes src(n, fill);
      for (uint32_t seed : {0u, 0xffffffffu, 0xdebb20e3u}) check_all(src, 0, n, seed);
    }
  }
  // CRC(0, zeros) stays 0 whatever the length: only a nonzero register or
  // data can make it move, a cheap sign that no constant leaks in on its own.
  const Bytes zeros(4096, 0);
  if (sroce_crc32_pclmul_supported()) CHECK(sroce_crc32_update_pclmul(0, zeros.data(), 4096) == 0);
  if (sroce_crc32_vpclmul_supported()) CHECK(sroce_crc32_update_vpclmul(0, zeros.data(), 4096) == 0);
  if (sroce_crc32_vpclmul256_supported()) CHECK(sroce_crc32_update_vpclmul256(0, zeros.data(), 4096) == 0);
}

TEST_CASE("fast CRC-32 chains across lane, block and tail boundaries", "[proto][crc]") {
  std::mt19937 rng(99);
  const Bytes data = random_bytes(rng, 777);
  const uint32_t whole = ref_crc32(0xffffffffu, data.data(), data.size());
  for (size_t cut = 0; cut <= data.size(); cut++) {
    const uint32_t a = sroce_crc32_update(0xffffffffu, data.data(), cut);
    REQUIRE(sroce_crc32_update(a, data.data() + cut, data.size() - cut) == whole);
  }
}

TEST_CASE("ICRC of a 4 KiB packet goes through the fast path and stays right", "[proto][icrc]") {
  std::mt19937 rng(4791);
  const size_t payload = 4096;
  const uint16_t udp_len = (uint16_t)(8 + 12 + payload + 4);
  Bytes pkt(28 + 12 + payload);
  REQUIRE(sroce_build_ipv4(pkt.data(), 0x0a000001, 0x0a000002, 0x02, 64, udp_len) == 20);
  REQUIRE(sroce_build_udp(pkt.data() + 20, 0xc001, SROCE_UDP_PORT, udp_len) == 8);
  sroce_bth b{};
  b.opcode = SROCE_OP_SEND_ONLY;
  b.pkey = 0xffff;
  b.dqpn = 0x12;
  b.psn = 0x345;
  sroce_bth_write(pkt.data() + 28, &b);
  for (size_t i = 40; i < pkt.size(); i++) pkt[i] = (uint8_t)rng();

  // Annex A17.3.3 by hand: 8 x 0xff, then the packet with TOS, TTL, IP
  // checksum, UDP checksum and BTH Resv8a set to all ones, all bit by bit.
  // (Built by size, then copied: g++ 12 -O2 warns falsely on vector::insert.)
  Bytes m(8 + pkt.size(), 0xff);
  std::copy(pkt.begin(), pkt.end(), m.begin() + 8);
  m[8 + 1] = m[8 + 8] = m[8 + 10] = m[8 + 11] = 0xff;
  m[8 + 26] = m[8 + 27] = 0xff;
  m[8 + 28 + 4] = 0xff;
  const uint32_t want = ~ref_crc32(0xffffffffu, m.data(), m.size());

  uint32_t icrc = 0;
  REQUIRE(sroce_icrc_ip(pkt.data(), pkt.size(), &icrc) == 0);
  CHECK(icrc == want);
  sroce_icrc_addr a{};
  a.src_gid[10] = a.src_gid[11] = a.dst_gid[10] = a.dst_gid[11] = 0xff;
  sroce_put_be32(a.src_gid + 12, 0x0a000001);
  sroce_put_be32(a.dst_gid + 12, 0x0a000002);
  a.src_port = 0xc001;
  a.dst_port = SROCE_UDP_PORT;
  CHECK(sroce_icrc_payload(&a, pkt.data() + 28, pkt.size() - 28) == want);
}
