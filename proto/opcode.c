/* SPDX-License-Identifier: MIT */
/*
 * The opcode table: one row per opcode of IBA Vol 1 r1.4 table 38 (RC, UC,
 * UD) plus the RoCEv2 CNP (Annex A17.9.3). Code elsewhere asks "does this
 * opcode carry a RETH?" instead of switching on opcodes (as Linux rxe does).
 *
 * Which extension headers follow the BTH for each opcode is IBA 9.2, table 38
 * ("packet header layout" column); header lengths are IBA 9.3 - 9.5. RD
 * opcodes (0x40 - 0x5f) are deliberately absent: RoCE has no RD service, so
 * they parse as SROCE_PARSE_BAD_OPCODE.
 */
#include "roce.h"

/* Extension-header lengths, so each row's hdr_len reads like table 38. */
#define BTH SROCE_BTH_LEN
#define RETH SROCE_RETH_LEN
#define AETH SROCE_AETH_LEN
#define ATMETH SROCE_ATMETH_LEN
#define ATMACK SROCE_ATMACK_LEN
#define IMMDT SROCE_IMMDT_LEN
#define IETH SROCE_IETH_LEN
#define DETH SROCE_DETH_LEN

/* Flag groups for the rows below. */
#define REQ_SEND (SROCE_IS_REQUEST | SROCE_IS_SEND | SROCE_HAS_PAYLOAD)
#define REQ_WRITE (SROCE_IS_REQUEST | SROCE_IS_WRITE | SROCE_HAS_PAYLOAD)
#define RESP_READ (SROCE_IS_RESPONSE | SROCE_IS_READ | SROCE_HAS_PAYLOAD)

/* Rows are indexed by opcode; every other entry is zero (name NULL: reserved). */
#define ROW(op, nm, fl, len) [op] = { nm, (fl), (uint8_t)(len) }

static const struct sroce_opinfo opcode_table[256] = {
	/* --- RC: 000xxxxx --------------------------------------------------- */
	ROW(0x00, "RC_SEND_FIRST", REQ_SEND | SROCE_IS_FIRST, BTH),
	ROW(0x01, "RC_SEND_MIDDLE", REQ_SEND | SROCE_IS_MIDDLE, BTH),
	ROW(0x02, "RC_SEND_LAST", REQ_SEND | SROCE_IS_LAST, BTH),
	ROW(0x03, "RC_SEND_LAST_WITH_IMMEDIATE", REQ_SEND | SROCE_IS_LAST | SROCE_HAS_IMMDT,
	    BTH + IMMDT),
	ROW(0x04, "RC_SEND_ONLY", REQ_SEND | SROCE_IS_ONLY, BTH),
	ROW(0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", REQ_SEND | SROCE_IS_ONLY | SROCE_HAS_IMMDT,
	    BTH + IMMDT),
	ROW(0x06, "RC_RDMA_WRITE_FIRST", REQ_WRITE | SROCE_IS_FIRST | SROCE_HAS_RETH, BTH + RETH),
	ROW(0x07, "RC_RDMA_WRITE_MIDDLE", REQ_WRITE | SROCE_IS_MIDDLE, BTH),
	ROW(0x08, "RC_RDMA_WRITE_LAST", REQ_WRITE | SROCE_IS_LAST, BTH),
	ROW(0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
	    REQ_WRITE | SROCE_IS_LAST | SROCE_HAS_IMMDT, BTH + IMMDT),
	ROW(0x0a, "RC_RDMA_WRITE_ONLY", REQ_WRITE | SROCE_IS_ONLY | SROCE_HAS_RETH, BTH + RETH),
	ROW(0x0b, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
	    REQ_WRITE | SROCE_IS_ONLY | SROCE_HAS_RETH | SROCE_HAS_IMMDT, BTH + RETH + IMMDT),
	/* A READ request carries no data: the RETH says what to read (9.4.4). */
	ROW(0x0c, "RC_RDMA_READ_REQUEST",
	    SROCE_IS_REQUEST | SROCE_IS_READ | SROCE_IS_ONLY | SROCE_HAS_RETH, BTH + RETH),
	/* Only the first, last and only READ responses carry an AETH (9.5.2). */
	ROW(0x0d, "RC_RDMA_READ_RESPONSE_FIRST", RESP_READ | SROCE_IS_FIRST | SROCE_HAS_AETH,
	    BTH + AETH),
	ROW(0x0e, "RC_RDMA_READ_RESPONSE_MIDDLE", RESP_READ | SROCE_IS_MIDDLE, BTH),
	ROW(0x0f, "RC_RDMA_READ_RESPONSE_LAST", RESP_READ | SROCE_IS_LAST | SROCE_HAS_AETH,
	    BTH + AETH),
	ROW(0x10, "RC_RDMA_READ_RESPONSE_ONLY", RESP_READ | SROCE_IS_ONLY | SROCE_HAS_AETH,
	    BTH + AETH),
	ROW(0x11, "RC_ACKNOWLEDGE", SROCE_IS_RESPONSE | SROCE_IS_ONLY | SROCE_HAS_AETH, BTH + AETH),
	ROW(0x12, "RC_ATOMIC_ACKNOWLEDGE",
	    SROCE_IS_RESPONSE | SROCE_IS_ATOMIC | SROCE_IS_ONLY | SROCE_HAS_AETH | SROCE_HAS_ATMACK,
	    BTH + AETH + ATMACK),
	ROW(0x13, "RC_CMP_SWAP",
	    SROCE_IS_REQUEST | SROCE_IS_ATOMIC | SROCE_IS_ONLY | SROCE_HAS_ATMETH, BTH + ATMETH),
	ROW(0x14, "RC_FETCH_ADD",
	    SROCE_IS_REQUEST | SROCE_IS_ATOMIC | SROCE_IS_ONLY | SROCE_HAS_ATMETH, BTH + ATMETH),
	/* 0x15 is reserved for RC (RESYNC exists only for RD). */
	ROW(0x16, "RC_SEND_LAST_WITH_INVALIDATE", REQ_SEND | SROCE_IS_LAST | SROCE_HAS_IETH,
	    BTH + IETH),
	ROW(0x17, "RC_SEND_ONLY_WITH_INVALIDATE", REQ_SEND | SROCE_IS_ONLY | SROCE_HAS_IETH,
	    BTH + IETH),

	/* --- UC: 001xxxxx: SEND and RDMA WRITE only ------------------------- */
	ROW(0x20, "UC_SEND_FIRST", REQ_SEND | SROCE_IS_FIRST, BTH),
	ROW(0x21, "UC_SEND_MIDDLE", REQ_SEND | SROCE_IS_MIDDLE, BTH),
	ROW(0x22, "UC_SEND_LAST", REQ_SEND | SROCE_IS_LAST, BTH),
	ROW(0x23, "UC_SEND_LAST_WITH_IMMEDIATE", REQ_SEND | SROCE_IS_LAST | SROCE_HAS_IMMDT,
	    BTH + IMMDT),
	ROW(0x24, "UC_SEND_ONLY", REQ_SEND | SROCE_IS_ONLY, BTH),
	ROW(0x25, "UC_SEND_ONLY_WITH_IMMEDIATE", REQ_SEND | SROCE_IS_ONLY | SROCE_HAS_IMMDT,
	    BTH + IMMDT),
	ROW(0x26, "UC_RDMA_WRITE_FIRST", REQ_WRITE | SROCE_IS_FIRST | SROCE_HAS_RETH, BTH + RETH),
	ROW(0x27, "UC_RDMA_WRITE_MIDDLE", REQ_WRITE | SROCE_IS_MIDDLE, BTH),
	ROW(0x28, "UC_RDMA_WRITE_LAST", REQ_WRITE | SROCE_IS_LAST, BTH),
	ROW(0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
	    REQ_WRITE | SROCE_IS_LAST | SROCE_HAS_IMMDT, BTH + IMMDT),
	ROW(0x2a, "UC_RDMA_WRITE_ONLY", REQ_WRITE | SROCE_IS_ONLY | SROCE_HAS_RETH, BTH + RETH),
	ROW(0x2b, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
	    REQ_WRITE | SROCE_IS_ONLY | SROCE_HAS_RETH | SROCE_HAS_IMMDT, BTH + RETH + IMMDT),

	/* --- UD: 011xxxxx: single-packet SENDs, DETH before ImmDt (9.2) ----- */
	ROW(0x64, "UD_SEND_ONLY", REQ_SEND | SROCE_IS_ONLY | SROCE_HAS_DETH, BTH + DETH),
	ROW(0x65, "UD_SEND_ONLY_WITH_IMMEDIATE",
	    REQ_SEND | SROCE_IS_ONLY | SROCE_HAS_DETH | SROCE_HAS_IMMDT, BTH + DETH + IMMDT),

	/*
	 * --- CNP (Annex A17.9.3): BTH, 16 reserved bytes, ICRC. It is neither a
	 * request nor a response of any QP; the reserved bytes count as header so
	 * that a CNP is a header-only packet like an ACK.
	 */
	ROW(0x81, "CNP", 0, BTH + SROCE_CNP_RESV_LEN),
};

const struct sroce_opinfo *sroce_opinfo(uint8_t opcode)
{
	return &opcode_table[opcode];
}
