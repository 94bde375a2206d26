// libFuzzer target: sroce_parse on arbitrary RoCEv2 UDP payloads.
// Invariants: every result is a known reason; a successful parse describes the
// buffer exactly (headers + payload + pad + ICRC == len, payload inside it);
// writing the parsed headers back reproduces the input bytes (up to the
// reserved bits writers clear), and parsing that again gives the same view.
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "proto/icrc.h"
#include "proto/packet.h"

namespace {

// Rebuild a packet from its parsed view with the proto writers.
std::vector<uint8_t> rebuild(const sroce_pkt& k, const uint8_t* orig, size_t len) {
  std::vector<uint8_t> out(len, 0);
  uint8_t* p = out.data();
  sroce_bth_write(p, &k.bth);
  size_t off = SROCE_BTH_LEN;
  const uint32_t f = k.op->flags;
  if (f & SROCE_HAS_DETH) {
    sroce_deth_write(p + off, &k.deth);
    off += SROCE_DETH_LEN;
  }
  if (f & SROCE_HAS_RETH) {
    sroce_reth_write(p + off, &k.reth);
    off += SROCE_RETH_LEN;
  }
  if (f & SROCE_HAS_ATMETH) {
    sroce_atmeth_write(p + off, &k.atmeth);
    off += SROCE_ATMETH_LEN;
  }
  if (f & SROCE_HAS_AETH) {
    sroce_aeth_write(p + off, &k.aeth);
    off += SROCE_AETH_LEN;
  }
  if (f & SROCE_HAS_ATMACK) {
    sroce_put_be64(p + off, k.atmack);
    off += SROCE_ATMACK_LEN;
  }
  if (f & SROCE_HAS_IMMDT) {
    sroce_put_be32(p + off, k.imm);
    off += SROCE_IMMDT_LEN;
  }
  if (f & SROCE_HAS_IETH) {
    sroce_put_be32(p + off, k.ieth_rkey);
    off += SROCE_IETH_LEN;
  }
  // A CNP's reserved bytes are skipped by the parser; carry them over.
  for (; off < k.op->hdr_len; off++) p[off] = orig[off];
  FUZZ_CHECK(k.payload == orig + off);
  for (uint32_t i = 0; i < k.payload_len; i++) p[off + i] = k.payload[i];
  off += k.payload_len;
  for (uint8_t i = 0; i < k.bth.pad; i++)  // pad bytes are not interpreted
    p[off + i] = orig[off + i];
  off += k.bth.pad;
  FUZZ_CHECK(off + SROCE_ICRC_LEN == len);
  sroce_icrc_put(p + off, k.icrc);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
  sroce_pkt k;
  const sroce_parse_err e = sroce_parse(data, len, &k);
  FUZZ_CHECK(e >= SROCE_PARSE_OK && e < SROCE_PARSE_ERR_COUNT);
  FUZZ_CHECK(sroce_parse_err_name(e) != nullptr);
  if (len < SROCE_BTH_LEN + SROCE_ICRC_LEN) FUZZ_CHECK(e == SROCE_PARSE_SHORT);
  if (e != SROCE_PARSE_OK) return 0;

  // The view describes the buffer exactly.
  FUZZ_CHECK(k.op != nullptr && k.op->name != nullptr);
  FUZZ_CHECK(k.op == sroce_opinfo(data[0]));
  FUZZ_CHECK(k.bth.tver == 0);
  FUZZ_CHECK(k.payload >= data && k.payload + k.payload_len <= data + len);
  FUZZ_CHECK(k.op->hdr_len + k.payload_len + k.bth.pad + SROCE_ICRC_LEN == len);
  FUZZ_CHECK((k.payload_len + k.bth.pad) % 4 == 0);
  if (!(k.op->flags & SROCE_HAS_PAYLOAD)) FUZZ_CHECK(k.payload_len == 0 && k.bth.pad == 0);
  FUZZ_CHECK(k.icrc == sroce_icrc_get(data + len - SROCE_ICRC_LEN));
  const unsigned svc = data[0] & SROCE_TRANSPORT_MASK;
  FUZZ_CHECK(sroce_opcode_valid_for(data[0], (sroce_transport)svc));

  // parse -> write -> parse.
  std::vector<uint8_t> again = rebuild(k, data, len);
  // Writers send reserved fields as 0: BTH Resv7 (byte 8 low bits) and the
  // DETH's Resv8. Everything else must come back bit for bit.
  std::vector<uint8_t> want(data, data + len);
  want[8] &= 0x80;
  if (k.op->flags & SROCE_HAS_DETH) want[SROCE_BTH_LEN + 4] = 0;
  FUZZ_CHECK(again == want);

  sroce_pkt k2;
  FUZZ_CHECK(sroce_parse(again.data(), again.size(), &k2) == SROCE_PARSE_OK);
  FUZZ_CHECK(k2.op == k.op);
  FUZZ_CHECK(k2.bth.psn == k.bth.psn && k2.bth.dqpn == k.bth.dqpn);
  FUZZ_CHECK(k2.bth.pkey == k.bth.pkey && k2.bth.resv8a == k.bth.resv8a);
  FUZZ_CHECK(k2.reth.va == k.reth.va && k2.reth.rkey == k.reth.rkey &&
             k2.reth.dma_len == k.reth.dma_len);
  FUZZ_CHECK(k2.aeth.syndrome == k.aeth.syndrome && k2.aeth.msn == k.aeth.msn);
  FUZZ_CHECK(k2.atmeth.swap_add == k.atmeth.swap_add && k2.atmeth.compare == k.atmeth.compare);
  FUZZ_CHECK(k2.atmack == k.atmack && k2.imm == k.imm && k2.ieth_rkey == k.ieth_rkey);
  FUZZ_CHECK(k2.deth.qkey == k.deth.qkey && k2.deth.sqpn == k.deth.sqpn);
  FUZZ_CHECK(k2.payload_len == k.payload_len && k2.icrc == k.icrc);
  return 0;
}
