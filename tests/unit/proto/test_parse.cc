// sroce_parse: every opcode accepted with its headers and payload, every rejection
// with its typed reason, and no read outside the buffer (ASan checks each
// truncation of every packet: buffers are exactly the packet's size).
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proto/icrc.h"
#include "proto/packet.h"

namespace {

using Bytes = std::vector<uint8_t>;

// A RoCEv2 UDP payload: BTH, extension headers filled with a byte pattern,
// payload, pad (PadCnt from the payload length unless forced), ICRC 0x11223344.
Bytes make_packet(uint8_t opcode, size_t payload, int pad_override = -1, uint8_t tver = 0) {
  const struct sroce_opinfo* op = sroce_opinfo(opcode);
  const size_t hdr = op->name ? op->hdr_len : (size_t)SROCE_BTH_LEN;
  const uint8_t pad = pad_override >= 0 ? (uint8_t)pad_override : (uint8_t)(-payload & 3);
  Bytes p(hdr + payload + pad + SROCE_ICRC_LEN);
  for (size_t i = SROCE_BTH_LEN; i < hdr; i++) p[i] = (uint8_t)(0xa0 + i);
  for (size_t i = 0; i < payload; i++) p[hdr + i] = (uint8_t)i;
  sroce_bth bth{};
  bth.opcode = opcode;
  bth.pad = pad;
  bth.tver = tver;
  bth.pkey = 0xffff;
  bth.dqpn = 0x000102;
  bth.psn = 0xfffffe;
  sroce_bth_write(p.data(), &bth);
  sroce_icrc_put(p.data() + p.size() - 4, 0x11223344);
  return p;
}

// Parse from an exact-size heap copy so ASan sees any over-read.
sroce_parse_err parse_exact(const Bytes& b, sroce_pkt* out) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[b.size() ? b.size() : 1]);
  for (size_t i = 0; i < b.size(); i++) copy[i] = b[i];
  const sroce_parse_err e = sroce_parse(copy.get(), b.size(), out);
  if (e == SROCE_PARSE_OK) {
    // Payload views must land inside the buffer; rebase them onto b.
    REQUIRE(out->payload >= copy.get());
    REQUIRE(out->payload + out->payload_len <= copy.get() + b.size());
    out->payload = b.data() + (out->payload - copy.get());
  }
  return e;
}

std::vector<uint8_t> all_valid_opcodes() {
  std::vector<uint8_t> v;
  for (unsigned o = 0; o < 256; o++)
    if (sroce_opinfo((uint8_t)o)->name) v.push_back((uint8_t)o);
  return v;
}

TEST_CASE("parse accepts every opcode with legal payload lengths", "[proto][parse]") {
  for (uint8_t opc : all_valid_opcodes()) {
    const struct sroce_opinfo* op = sroce_opinfo(opc);
    const bool has_payload = op->flags & SROCE_HAS_PAYLOAD;
    const bool needs_payload =
        (op->flags & (SROCE_IS_FIRST | SROCE_IS_MIDDLE)) && !(op->flags & SROCE_IS_LAST);
    for (size_t n = 0; n <= (has_payload ? 9u : 0u); n++) {
      if (needs_payload && n == 0) continue;
      INFO(op->name << " payload " << n);
      const Bytes p = make_packet(opc, n);
      sroce_pkt pkt{};
      REQUIRE(parse_exact(p, &pkt) == SROCE_PARSE_OK);
      CHECK(pkt.op == op);
      CHECK(pkt.bth.opcode == opc);
      CHECK(pkt.bth.dqpn == 0x102);
      CHECK(pkt.bth.psn == 0xfffffe);
      CHECK(pkt.payload == p.data() + op->hdr_len);
      CHECK(pkt.payload_len == n);
      CHECK(pkt.icrc == 0x11223344);
      for (size_t i = 0; i < n; i++) REQUIRE(pkt.payload[i] == i);
    }
  }
}

TEST_CASE("parse extracts every extension header", "[proto][parse]") {
  sroce_pkt pkt{};

  SECTION("RDMA WRITE ONLY with immediate: RETH then ImmDt") {
    Bytes p = make_packet(SROCE_OP_WRITE_ONLY_IMM, 5);
    const sroce_reth r{0x1122334455667788ull, 0xcafe0001, 5};
    sroce_reth_write(p.data() + 12, &r);
    sroce_put_be32(p.data() + 28, 0xfeedf00d);
    REQUIRE(parse_exact(p, &pkt) == SROCE_PARSE_OK);
    CHECK(pkt.reth.va == r.va);
    CHECK(pkt.reth.rkey == r.rkey);
    CHECK(pkt.reth.dma_len == 5);
    CHECK(pkt.imm == 0xfeedf00d);
    CHECK(pkt.payload_len == 5);
    CHECK(pkt.bth.pad == 3);
  }
  SECTION("UD SEND ONLY with immediate: DETH then ImmDt") {
    Bytes p = make_packet((uint8_t)(SROCE_TRANSPORT_UD | (unsigned)SROCE_OP_SEND_ONLY_IMM), 8);
    const sroce_deth d{0x11111111, 0x00abcd};
    sroce_deth_write(p.data() + 12, &d);
    sroce_put_be32(p.data() + 20, 0x01020304);
    REQUIRE(parse_exact(p, &pkt) == SROCE_PARSE_OK);
    CHECK(pkt.deth.qkey == 0x11111111);
    CHECK(pkt.deth.sqpn == 0xabcd);
    CHECK(pkt.imm == 0x01020304);
    CHECK(pkt.payload_len == 8);
  }
  SECTION("ATOMIC ACKNOWLEDGE: AETH then AtomicAckETH") {
    Bytes p = make_packet(SROCE_OP_ATOMIC_ACK, 0);
    const sroce_aeth a{0x1f, 0x000777};
    sroce_aeth_write(p.data() + 12, &a);
    sroce_put_be64(p.data() + 16, 0x0123456789abcdefull);
    REQUIRE(parse_exact(p, &pkt) == SROCE_PARSE_OK);
    CHECK(pkt.aeth.syndrome == 0x1f);
    CHECK(pkt.aeth.msn == 0x777);
    CHECK(pkt.atmack == 0x0123456789abcdefull);
    CHECK(pkt.payload_len == 0);
  }
  SECTION("CmpSwap: AtomicETH") {
    Bytes p = make_packet(SROCE_OP_CMP_SWAP, 0);
    const sroce_atmeth a{0x1000, 0x42, 7, 9};
    sroce_atmeth_write(p.data() + 12, &a);
    REQUIRE(parse_exact(p, &pkt) == SROCE_PARSE_OK);
    CHECK(pkt.atmeth.va == 0x1000);
    CHECK(pkt.atmeth.rkey == 0x42);
    CHECK(pkt.atmeth.swap_add == 7);
    CHECK(pkt.atmeth.compare == 9);
  }
  SECTION("SEND ONLY with invalidate: IETH") {
    Bytes p = make_packet(SROCE_OP_SEND_ONLY_INV, 4);
    sroce_put_be32(p.data() + 12, 0x0badf00d);
    REQUIRE(parse_exact(p, &pkt) == SROCE_PARSE_OK);
    CHECK(pkt.ieth_rkey == 0x0badf00d);
    CHECK(pkt.payload_len == 4);
  }
  SECTION("READ response middle carries no AETH") {
    Bytes p = make_packet(SROCE_OP_READ_RESP_MIDDLE, 256);
    REQUIRE(parse_exact(p, &pkt) == SROCE_PARSE_OK);
    CHECK(pkt.payload == p.data() + 12);
    CHECK(pkt.payload_len == 256);
  }
}

TEST_CASE("CNP: BTH, 16 reserved bytes, ICRC (Annex A17.9.3)", "[proto][parse][cnp]") {
  Bytes p(32, 0xee);
  CHECK(sroce_cnp_write(p.data(), 0x0000d2, 0xffff) == 28);
  sroce_icrc_put(p.data() + 28, 0x81ad2de4);
  // The layout of the CNP example Mellanox publishes for Annex A17.9.3.
  const Bytes want{0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x00, 0xd2, 0,    0,   0,
                   0,    0,    0,    0,    0,    0,    0,    0,    0,    0,   0,
                   0,    0,    0,    0,    0,    0,    0xe4, 0x2d, 0xad, 0x81};
  CHECK(p == want);
  sroce_pkt pkt{};
  REQUIRE(parse_exact(p, &pkt) == SROCE_PARSE_OK);
  CHECK(pkt.bth.opcode == SROCE_OP_CNP);
  CHECK(pkt.bth.dqpn == 0xd2);
  CHECK(pkt.bth.resv8a == SROCE_BTH_BECN);
  CHECK(pkt.payload_len == 0);
  CHECK(pkt.icrc == 0x81ad2de4);
  // A CNP without its reserved bytes is truncated; one with data is too long.
  Bytes short_cnp(p.begin(), p.begin() + 12);
  short_cnp.insert(short_cnp.end(), {0, 0, 0, 0});
  CHECK(parse_exact(short_cnp, &pkt) == SROCE_PARSE_TRUNCATED_HDR);
  Bytes long_cnp = p;
  long_cnp.insert(long_cnp.begin() + 28, {1, 2, 3, 4});
  CHECK(parse_exact(long_cnp, &pkt) == SROCE_PARSE_BAD_LENGTH);
}

TEST_CASE("parse rejects with the right reason", "[proto][parse][reject]") {
  sroce_pkt pkt{};

  SECTION("short: less than BTH + ICRC") {
    const Bytes good = make_packet(SROCE_OP_SEND_ONLY, 0);
    REQUIRE(good.size() == 16);
    for (size_t n = 0; n < 16; n++) {
      const Bytes p(good.begin(), good.begin() + n);
      INFO("len " << n);
      CHECK(parse_exact(p, &pkt) == SROCE_PARSE_SHORT);
    }
  }
  SECTION("reserved opcodes, RD opcodes, unknown manufacturer opcodes") {
    for (unsigned o : {0x15u, 0x18u, 0x1fu, 0x2cu, 0x40u, 0x4cu, 0x60u, 0x63u, 0x66u, 0x80u, 0x82u,
                       0xc0u, 0xffu}) {
      INFO("opcode " << o);
      CHECK(parse_exact(make_packet((uint8_t)o, 4), &pkt) == SROCE_PARSE_BAD_OPCODE);
    }
  }
  SECTION("transport version other than 0") {
    for (uint8_t v = 1; v < 16; v++)
      CHECK(parse_exact(make_packet(SROCE_OP_SEND_ONLY, 4, -1, v), &pkt) == SROCE_PARSE_BAD_TVER);
  }
  SECTION("extension headers past the end") {
    for (uint8_t opc : all_valid_opcodes()) {
      const struct sroce_opinfo* op = sroce_opinfo(opc);
      if (op->hdr_len == SROCE_BTH_LEN) continue;
      const Bytes full = make_packet(opc, 0, 0);
      // Drop header bytes, keep a 4-byte "ICRC" at the end.
      for (size_t cut = 1; cut <= size_t(op->hdr_len - SROCE_BTH_LEN); cut++) {
        Bytes p(full.begin(), full.begin() + (op->hdr_len - cut));
        p.insert(p.end(), {0, 0, 0, 0});
        INFO(op->name << " cut " << cut);
        CHECK(parse_exact(p, &pkt) == SROCE_PARSE_TRUNCATED_HDR);
      }
    }
  }
  SECTION("pad larger than the payload") {
    // No data bytes at all, but PadCnt claims 1..3 bytes of pad.
    for (uint8_t pad = 1; pad <= 3; pad++) {
      Bytes p = make_packet(SROCE_OP_SEND_ONLY, 0, 0);
      p[1] |= (uint8_t)(pad << 4);
      CHECK(parse_exact(p, &pkt) == SROCE_PARSE_BAD_PAD);
    }
    // Two data bytes, PadCnt 3.
    Bytes q = make_packet(SROCE_OP_SEND_ONLY, 2, 0);
    q[1] |= 0x30;
    CHECK(parse_exact(q, &pkt) == SROCE_PARSE_BAD_PAD);
  }
  SECTION("pad that does not bring the data to a 4-byte multiple") {
    // 5 bytes of payload need PadCnt 3; 1 and 2 leave the packet misaligned.
    CHECK(parse_exact(make_packet(SROCE_OP_SEND_ONLY, 5, 3), &pkt) == SROCE_PARSE_OK);
    CHECK(parse_exact(make_packet(SROCE_OP_SEND_ONLY, 5, 1), &pkt) == SROCE_PARSE_BAD_PAD);
    CHECK(parse_exact(make_packet(SROCE_OP_SEND_ONLY, 5, 0), &pkt) == SROCE_PARSE_BAD_PAD);
    // 8 bytes need none: PadCnt 1 would say 7 bytes + 1 pad, a misaligned total of 9.
    CHECK(parse_exact(make_packet(SROCE_OP_SEND_ONLY, 8, 1), &pkt) == SROCE_PARSE_BAD_PAD);
    // Payload 7 with PadCnt 1 is consistent.
    REQUIRE(parse_exact(make_packet(SROCE_OP_SEND_ONLY, 7, 1), &pkt) == SROCE_PARSE_OK);
    CHECK(pkt.payload_len == 7);
  }
  SECTION("pad on a header-only opcode") {
    for (uint8_t opc : {SROCE_OP_ACK, SROCE_OP_READ_REQUEST, SROCE_OP_CMP_SWAP, SROCE_OP_ATOMIC_ACK,
                        SROCE_OP_CNP}) {
      Bytes p = make_packet(opc, 0);
      p[1] |= 0x10;  // PadCnt 1
      INFO(sroce_opinfo(opc)->name);
      CHECK(parse_exact(p, &pkt) == SROCE_PARSE_BAD_PAD);
    }
  }
  SECTION("data on a header-only opcode") {
    for (uint8_t opc :
         {SROCE_OP_ACK, SROCE_OP_READ_REQUEST, SROCE_OP_FETCH_ADD, SROCE_OP_ATOMIC_ACK}) {
      INFO(sroce_opinfo(opc)->name);
      CHECK(parse_exact(make_packet(opc, 4, 0), &pkt) == SROCE_PARSE_BAD_LENGTH);
    }
  }
  SECTION("no payload on FIRST and MIDDLE packets") {
    for (uint8_t opc : std::initializer_list<uint8_t>{
             SROCE_OP_SEND_FIRST, SROCE_OP_SEND_MIDDLE, SROCE_OP_WRITE_FIRST, SROCE_OP_WRITE_MIDDLE,
             SROCE_OP_READ_RESP_FIRST, SROCE_OP_READ_RESP_MIDDLE,
             (uint8_t)(SROCE_TRANSPORT_UC | (unsigned)SROCE_OP_SEND_FIRST)}) {
      INFO(sroce_opinfo(opc)->name);
      CHECK(parse_exact(make_packet(opc, 0), &pkt) == SROCE_PARSE_BAD_LENGTH);
    }
    // LAST and ONLY may be empty (a zero-length message).
    for (uint8_t opc : {SROCE_OP_SEND_LAST, SROCE_OP_SEND_ONLY, SROCE_OP_WRITE_ONLY,
                        SROCE_OP_READ_RESP_LAST, SROCE_OP_READ_RESP_ONLY})
      CHECK(parse_exact(make_packet(opc, 0), &pkt) == SROCE_PARSE_OK);
  }
}

TEST_CASE("every truncation and every single-byte corruption stays in bounds",
          "[proto][parse][bounds]") {
  for (uint8_t opc : all_valid_opcodes()) {
    const struct sroce_opinfo* op = sroce_opinfo(opc);
    const Bytes full = make_packet(opc, op->flags & SROCE_HAS_PAYLOAD ? 6 : 0);
    for (size_t n = 0; n <= full.size(); n++) {
      const Bytes p(full.begin(), full.begin() + n);
      sroce_pkt pkt{};
      const sroce_parse_err e = parse_exact(p, &pkt);
      REQUIRE(e < SROCE_PARSE_ERR_COUNT);
      if (n == full.size()) REQUIRE(e == SROCE_PARSE_OK);
      if (e == SROCE_PARSE_OK)
        REQUIRE(pkt.op->hdr_len + pkt.payload_len + pkt.bth.pad + 4 == n);
      else if (n < 16)
        REQUIRE(e == SROCE_PARSE_SHORT);
    }
    for (size_t i = 0; i < 2; i++) {
      for (unsigned v = 0; v < 256; v++) {
        Bytes p = full;
        p[i] = (uint8_t)v;
        sroce_pkt pkt{};
        const sroce_parse_err e = parse_exact(p, &pkt);
        if (e == SROCE_PARSE_OK)
          REQUIRE(pkt.op->hdr_len + pkt.payload_len + pkt.bth.pad + 4 == p.size());
      }
    }
  }
}

TEST_CASE("parse error names are distinct", "[proto][parse]") {
  std::vector<std::string> names;
  for (int e = 0; e < SROCE_PARSE_ERR_COUNT; e++) {
    const char* n = sroce_parse_err_name((sroce_parse_err)e);
    REQUIRE(n != nullptr);
    for (const std::string& o : names) CHECK(o != n);
    names.emplace_back(n);
  }
  CHECK(std::string(sroce_parse_err_name(SROCE_PARSE_BAD_PAD)) == "bad_pad");
  CHECK(std::string(sroce_parse_err_name(SROCE_PARSE_ERR_COUNT)) == "unknown");
}

}  // namespace
