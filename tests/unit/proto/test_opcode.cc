// Every row of the opcode table checked against IBA Vol 1 r1.4 table 38, written
// here a second time from the spec in its own words: the header layout column as
// a list of header names, and the operation as text.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "proto/packet.h"

namespace {

struct Row {
  uint8_t opcode;
  const char* name;
  const char* layout;  // table 38 "packet header layout", extension headers in order
  bool payload;
};

// IBA table 38, RC (000), UC (001), UD (011); RD (010) is not in RoCE. CNP from Annex
// A17.9.3 (its 16 reserved bytes written as "Resv16").
const Row kTable38[] = {
    {0x00, "RC_SEND_FIRST", "BTH", true},
    {0x01, "RC_SEND_MIDDLE", "BTH", true},
    {0x02, "RC_SEND_LAST", "BTH", true},
    {0x03, "RC_SEND_LAST_WITH_IMMEDIATE", "BTH ImmDt", true},
    {0x04, "RC_SEND_ONLY", "BTH", true},
    {0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", "BTH ImmDt", true},
    {0x06, "RC_RDMA_WRITE_FIRST", "BTH RETH", true},
    {0x07, "RC_RDMA_WRITE_MIDDLE", "BTH", true},
    {0x08, "RC_RDMA_WRITE_LAST", "BTH", true},
    {0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "BTH ImmDt", true},
    {0x0a, "RC_RDMA_WRITE_ONLY", "BTH RETH", true},
    {0x0b, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", "BTH RETH ImmDt", true},
    {0x0c, "RC_RDMA_READ_REQUEST", "BTH RETH", false},
    {0x0d, "RC_RDMA_READ_RESPONSE_FIRST", "BTH AETH", true},
    {0x0e, "RC_RDMA_READ_RESPONSE_MIDDLE", "BTH", true},
    {0x0f, "RC_RDMA_READ_RESPONSE_LAST", "BTH AETH", true},
    {0x10, "RC_RDMA_READ_RESPONSE_ONLY", "BTH AETH", true},
    {0x11, "RC_ACKNOWLEDGE", "BTH AETH", false},
    {0x12, "RC_ATOMIC_ACKNOWLEDGE", "BTH AETH AtomicAckETH", false},
    {0x13, "RC_CMP_SWAP", "BTH AtomicETH", false},
    {0x14, "RC_FETCH_ADD", "BTH AtomicETH", false},
    {0x16, "RC_SEND_LAST_WITH_INVALIDATE", "BTH IETH", true},
    {0x17, "RC_SEND_ONLY_WITH_INVALIDATE", "BTH IETH", true},
    {0x20, "UC_SEND_FIRST", "BTH", true},
    {0x21, "UC_SEND_MIDDLE", "BTH", true},
    {0x22, "UC_SEND_LAST", "BTH", true},
    {0x23, "UC_SEND_LAST_WITH_IMMEDIATE", "BTH ImmDt", true},
    {0x24, "UC_SEND_ONLY", "BTH", true},
    {0x25, "UC_SEND_ONLY_WITH_IMMEDIATE", "BTH ImmDt", true},
    {0x26, "UC_RDMA_WRITE_FIRST", "BTH RETH", true},
    {0x27, "UC_RDMA_WRITE_MIDDLE", "BTH", true},
    {0x28, "UC_RDMA_WRITE_LAST", "BTH", true},
    {0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "BTH ImmDt", true},
    {0x2a, "UC_RDMA_WRITE_ONLY", "BTH RETH", true},
    {0x2b, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", "BTH RETH ImmDt", true},
    {0x64, "UD_SEND_ONLY", "BTH DETH", true},
    {0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", "BTH DETH ImmDt", true},
    {0x81, "CNP", "BTH Resv16", false},
};

// Header sizes from IBA 9.2 - 9.5 (bytes), independent of roce.h's enum.
const std::map<std::string, std::pair<unsigned, uint32_t>> kHeaders = {
    {"BTH", {12, 0}},
    {"RETH", {16, SROCE_HAS_RETH}},
    {"AETH", {4, SROCE_HAS_AETH}},
    {"AtomicETH", {28, SROCE_HAS_ATMETH}},
    {"AtomicAckETH", {8, SROCE_HAS_ATMACK}},
    {"ImmDt", {4, SROCE_HAS_IMMDT}},
    {"IETH", {4, SROCE_HAS_IETH}},
    {"DETH", {8, SROCE_HAS_DETH}},
    {"Resv16", {16, 0}},
};

std::vector<std::string> words(const char* s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool contains(const std::string& s, const char* w) { return s.find(w) != std::string::npos; }

TEST_CASE("opcode table matches IBA table 38 row by row", "[proto][opcode]") {
  std::set<unsigned> listed;
  for (const Row& r : kTable38) {
    listed.insert(r.opcode);
    const struct sroce_opinfo* op = sroce_opinfo(r.opcode);
    INFO("opcode 0x" << std::hex << unsigned(r.opcode) << " " << r.name);
    REQUIRE(op != nullptr);
    REQUIRE(op->name != nullptr);
    CHECK(std::string(op->name) == r.name);

    unsigned len = 0;
    uint32_t hdr_flags = 0;
    for (const std::string& h : words(r.layout)) {
      REQUIRE(kHeaders.count(h) == 1);
      len += kHeaders.at(h).first;
      hdr_flags |= kHeaders.at(h).second;
    }
    CHECK(op->hdr_len == len);
    const uint32_t kHdrMask = SROCE_HAS_RETH | SROCE_HAS_AETH | SROCE_HAS_ATMETH |
                              SROCE_HAS_ATMACK | SROCE_HAS_IMMDT | SROCE_HAS_IETH | SROCE_HAS_DETH;
    CHECK((op->flags & kHdrMask) == hdr_flags);
    CHECK(bool(op->flags & SROCE_HAS_PAYLOAD) == r.payload);

    // Position in the message, from the name.
    const std::string n = r.name;
    const bool first = contains(n, "_FIRST"), middle = contains(n, "_MIDDLE"),
               last = contains(n, "_LAST");
    // Single-packet operations: ONLY, READ request, ACKs and atomics.
    const bool only = contains(n, "_ONLY") || contains(n, "READ_REQUEST") ||
                      contains(n, "ACKNOWLEDGE") || contains(n, "CMP_SWAP") ||
                      contains(n, "FETCH_ADD");
    CHECK(bool(op->flags & SROCE_IS_FIRST) == (first || only));
    CHECK(bool(op->flags & SROCE_IS_LAST) == (last || only));
    CHECK(bool(op->flags & SROCE_IS_MIDDLE) == middle);

    // Operation class, from the name.
    const bool ack = contains(n, "ACKNOWLEDGE");
    const bool response = contains(n, "RESPONSE") || ack;
    const bool cnp = n == "CNP";
    CHECK(bool(op->flags & SROCE_IS_RESPONSE) == response);
    CHECK(bool(op->flags & SROCE_IS_REQUEST) == (!response && !cnp));
    CHECK(bool(op->flags & SROCE_IS_SEND) == contains(n, "_SEND_"));
    CHECK(bool(op->flags & SROCE_IS_WRITE) == contains(n, "RDMA_WRITE"));
    CHECK(bool(op->flags & SROCE_IS_READ) == contains(n, "RDMA_READ"));
    CHECK(bool(op->flags & SROCE_IS_ATOMIC) ==
          (contains(n, "ATOMIC") || contains(n, "CMP_SWAP") || contains(n, "FETCH_ADD")));
    // The service prefix matches the opcode's top 3 bits.
    const unsigned svc = r.opcode & SROCE_TRANSPORT_MASK;
    const char* prefix = svc == SROCE_TRANSPORT_RC   ? "RC_"
                         : svc == SROCE_TRANSPORT_UC ? "UC_"
                         : svc == SROCE_TRANSPORT_UD ? "UD_"
                                                     : "CNP";
    CHECK(n.rfind(prefix, 0) == 0);
  }
  CHECK(listed.size() == 38);

  // Every other opcode is reserved: a row with no name.
  for (unsigned o = 0; o < 256; o++) {
    if (listed.count(o)) continue;
    INFO("opcode 0x" << std::hex << o);
    const struct sroce_opinfo* op = sroce_opinfo((uint8_t)o);
    REQUIRE(op != nullptr);
    CHECK(op->name == nullptr);
  }
}

TEST_CASE("header-length enum agrees with IBA 9.2 - 9.5", "[proto][opcode]") {
  CHECK(SROCE_BTH_LEN == 12);
  CHECK(SROCE_RETH_LEN == 16);
  CHECK(SROCE_AETH_LEN == 4);
  CHECK(SROCE_ATMETH_LEN == 28);
  CHECK(SROCE_ATMACK_LEN == 8);
  CHECK(SROCE_IMMDT_LEN == 4);
  CHECK(SROCE_IETH_LEN == 4);
  CHECK(SROCE_DETH_LEN == 8);
  CHECK(SROCE_ICRC_LEN == 4);
  unsigned longest = 0;
  for (unsigned o = 0; o < 256; o++)
    if (sroce_opinfo((uint8_t)o)->name && sroce_opinfo((uint8_t)o)->hdr_len > longest)
      longest = sroce_opinfo((uint8_t)o)->hdr_len;
  CHECK(longest == SROCE_MAX_HDR_LEN);
}

TEST_CASE("named opcode constants agree with the table", "[proto][opcode]") {
  CHECK(std::string(sroce_opinfo(SROCE_OP_SEND_ONLY)->name) == "RC_SEND_ONLY");
  CHECK(std::string(sroce_opinfo(SROCE_OP_READ_REQUEST)->name) == "RC_RDMA_READ_REQUEST");
  CHECK(std::string(sroce_opinfo(SROCE_OP_ACK)->name) == "RC_ACKNOWLEDGE");
  CHECK(std::string(sroce_opinfo(SROCE_OP_SEND_ONLY_INV)->name) == "RC_SEND_ONLY_WITH_INVALIDATE");
  CHECK(std::string(
            sroce_opinfo((uint8_t)(SROCE_TRANSPORT_UD | (unsigned)SROCE_OP_SEND_ONLY))->name) ==
        "UD_SEND_ONLY");
  CHECK(std::string(sroce_opinfo((uint8_t)(SROCE_TRANSPORT_UC | (unsigned)SROCE_OP_WRITE_LAST_IMM))
                        ->name) == "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE");
  CHECK(std::string(sroce_opinfo(SROCE_OP_CNP)->name) == "CNP");
}

TEST_CASE("opcode_valid_for: service of each opcode", "[proto][opcode]") {
  for (const Row& r : kTable38) {
    INFO(r.name);
    const unsigned svc = r.opcode & SROCE_TRANSPORT_MASK;
    for (sroce_transport t : {SROCE_TRANSPORT_RC, SROCE_TRANSPORT_UC, SROCE_TRANSPORT_RD,
                              SROCE_TRANSPORT_UD, SROCE_TRANSPORT_CNP})
      CHECK(sroce_opcode_valid_for(r.opcode, t) == (svc == unsigned(t)));
  }
  // UC has no READ or atomics; UD has only SEND ONLY (table 38).
  CHECK_FALSE(sroce_opcode_valid_for(
      (uint8_t)(SROCE_TRANSPORT_UC | (unsigned)SROCE_OP_READ_REQUEST), SROCE_TRANSPORT_UC));
  CHECK_FALSE(sroce_opcode_valid_for((uint8_t)(SROCE_TRANSPORT_UC | (unsigned)SROCE_OP_CMP_SWAP),
                                     SROCE_TRANSPORT_UC));
  CHECK_FALSE(sroce_opcode_valid_for((uint8_t)(SROCE_TRANSPORT_UD | (unsigned)SROCE_OP_SEND_FIRST),
                                     SROCE_TRANSPORT_UD));
  CHECK_FALSE(sroce_opcode_valid_for(0x15, SROCE_TRANSPORT_RC));
  // RD opcodes exist in IBA but not in RoCE.
  CHECK_FALSE(sroce_opcode_valid_for(0x40, SROCE_TRANSPORT_RD));
  // CNP belongs to no QP service.
  CHECK_FALSE(sroce_opcode_valid_for(SROCE_OP_CNP, SROCE_TRANSPORT_RC));
  CHECK_FALSE(sroce_opcode_valid_for(SROCE_OP_CNP, SROCE_TRANSPORT_UD));
}

}  // namespace
