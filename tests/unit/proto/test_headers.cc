// Header accessors (IBA Vol 1 r1.4, 9.2 - 9.5) against hand-written byte layouts,
// random round trips, and 24-bit PSN arithmetic (IBA 9.7.1).
#include <array>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "proto/packet.h"

namespace {

using Bytes = std::vector<uint8_t>;

TEST_CASE("BTH layout matches IBA 9.2 bit for bit", "[proto][bth]") {
  sroce_bth bth{};
  bth.opcode = 0x0a;
  bth.se = true;
  bth.mig = false;
  bth.pad = 2;
  bth.tver = 0;
  bth.pkey = 0xffff;
  bth.resv8a = 0;
  bth.dqpn = 0x123456;
  bth.ack_req = true;
  bth.psn = 0xabcdef;
  Bytes p(SROCE_BTH_LEN, 0xee);
  sroce_bth_write(p.data(), &bth);
  // byte 1 = SE(1)=1 M(1)=0 PadCnt(2)=10b TVer(4)=0 -> 1010 0000
  const Bytes want{0x0a, 0xa0, 0xff, 0xff, 0x00, 0x12, 0x34, 0x56, 0x80, 0xab, 0xcd, 0xef};
  CHECK(p == want);

  sroce_bth back{};
  sroce_bth_read(p.data(), &back);
  CHECK(back.opcode == 0x0a);
  CHECK(back.se);
  CHECK_FALSE(back.mig);
  CHECK(back.pad == 2);
  CHECK(back.tver == 0);
  CHECK(back.pkey == 0xffff);
  CHECK(back.dqpn == 0x123456);
  CHECK(back.ack_req);
  CHECK(back.psn == 0xabcdef);
}

TEST_CASE("BTH reads every field from its own bits", "[proto][bth]") {
  // M set, TVer 5, resv8a 0x40 (BECN), Resv7 bits set (ignored on read).
  const Bytes p{0x81, 0x45, 0x12, 0x34, 0x40, 0x00, 0x00, 0xd2, 0x7f, 0x00, 0x00, 0x01};
  sroce_bth b{};
  sroce_bth_read(p.data(), &b);
  CHECK(b.opcode == 0x81);
  CHECK_FALSE(b.se);
  CHECK(b.mig);
  CHECK(b.pad == 0);
  CHECK(b.tver == 5);
  CHECK(b.pkey == 0x1234);
  CHECK(b.resv8a == 0x40);
  CHECK(b.dqpn == 0xd2);
  CHECK_FALSE(b.ack_req);
  CHECK(b.psn == 1);
}

TEST_CASE("BTH write truncates 24-bit fields and clears Resv7", "[proto][bth]") {
  sroce_bth bth{};
  bth.dqpn = 0xff000001;
  bth.psn = 0x01000002;
  Bytes p(SROCE_BTH_LEN, 0xee);
  sroce_bth_write(p.data(), &bth);
  CHECK(p[4] == 0);
  CHECK(p[5] == 0x00);
  CHECK(p[7] == 0x01);
  CHECK(p[8] == 0x00);
  CHECK(p[11] == 0x02);
}

TEST_CASE("RETH layout (IBA 9.3.3)", "[proto][reth]") {
  const sroce_reth r{0x0102030405060708ull, 0x1a2b3c4d, 0x00010000};
  Bytes p(SROCE_RETH_LEN);
  sroce_reth_write(p.data(), &r);
  const Bytes want{1, 2, 3, 4, 5, 6, 7, 8, 0x1a, 0x2b, 0x3c, 0x4d, 0x00, 0x01, 0x00, 0x00};
  CHECK(p == want);
  sroce_reth b{};
  sroce_reth_read(p.data(), &b);
  CHECK(b.va == r.va);
  CHECK(b.rkey == r.rkey);
  CHECK(b.dma_len == r.dma_len);
}

TEST_CASE("AETH layout and syndrome (IBA 9.3.5, table 42/43)", "[proto][aeth]") {
  const sroce_aeth a{sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_REMOTE_ACCESS), 0x00abcd};
  Bytes p(SROCE_AETH_LEN);
  sroce_aeth_write(p.data(), &a);
  // NAK = 11b in bits 6:5, code 2 in bits 4:0 -> 0 11 00010 = 0x62
  const Bytes want{0x62, 0x00, 0xab, 0xcd};
  CHECK(p == want);
  sroce_aeth b{};
  sroce_aeth_read(p.data(), &b);
  CHECK(b.syndrome == 0x62);
  CHECK(b.msn == 0xabcd);
  CHECK(sroce_aeth_type(b.syndrome) == SROCE_AETH_NAK);
  CHECK(sroce_aeth_value(b.syndrome) == SROCE_NAK_REMOTE_ACCESS);

  // An ACK with "no credit count" (9.7.5.1) is 0 00 11111.
  CHECK(sroce_aeth_syndrome(SROCE_AETH_ACK, SROCE_AETH_CREDIT_INVALID) == 0x1f);
  // RNR NAK with timer value 14 (table 45 index): 0 01 01110.
  CHECK(sroce_aeth_syndrome(SROCE_AETH_RNR_NAK, 14) == 0x2e);
  CHECK(sroce_aeth_type(0x2e) == SROCE_AETH_RNR_NAK);
  // Bit 7 is reserved and must not leak into the type.
  CHECK(sroce_aeth_type(0x80) == SROCE_AETH_ACK);
}

TEST_CASE("AtomicETH layout (IBA 9.3.4)", "[proto][atmeth]") {
  const sroce_atmeth a{0x1111222233334444ull, 0xdeadbeef, 0x5555666677778888ull,
                       0x99990000aaaabbbbull};
  Bytes p(SROCE_ATMETH_LEN);
  sroce_atmeth_write(p.data(), &a);
  const Bytes want{0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0x44, 0x44, 0xde, 0xad,
                   0xbe, 0xef, 0x55, 0x55, 0x66, 0x66, 0x77, 0x77, 0x88, 0x88,
                   0x99, 0x99, 0x00, 0x00, 0xaa, 0xaa, 0xbb, 0xbb};
  CHECK(p == want);
  sroce_atmeth b{};
  sroce_atmeth_read(p.data(), &b);
  CHECK(b.va == a.va);
  CHECK(b.rkey == a.rkey);
  CHECK(b.swap_add == a.swap_add);
  CHECK(b.compare == a.compare);
}

TEST_CASE("DETH layout (IBA 9.3.2)", "[proto][deth]") {
  const sroce_deth d{0x80010000, 0x000abc};
  Bytes p(SROCE_DETH_LEN, 0xee);
  sroce_deth_write(p.data(), &d);
  const Bytes want{0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x0a, 0xbc};
  CHECK(p == want);
  // The reserved byte is ignored on read.
  p[4] = 0x5a;
  sroce_deth b{};
  sroce_deth_read(p.data(), &b);
  CHECK(b.qkey == d.qkey);
  CHECK(b.sqpn == d.sqpn);
}

TEST_CASE("random header round trips", "[proto][roundtrip]") {
  std::mt19937_64 rng(0x5eed);
  for (int i = 0; i < 2000; i++) {
    const uint64_t r1 = rng(), r2 = rng(), r3 = rng(), r4 = rng();
    sroce_bth bth{};
    bth.opcode = (uint8_t)r1;
    bth.se = r1 & 0x100;
    bth.mig = r1 & 0x200;
    bth.pad = (r1 >> 10) & 3;
    bth.tver = (r1 >> 12) & 15;
    bth.pkey = (uint16_t)(r1 >> 16);
    bth.resv8a = (uint8_t)(r1 >> 32);
    bth.dqpn = (uint32_t)(r2 & 0xffffff);
    bth.ack_req = r2 & (1ull << 30);
    bth.psn = (uint32_t)(r2 >> 32) & 0xffffff;
    std::array<uint8_t, SROCE_BTH_LEN> p{};
    sroce_bth_write(p.data(), &bth);
    sroce_bth b{};
    sroce_bth_read(p.data(), &b);
    REQUIRE(b.opcode == bth.opcode);
    REQUIRE(b.se == bth.se);
    REQUIRE(b.mig == bth.mig);
    REQUIRE(b.pad == bth.pad);
    REQUIRE(b.tver == bth.tver);
    REQUIRE(b.pkey == bth.pkey);
    REQUIRE(b.resv8a == bth.resv8a);
    REQUIRE(b.dqpn == bth.dqpn);
    REQUIRE(b.ack_req == bth.ack_req);
    REQUIRE(b.psn == bth.psn);

    const sroce_atmeth at{r1, (uint32_t)r2, r3, r4};
    std::array<uint8_t, SROCE_ATMETH_LEN> q{};
    sroce_atmeth_write(q.data(), &at);
    sroce_atmeth at2{};
    sroce_atmeth_read(q.data(), &at2);
    REQUIRE(at2.va == at.va);
    REQUIRE(at2.rkey == at.rkey);
    REQUIRE(at2.swap_add == at.swap_add);
    REQUIRE(at2.compare == at.compare);

    const sroce_reth re{r3, (uint32_t)(r4 >> 32), (uint32_t)r4};
    std::array<uint8_t, SROCE_RETH_LEN> s{};
    sroce_reth_write(s.data(), &re);
    sroce_reth re2{};
    sroce_reth_read(s.data(), &re2);
    REQUIRE(re2.va == re.va);
    REQUIRE(re2.rkey == re.rkey);
    REQUIRE(re2.dma_len == re.dma_len);

    const sroce_aeth ae{(uint8_t)r4, (uint32_t)(r3 & 0xffffff)};
    std::array<uint8_t, SROCE_AETH_LEN> t{};
    sroce_aeth_write(t.data(), &ae);
    sroce_aeth ae2{};
    sroce_aeth_read(t.data(), &ae2);
    REQUIRE(ae2.syndrome == ae.syndrome);
    REQUIRE(ae2.msn == ae.msn);

    const sroce_deth de{(uint32_t)r1, (uint32_t)(r2 >> 40)};
    std::array<uint8_t, SROCE_DETH_LEN> u{};
    sroce_deth_write(u.data(), &de);
    sroce_deth de2{};
    sroce_deth_read(u.data(), &de2);
    REQUIRE(de2.qkey == de.qkey);
    REQUIRE(de2.sqpn == de.sqpn);
  }
}

TEST_CASE("big-endian helpers", "[proto][be]") {
  std::array<uint8_t, 8> p{};
  sroce_put_be64(p.data(), 0x0102030405060708ull);
  CHECK(p == std::array<uint8_t, 8>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(sroce_get_be64(p.data()) == 0x0102030405060708ull);
  CHECK(sroce_get_be32(p.data() + 4) == 0x05060708u);
  CHECK(sroce_get_be24(p.data() + 1) == 0x020304u);
  CHECK(sroce_get_be16(p.data() + 6) == 0x0708u);
  sroce_put_be24(p.data(), 0xfffefd);
  CHECK(p[0] == 0xff);
  CHECK(p[1] == 0xfe);
  CHECK(p[2] == 0xfd);
  CHECK(p[3] == 4);  // untouched
}

// --- PSN arithmetic (IBA 9.7.1: 24-bit, modular) --------------------------

TEST_CASE("PSN add wraps at 2^24 in both directions", "[proto][psn]") {
  CHECK(sroce_psn_add(0xffffff, 1) == 0);
  CHECK(sroce_psn_add(0xfffffe, 5) == 3);
  CHECK(sroce_psn_add(0, -1) == 0xffffff);
  CHECK(sroce_psn_add(2, -5) == 0xfffffd);
  CHECK(sroce_psn_add(0x123456, 0) == 0x123456);
  CHECK(sroce_psn_add(0x7fffff, 1) == 0x800000);
  CHECK(sroce_psn_add(0, 0x7fffff) == 0x7fffff);
  CHECK(sroce_psn_add(0x800000, 0x800000) == 0);
}

TEST_CASE("PSN diff is signed modulo 2^24", "[proto][psn]") {
  CHECK(sroce_psn_diff(0, 0xffffff) == 1);
  CHECK(sroce_psn_diff(0xffffff, 0) == -1);
  CHECK(sroce_psn_diff(5, 0xfffffb) == 10);
  CHECK(sroce_psn_diff(0xfffffb, 5) == -10);
  CHECK(sroce_psn_diff(0x7fffff, 0) == 0x7fffff);
  CHECK(sroce_psn_diff(0x800000, 0) == -0x800000);  // the ambiguous half-way point
  CHECK(sroce_psn_diff(0x800001, 0) == -0x7fffff);
  CHECK(sroce_psn_before(0xffffff, 0));
  CHECK(sroce_psn_after(0, 0xffffff));
  CHECK_FALSE(sroce_psn_before(7, 7));
  CHECK_FALSE(sroce_psn_after(7, 7));
  // Bits above 24 are ignored.
  CHECK(sroce_psn_diff(0x1000005, 3) == 2);
}

TEST_CASE("PSN diff inverts add for every offset near the wrap", "[proto][psn]") {
  const uint32_t bases[] = {0, 1, 0x7fffff, 0x800000, 0xfffff0, 0xffffff};
  for (uint32_t base : bases) {
    for (int32_t d = -300; d <= 300; d++) {
      const uint32_t q = sroce_psn_add(base, d);
      REQUIRE(q <= SROCE_PSN_MASK);
      REQUIRE(sroce_psn_diff(q, base) == d);
      REQUIRE(sroce_psn_before(q, base) == (d < 0));
      REQUIRE(sroce_psn_after(q, base) == (d > 0));
    }
    for (int32_t d : {0x7ffffe, 0x7fffff, -0x7fffff, -0x800000}) {
      REQUIRE(sroce_psn_diff(sroce_psn_add(base, d), base) == d);
    }
  }
}

}  // namespace
