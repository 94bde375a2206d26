// The INT shim, hop records and ACK echo (proto/int.h; docs/wire.md, "INT"):
// byte layout, round trips, the push a switch does, and every rejection of
// the length-checked parsers.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "proto/int.h"

namespace {

sroce_int_hop sample_hop(uint32_t i) {
  sroce_int_hop h{};
  h.node_port = 0x00070000u | i;
  h.flags = (i & 1) ? SROCE_INT_HOP_F_SB : 0;
  h.link_mbps = 400'000;
  h.qlen = 123'456 + i;
  h.ts_ps = 0xabcdef012345ull + i;
  h.tx_bytes = 0x0000123456789aull * (i + 1);
  return h;
}

// An empty shim in front of a minimal 32-byte RoCE packet, in a buffer with
// room for `room` records.
std::vector<uint8_t> shimmed(size_t room, size_t roce_len = 32) {
  std::vector<uint8_t> v(SROCE_INT_SHIM_LEN + roce_len + room * SROCE_INT_HOP_LEN, 0);
  sroce_int_shim_write(v.data(), SROCE_INT_MAX_HOPS);
  for (size_t i = 0; i < roce_len; ++i) v[SROCE_INT_SHIM_LEN + i] = static_cast<uint8_t>(0x40 + i);
  return v;
}

}  // namespace

TEST_CASE("int: hop record layout and round trip", "[int]") {
  const sroce_int_hop h = sample_hop(3);
  uint8_t b[SROCE_INT_HOP_LEN];
  sroce_int_hop_write(b, &h);
  // Byte layout of docs/wire.md: node_port, flags, link Mbit/s, qlen, ts, tx.
  CHECK(b[0] == 0x00);
  CHECK(b[1] == 0x07);
  CHECK(b[3] == 0x03);
  CHECK(b[4] == SROCE_INT_HOP_F_SB);
  CHECK(sroce_get_be24(b + 5) == 400'000);
  CHECK(sroce_get_be32(b + 8) == 123'459);
  CHECK(b[12] == 0xab);
  CHECK(b[17] == 0x48);
  sroce_int_hop r;
  sroce_int_hop_read(b, &r);
  CHECK(r.node_port == h.node_port);
  CHECK(r.flags == h.flags);
  CHECK(r.link_mbps == h.link_mbps);
  CHECK(r.qlen == h.qlen);
  CHECK(r.ts_ps == h.ts_ps);
  CHECK(r.tx_bytes == h.tx_bytes);
  // Counters keep their low 48 bits; the rate its low 24.
  sroce_int_hop big = h;
  big.ts_ps = 0xff0000000000001ull;
  big.tx_bytes = 0x1000000000002ull;
  big.link_mbps = 0x1234567;
  sroce_int_hop_write(b, &big);
  sroce_int_hop_read(b, &r);
  CHECK(r.ts_ps == 1);
  CHECK(r.tx_bytes == 2);
  CHECK(r.link_mbps == 0x234567);
}

TEST_CASE("int: the source's shim, pushes by transit hops, parse", "[int]") {
  auto v = shimmed(3);
  size_t len = v.size() - 3 * SROCE_INT_HOP_LEN;
  CHECK(v[0] == SROCE_INT_TYPE);
  CHECK(v[1] == 0x10);  // version 1, no flags
  CHECK(v[2] == 6);
  CHECK(v[3] == SROCE_INT_MAX_HOPS);
  sroce_int_shim s{};
  REQUIRE(sroce_int_shim_parse(v.data(), len, &s) == SROCE_INT_OK);
  CHECK(s.count == 0);
  CHECK(sroce_int_shim_bytes(&s) == SROCE_INT_SHIM_LEN);
  for (uint32_t i = 0; i < 3; ++i) {
    const sroce_int_hop h = sample_hop(i);
    REQUIRE(sroce_int_push(v.data(), &len, v.size(), &h) == 1);
  }
  CHECK(len == v.size());
  REQUIRE(sroce_int_shim_parse(v.data(), len, &s) == SROCE_INT_OK);
  CHECK(s.count == 3);
  CHECK(s.remaining == SROCE_INT_MAX_HOPS - 3);
  CHECK(s.flags == 0);
  // Newest first: record 0 is the third hop.
  for (uint32_t i = 0; i < 3; ++i) {
    sroce_int_hop r;
    sroce_int_hop_read(sroce_int_shim_hop(v.data(), i), &r);
    CHECK(r.node_port == sample_hop(2 - i).node_port);
    CHECK(r.tx_bytes == sample_hop(2 - i).tx_bytes);
  }
  // The RoCE packet behind the records is intact.
  for (size_t i = 0; i < 32; ++i) CHECK(v[sroce_int_shim_bytes(&s) + i] == 0x40 + i);
  // No room left: nothing pushed, E set, length unchanged.
  const sroce_int_hop h = sample_hop(9);
  CHECK(sroce_int_push(v.data(), &len, v.size(), &h) == 0);
  CHECK(len == v.size());
  REQUIRE(sroce_int_shim_parse(v.data(), len, &s) == SROCE_INT_OK);
  CHECK(s.count == 3);
  CHECK(s.flags == SROCE_INT_F_EXCEEDED);
}

TEST_CASE("int: remaining hop count 0 stops pushes; no shim, no push", "[int]") {
  auto v = shimmed(2);
  size_t len = v.size() - 2 * SROCE_INT_HOP_LEN;
  v[3] = 1;
  const sroce_int_hop h = sample_hop(0);
  CHECK(sroce_int_push(v.data(), &len, v.size(), &h) == 1);
  CHECK(sroce_int_push(v.data(), &len, v.size(), &h) == 0);
  sroce_int_shim s{};
  REQUIRE(sroce_int_shim_parse(v.data(), len, &s) == SROCE_INT_OK);
  CHECK(s.count == 1);
  CHECK(s.remaining == 0);
  CHECK((s.flags & SROCE_INT_F_EXCEEDED) != 0);
  // A plain RoCEv2 packet (BTH first) is not touched.
  std::vector<uint8_t> plain(40, 0x11);
  size_t plen = plain.size();
  CHECK_FALSE(sroce_int_present(plain.data(), plen));
  CHECK(sroce_int_push(plain.data(), &plen, plain.size() + 24, &h) == -1);
  CHECK(plen == plain.size());
}

TEST_CASE("int: the shim parser rejects short, unknown, oversized and truncated shims", "[int]") {
  auto v = shimmed(0);
  sroce_int_shim s{};
  CHECK(sroce_int_shim_parse(v.data(), 7, &s) == SROCE_INT_SHORT);
  CHECK(sroce_int_shim_parse(v.data(), 0, &s) == SROCE_INT_SHORT);
  auto bad = v;
  bad[0] = 0xe2;
  CHECK(sroce_int_shim_parse(bad.data(), bad.size(), &s) == SROCE_INT_BAD_TYPE);
  bad = v;
  bad[1] = 0x20;
  CHECK(sroce_int_shim_parse(bad.data(), bad.size(), &s) == SROCE_INT_BAD_VERSION);
  bad = v;
  bad[2] = 2;
  CHECK(sroce_int_shim_parse(bad.data(), bad.size(), &s) == SROCE_INT_BAD_HOP_LEN);
  // Oversized hop counts: count above the maximum, or count + remaining.
  bad = v;
  bad[3] = 0;
  bad[4] = SROCE_INT_MAX_HOPS + 1;
  CHECK(sroce_int_shim_parse(bad.data(), bad.size(), &s) == SROCE_INT_TOO_MANY);
  bad[4] = 255;
  CHECK(sroce_int_shim_parse(bad.data(), bad.size(), &s) == SROCE_INT_TOO_MANY);
  bad = v;
  bad[4] = 1;  // remaining is 8
  CHECK(sroce_int_shim_parse(bad.data(), bad.size(), &s) == SROCE_INT_TOO_MANY);
  // Truncated: records announced that (with a BTH and ICRC) do not fit.
  bad = v;
  bad[3] = 0;
  bad[4] = 1;  // 8 + 24 + 16 > 8 + 32
  CHECK(sroce_int_shim_parse(bad.data(), bad.size(), &s) == SROCE_INT_TRUNCATED);
  bad[4] = 0;
  CHECK(sroce_int_shim_parse(bad.data(), SROCE_INT_SHIM_LEN + 15, &s) == SROCE_INT_TRUNCATED);
  CHECK(sroce_int_shim_parse(bad.data(), SROCE_INT_SHIM_LEN + 16, &s) == SROCE_INT_OK);
}

TEST_CASE("int: the echo footer round trip and its rejections", "[int]") {
  // BTH + AETH (16) | 2 records | footer | ICRC
  std::vector<uint8_t> ack(16 + sroce_int_echo_bytes(2) + 4, 0);
  uint8_t* end = ack.data() + ack.size() - 4;
  const size_t avail = ack.size() - 16 - 4;
  for (uint32_t i = 0; i < 2; ++i) {
    const sroce_int_hop h = sample_hop(i);
    sroce_int_hop_write(ack.data() + 16 + i * SROCE_INT_HOP_LEN, &h);
  }
  sroce_int_echo_footer_write(end - 4, 2, SROCE_INT_F_EXCEEDED);
  uint8_t n = 0, f = 0;
  REQUIRE(sroce_int_echo_parse(end, avail, &n, &f) == SROCE_INT_OK);
  CHECK(n == 2);
  CHECK(f == SROCE_INT_F_EXCEEDED);
  sroce_int_hop r;
  sroce_int_hop_read(end - sroce_int_echo_bytes(n) + SROCE_INT_HOP_LEN, &r);
  CHECK(r.qlen == sample_hop(1).qlen);
  CHECK(sroce_int_echo_parse(end, 3, &n, &f) == SROCE_INT_SHORT);
  CHECK(sroce_int_echo_parse(end, avail - 1, &n, &f) == SROCE_INT_TRUNCATED);
  end[-4] = 0;
  CHECK(sroce_int_echo_parse(end, avail, &n, &f) == SROCE_INT_TOO_MANY);
  end[-4] = SROCE_INT_MAX_HOPS + 1;
  CHECK(sroce_int_echo_parse(end, avail, &n, &f) == SROCE_INT_TOO_MANY);
  end[-4] = 3;
  CHECK(sroce_int_echo_parse(end, avail, &n, &f) == SROCE_INT_TRUNCATED);
  end[-4] = 2;
  end[-3] = 5;
  CHECK(sroce_int_echo_parse(end, avail, &n, &f) == SROCE_INT_BAD_HOP_LEN);
  end[-3] = SROCE_INT_HOP_WORDS;
  end[-1] = 0x11;
  CHECK(sroce_int_echo_parse(end, avail, &n, &f) == SROCE_INT_BAD_TYPE);
}
