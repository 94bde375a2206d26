// libFuzzer target: the INT shim and echo parsers and a switch's push
// (proto/int.h) on arbitrary bytes.
// Invariants: a parse never reads outside the buffer (ASan) and a success
// describes records that fit, leaving a BTH and an ICRC behind them; a push
// on a valid shim adds exactly one record (or none, with E set) and leaves
// the bytes behind the shim as they were; a record read -> write -> read
// reproduces its fields.
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "proto/int.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
  // Shim parse, then a push into a copy with room for one more record.
  sroce_int_shim s{};
  if (sroce_int_shim_parse(data, len, &s) == SROCE_INT_OK) {
    const size_t shim = sroce_int_shim_bytes(&s);
    FUZZ_CHECK(s.count <= SROCE_INT_MAX_HOPS);
    FUZZ_CHECK(s.count + s.remaining <= SROCE_INT_MAX_HOPS);
    FUZZ_CHECK(shim + SROCE_BTH_LEN + SROCE_ICRC_LEN <= len);
    for (unsigned i = 0; i < s.count; ++i) {
      sroce_int_hop h, h2;
      uint8_t b[SROCE_INT_HOP_LEN];
      sroce_int_hop_read(sroce_int_shim_hop(data, i), &h);
      sroce_int_hop_write(b, &h);
      FUZZ_CHECK(std::memcmp(b, sroce_int_shim_hop(data, i), SROCE_INT_HOP_LEN) == 0);
      sroce_int_hop_read(b, &h2);
      FUZZ_CHECK(h2.ts_ps == h.ts_ps && h2.tx_bytes == h.tx_bytes && h2.qlen == h.qlen);
    }
    std::vector<uint8_t> v(data, data + len);
    v.resize(len + SROCE_INT_HOP_LEN);
    size_t n = len;
    sroce_int_hop h{};
    h.node_port = 0x10002;
    const int r = sroce_int_push(v.data(), &n, v.size(), &h);
    FUZZ_CHECK(r == 0 || r == 1);
    if (r == 1) {
      FUZZ_CHECK(n == len + SROCE_INT_HOP_LEN);
      FUZZ_CHECK(std::memcmp(v.data() + SROCE_INT_SHIM_LEN + SROCE_INT_HOP_LEN, data + SROCE_INT_SHIM_LEN,
                             len - SROCE_INT_SHIM_LEN) == 0);
      sroce_int_shim s2;
      FUZZ_CHECK(sroce_int_shim_parse(v.data(), n, &s2) == SROCE_INT_OK);
      FUZZ_CHECK(s2.count == s.count + 1 && s2.remaining == s.remaining - 1);
    } else {
      FUZZ_CHECK(n == len && s.remaining == 0);
      FUZZ_CHECK((v[1] & SROCE_INT_F_EXCEEDED) != 0);
    }
  }
  // Echo parse from the end, as an ACK's receiver does (before the ICRC).
  if (len >= SROCE_ICRC_LEN) {
    uint8_t count = 0, flags = 0;
    const size_t avail = len - SROCE_ICRC_LEN;
    if (sroce_int_echo_parse(data + avail, avail, &count, &flags) == SROCE_INT_OK) {
      FUZZ_CHECK(count >= 1 && count <= SROCE_INT_MAX_HOPS);
      FUZZ_CHECK(sroce_int_echo_bytes(count) <= avail);
    }
  }
  return 0;
}
