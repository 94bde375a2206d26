/* SPDX-License-Identifier: MIT */
/*
 * Bounds-checked parsing of one RoCEv2 UDP payload (BTH .. ICRC) into a view
 * of its headers and payload. Every rejection has a typed reason, so drops are
 * counted by cause. Nothing here reads outside [buf, buf + len).
 */
#ifndef SROCE_PROTO_PACKET_H
#define SROCE_PROTO_PACKET_H

#include "roce.h"

#ifdef __cplusplus
extern "C" {
#endif

enum sroce_parse_err {
	SROCE_PARSE_OK = 0,
	SROCE_PARSE_SHORT,          /* shorter than BTH + ICRC */
	SROCE_PARSE_BAD_OPCODE,     /* reserved / unknown opcode */
	SROCE_PARSE_BAD_TVER,       /* BTH transport version != 0 */
	SROCE_PARSE_TRUNCATED_HDR,  /* extension headers run past the end */
	SROCE_PARSE_BAD_PAD,        /* pad count larger than the payload, pad on a header-only opcode,
				     * or payload + pad not a multiple of 4 bytes (IBA 9.2, PadCnt) */
	SROCE_PARSE_BAD_LENGTH,     /* payload where the opcode allows none, or none on a FIRST or
				     * MIDDLE packet (only the last packet of a message may be
				     * shorter than the PMTU, IBA ch. 9) */
	SROCE_PARSE_BAD_ICRC,       /* ICRC mismatch (only when checked) */
	SROCE_PARSE_WRONG_TRANSPORT,/* opcode's service does not match the QP type */
	SROCE_PARSE_ERR_COUNT,
};

const char *sroce_parse_err_name(enum sroce_parse_err e);

/* A parsed packet: views into the caller's buffer, no copies. */
struct sroce_pkt {
	struct sroce_bth bth;
	const struct sroce_opinfo *op;
	struct sroce_reth reth;       /* valid if op->flags & SROCE_HAS_RETH */
	struct sroce_aeth aeth;       /* ... SROCE_HAS_AETH */
	struct sroce_atmeth atmeth;   /* ... SROCE_HAS_ATMETH */
	uint64_t atmack;              /* ... SROCE_HAS_ATMACK (original remote data) */
	uint32_t imm;                 /* ... SROCE_HAS_IMMDT (host order) */
	uint32_t ieth_rkey;           /* ... SROCE_HAS_IETH */
	struct sroce_deth deth;       /* ... SROCE_HAS_DETH */
	const uint8_t *payload;       /* after the headers, before pad */
	uint32_t payload_len;         /* excludes pad and ICRC */
	uint32_t icrc;                /* as received (little-endian on the wire, see icrc.h) */
};

/* Parse a RoCEv2 UDP payload. Does not check the ICRC (see icrc.h). */
enum sroce_parse_err sroce_parse(const uint8_t *buf, size_t len, struct sroce_pkt *out);

/* Does an opcode belong to a QP of this transport (SROCE_TRANSPORT_RC/UC/UD)?
 * A CNP belongs to no QP service: it is valid only for SROCE_TRANSPORT_CNP, so
 * receivers must route it to congestion control before checking the QP type. */
bool sroce_opcode_valid_for(uint8_t opcode, enum sroce_transport t);

/* Write a CNP (Annex A17.9.3) notifying destination QP `dqpn`: BTH with opcode
 * 0x81, B(ECN) set in byte 4, PSN 0, then 16 zero bytes. Returns 28 (the ICRC
 * is appended by the caller, see icrc.h). */
size_t sroce_cnp_write(uint8_t *p, uint32_t dqpn, uint16_t pkey);

#ifdef __cplusplus
}
#endif

#endif /* SROCE_PROTO_PACKET_H */
