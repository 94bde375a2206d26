// libFuzzer target: the header readers and writers (BTH, RETH, AETH, AtomicETH,
// DETH) and 24-bit PSN arithmetic on arbitrary bytes.
// Invariants: read -> write reproduces the bytes (reserved bits cleared),
// write -> read reproduces the fields, and PSN add/diff are inverse.
#include <cstdint>
#include <cstring>

#include "fuzz_check.h"
#include "proto/packet.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
  if (len < SROCE_MAX_HDR_LEN) return 0;
  uint8_t out[SROCE_MAX_HDR_LEN];

  sroce_bth b;
  sroce_bth_read(data, &b);
  FUZZ_CHECK(b.pad <= 3 && b.tver <= 15 && b.dqpn <= 0xffffff && b.psn <= 0xffffff);
  sroce_bth_write(out, &b);
  for (int i = 0; i < SROCE_BTH_LEN; i++)
    FUZZ_CHECK(out[i] == (i == 8 ? (data[8] & 0x80) : data[i]));
  sroce_bth b2;
  sroce_bth_read(out, &b2);
  FUZZ_CHECK(b2.opcode == b.opcode && b2.se == b.se && b2.mig == b.mig && b2.pad == b.pad &&
             b2.tver == b.tver && b2.pkey == b.pkey && b2.resv8a == b.resv8a && b2.dqpn == b.dqpn &&
             b2.ack_req == b.ack_req && b2.psn == b.psn);

  sroce_reth r;
  sroce_reth_read(data, &r);
  sroce_reth_write(out, &r);
  FUZZ_CHECK(std::memcmp(out, data, SROCE_RETH_LEN) == 0);

  sroce_aeth a;
  sroce_aeth_read(data, &a);
  FUZZ_CHECK(a.msn <= 0xffffff);
  sroce_aeth_write(out, &a);
  FUZZ_CHECK(std::memcmp(out, data, SROCE_AETH_LEN) == 0);
  FUZZ_CHECK(sroce_aeth_syndrome(sroce_aeth_type(a.syndrome), sroce_aeth_value(a.syndrome)) ==
             (a.syndrome & 0x7f));

  sroce_atmeth t;
  sroce_atmeth_read(data, &t);
  sroce_atmeth_write(out, &t);
  FUZZ_CHECK(std::memcmp(out, data, SROCE_ATMETH_LEN) == 0);

  sroce_deth d;
  sroce_deth_read(data, &d);
  FUZZ_CHECK(d.sqpn <= 0xffffff);
  sroce_deth_write(out, &d);
  FUZZ_CHECK(std::memcmp(out, data, 4) == 0 && out[4] == 0 &&
             std::memcmp(out + 5, data + 5, 3) == 0);

  // PSN arithmetic with fuzzed operands (IBA 9.7.1, 24-bit modular).
  const uint32_t p = sroce_get_be24(data + 1);
  int32_t delta = (int32_t)(sroce_get_be32(data + 4) << 8) >> 8;  // [-2^23, 2^23)
  const uint32_t q = sroce_psn_add(p, delta);
  FUZZ_CHECK(q <= SROCE_PSN_MASK);
  FUZZ_CHECK(sroce_psn_diff(q, p) == delta);
  FUZZ_CHECK(sroce_psn_diff(p, q) == (delta == -0x800000 ? -0x800000 : -delta));
  FUZZ_CHECK(sroce_psn_before(q, p) == (delta < 0));
  FUZZ_CHECK(sroce_psn_after(q, p) == (delta > 0));
  return 0;
}
