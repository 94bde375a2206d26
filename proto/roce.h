/* SPDX-License-Identifier: MIT */
/*
 * The RoCEv2 wire, in freestanding C: one definition shared by the C++ engine,
 * the kernel module and the eBPF programs.
 *
 * Headers are described by offsets and accessors, not by bitfield structs, so
 * that byte order and layout never depend on the compiler: every read and
 * write of a header field goes through the big-endian helpers below. Names and
 * layouts follow the InfiniBand Architecture Specification Vol. 1, Release
 * 1.4, chapter 9 (transport headers), and Annex A17 (RoCEv2).
 *
 * No libc: only <stdint.h>, <stddef.h> and <stdbool.h>, which are available
 * freestanding, in the kernel (via linux/types.h shims) and in BPF.
 */
#ifndef SROCE_PROTO_ROCE_H
#define SROCE_PROTO_ROCE_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define SROCE_UDP_PORT 4791u /* IANA: RoCEv2 */

/* Header lengths in bytes (IBA 9.2 - 9.5). */
enum sroce_hdr_len {
	SROCE_BTH_LEN = 12,
	SROCE_RETH_LEN = 16,
	SROCE_AETH_LEN = 4,
	SROCE_ATMETH_LEN = 28,
	SROCE_ATMACK_LEN = 8,
	SROCE_IMMDT_LEN = 4,
	SROCE_IETH_LEN = 4,
	SROCE_DETH_LEN = 8,
	SROCE_ICRC_LEN = 4,
	SROCE_CNP_RESV_LEN = 16, /* reserved bytes after a CNP's BTH (Annex A17.9.3) */
	SROCE_MAX_HDR_LEN = 40,  /* BTH + AtomicETH, the longest header of table 38 */
};

/* Transport service in the top 3 bits of the opcode (IBA 9.2, table 38). */
enum sroce_transport {
	SROCE_TRANSPORT_RC = 0x00,
	SROCE_TRANSPORT_UC = 0x20,
	SROCE_TRANSPORT_RD = 0x40,
	SROCE_TRANSPORT_UD = 0x60,
	SROCE_TRANSPORT_CNP = 0x80,
	SROCE_TRANSPORT_MASK = 0xe0,
};

/* Opcodes (IBA table 38). UC and UD opcodes are the RC operation | service. */
enum sroce_opcode {
	SROCE_OP_SEND_FIRST = 0x00,
	SROCE_OP_SEND_MIDDLE = 0x01,
	SROCE_OP_SEND_LAST = 0x02,
	SROCE_OP_SEND_LAST_IMM = 0x03,
	SROCE_OP_SEND_ONLY = 0x04,
	SROCE_OP_SEND_ONLY_IMM = 0x05,
	SROCE_OP_WRITE_FIRST = 0x06,
	SROCE_OP_WRITE_MIDDLE = 0x07,
	SROCE_OP_WRITE_LAST = 0x08,
	SROCE_OP_WRITE_LAST_IMM = 0x09,
	SROCE_OP_WRITE_ONLY = 0x0a,
	SROCE_OP_WRITE_ONLY_IMM = 0x0b,
	SROCE_OP_READ_REQUEST = 0x0c,
	SROCE_OP_READ_RESP_FIRST = 0x0d,
	SROCE_OP_READ_RESP_MIDDLE = 0x0e,
	SROCE_OP_READ_RESP_LAST = 0x0f,
	SROCE_OP_READ_RESP_ONLY = 0x10,
	SROCE_OP_ACK = 0x11,
	SROCE_OP_ATOMIC_ACK = 0x12,
	SROCE_OP_CMP_SWAP = 0x13,
	SROCE_OP_FETCH_ADD = 0x14,
	SROCE_OP_SEND_LAST_INV = 0x16,
	SROCE_OP_SEND_ONLY_INV = 0x17,
	SROCE_OP_CNP = 0x81, /* RoCEv2 congestion notification (Annex A17.9.3) */
};

/* What an opcode carries and means: one table row per opcode (opcode.c). */
enum sroce_opflags {
	SROCE_HAS_RETH = 1u << 0,
	SROCE_HAS_AETH = 1u << 1,
	SROCE_HAS_ATMETH = 1u << 2,
	SROCE_HAS_ATMACK = 1u << 3,
	SROCE_HAS_IMMDT = 1u << 4,
	SROCE_HAS_IETH = 1u << 5,
	SROCE_HAS_DETH = 1u << 6,
	SROCE_HAS_PAYLOAD = 1u << 7,
	SROCE_IS_FIRST = 1u << 8,
	SROCE_IS_MIDDLE = 1u << 9,
	SROCE_IS_LAST = 1u << 10,
	SROCE_IS_ONLY = SROCE_IS_FIRST | SROCE_IS_LAST,
	SROCE_IS_REQUEST = 1u << 11,
	SROCE_IS_RESPONSE = 1u << 12,
	SROCE_IS_SEND = 1u << 13,
	SROCE_IS_WRITE = 1u << 14,
	SROCE_IS_READ = 1u << 15, /* request or response */
	SROCE_IS_ATOMIC = 1u << 16,
};

struct sroce_opinfo {
	const char *name;  /* "RC_SEND_FIRST"; NULL for an invalid opcode */
	uint32_t flags;    /* enum sroce_opflags */
	uint8_t hdr_len;   /* BTH + all extension headers, bytes */
};

/* The row for an opcode; a row with name == NULL for reserved opcodes. */
const struct sroce_opinfo *sroce_opinfo(uint8_t opcode);

/* --- big-endian access: the only code that touches raw wire bytes --------- */

static inline uint16_t sroce_get_be16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}
static inline uint32_t sroce_get_be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}
static inline uint32_t sroce_get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t sroce_get_be64(const uint8_t *p)
{
	return (uint64_t)sroce_get_be32(p) << 32 | sroce_get_be32(p + 4);
}
static inline void sroce_put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void sroce_put_be24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}
static inline void sroce_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
static inline void sroce_put_be64(uint8_t *p, uint64_t v)
{
	sroce_put_be32(p, (uint32_t)(v >> 32));
	sroce_put_be32(p + 4, (uint32_t)v);
}

/* --- BTH (IBA 9.2): 12 bytes ---------------------------------------------
 *  0: opcode
 *  1: SE(1) M(1) PadCnt(2) TVer(4)
 *  2: P_Key(16)
 *  4: Resv8a (RoCEv2; F/B in InfiniBand)  5: DestQP(24)
 *  8: AckReq(1) Resv7(7)                  9: PSN(24)
 */
struct sroce_bth {
	uint8_t opcode;
	bool se;        /* solicited event */
	bool mig;       /* MigReq */
	uint8_t pad;    /* 0..3 bytes of pad before the ICRC */
	uint8_t tver;   /* transport header version: 0 */
	uint16_t pkey;
	uint8_t resv8a; /* sent as 0 (BECN on a CNP); masked in the ICRC */
	uint32_t dqpn;  /* 24 bits */
	bool ack_req;
	uint32_t psn;   /* 24 bits */
};

/* BTH byte 4: InfiniBand's F(ECN) and B(ECN) bits, reserved in RoCEv2 except
 * that a CNP is sent with B set (Annex A17.9.3); masked in the ICRC either way. */
#define SROCE_BTH_FECN 0x80u
#define SROCE_BTH_BECN 0x40u

void sroce_bth_read(const uint8_t *p, struct sroce_bth *out);
void sroce_bth_write(uint8_t *p, const struct sroce_bth *in);

/* RETH (9.3.3): VA(64) R_Key(32) DMALen(32) */
struct sroce_reth {
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len;
};
void sroce_reth_read(const uint8_t *p, struct sroce_reth *out);
void sroce_reth_write(uint8_t *p, const struct sroce_reth *in);

/* AETH (9.3.5): Syndrome(8) MSN(24). Syndrome bits 6:5 say ACK, RNR NAK or NAK. */
enum sroce_aeth_type {
	SROCE_AETH_ACK = 0,
	SROCE_AETH_RNR_NAK = 1,
	SROCE_AETH_RESERVED = 2,
	SROCE_AETH_NAK = 3,
};
/* NAK codes in syndrome bits 4:0 (IBA table 43). */
enum sroce_nak_code {
	SROCE_NAK_PSN_SEQ_ERR = 0,
	SROCE_NAK_INVALID_REQ = 1,
	SROCE_NAK_REMOTE_ACCESS = 2,
	SROCE_NAK_REMOTE_OP = 3,
	SROCE_NAK_INVALID_RD_REQ = 4,
};
#define SROCE_AETH_CREDIT_INVALID 0x1fu /* "no credit count" (IBA 9.7.5.1) */
struct sroce_aeth {
	uint8_t syndrome;
	uint32_t msn; /* 24 bits */
};
static inline enum sroce_aeth_type sroce_aeth_type(uint8_t syndrome)
{
	return (enum sroce_aeth_type)((syndrome >> 5) & 3);
}
static inline uint8_t sroce_aeth_value(uint8_t syndrome) { return syndrome & 0x1f; }
static inline uint8_t sroce_aeth_syndrome(enum sroce_aeth_type t, uint8_t value)
{
	return (uint8_t)(((unsigned)t & 3) << 5 | (value & 0x1f));
}
void sroce_aeth_read(const uint8_t *p, struct sroce_aeth *out);
void sroce_aeth_write(uint8_t *p, const struct sroce_aeth *in);

/* AtomicETH (9.3.4): VA(64) R_Key(32) SwapOrAdd(64) Compare(64) */
struct sroce_atmeth {
	uint64_t va;
	uint32_t rkey;
	uint64_t swap_add;
	uint64_t compare;
};
void sroce_atmeth_read(const uint8_t *p, struct sroce_atmeth *out);
void sroce_atmeth_write(uint8_t *p, const struct sroce_atmeth *in);

/* AtomicAckETH (9.5.3): OrigRemDt(64) */
/* ImmDt (9.3.6): 32 bits, IETH (9.3.7): R_Key 32 bits: plain be32 fields. */

/* DETH (9.3.2): Q_Key(32) Resv8(8) SrcQP(24) */
struct sroce_deth {
	uint32_t qkey;
	uint32_t sqpn; /* 24 bits */
};
void sroce_deth_read(const uint8_t *p, struct sroce_deth *out);
void sroce_deth_write(uint8_t *p, const struct sroce_deth *in);

/* --- PSN arithmetic: the one place (IBA 9.7.1: 24-bit modular) ----------- */
#define SROCE_PSN_MASK 0xffffffu

static inline uint32_t sroce_psn_add(uint32_t psn, int32_t delta)
{
	return (uint32_t)((int64_t)psn + delta) & SROCE_PSN_MASK;
}
/* Signed distance a - b in [-2^23, 2^23): < 0 means a is before b. A distance
 * of exactly 2^23 is ambiguous and reads as "before" (-2^23). */
static inline int32_t sroce_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)(((a - b) & SROCE_PSN_MASK) << 8) >> 8;
}
static inline bool sroce_psn_before(uint32_t a, uint32_t b) { return sroce_psn_diff(a, b) < 0; }
static inline bool sroce_psn_after(uint32_t a, uint32_t b) { return sroce_psn_diff(a, b) > 0; }


/* --- sroce lossy-mode extension (docs/wire.md "Lossy mode extension") ----
 * Two bits of the BTH's Resv7 field (byte 8, below AckReq). IBA 9.2 sends
 * Resv7 as 0 and receivers ignore it (Linux rxe never reads it; it is not
 * masked in the ICRC, so it is end-to-end protected like the rest).
 *  CAP: the sender's QP offers sroce lossy mode (set on every packet of an
 *       RC QP whose engine enables it). A plain RoCEv2 peer ignores it.
 *  EXT: a 28-byte sroce trailer sits between the pad and the ICRC. Sent only
 *       after the peer's CAP was seen, so a plain peer never gets one. */
#define SROCE_BTH8_SROCE_CAP 0x40u
#define SROCE_BTH8_SROCE_EXT 0x20u
#define SROCE_LEH_LEN 28

static inline uint8_t sroce_bth_sroce_bits(const uint8_t *bth)
{
	return (uint8_t)(bth[8] & (SROCE_BTH8_SROCE_CAP | SROCE_BTH8_SROCE_EXT));
}

/* Trailer of a request packet (RC SEND/WRITE/READ/atomic), big-endian.
 * The IRN idea: what a MIDDLE/LAST packet lacks for placement out of order
 * (the WRITE's VA and R_Key, the SEND's receive-WQE number and offset). */
struct sroce_leh_req_wire {
	uint8_t lane;      /* 0..63: UDP source port = QP base port + lane */
	uint8_t flags;     /* SROCE_LEH_F_* */
	uint8_t lane_seq[2];  /* per-lane sequence of this transmission */
	uint8_t prev_psn[4];  /* bit 31 valid, bit 30 RTO, 26:24 retired_chunk, 23:0 PSN
				 of the lane's previous packet */
	uint8_t rsn[4];       /* 31:24 retired-lane bitmap of that chunk, 23:0 receive
				 sequence number (SEND / WRITE w/ imm) */
	uint8_t offset[4];    /* byte offset of the payload in its message */
	uint8_t va[8];        /* WRITE: remote VA of the payload's first byte */
	uint8_t rkey[4];      /* WRITE: R_Key */
};
/* Trailer of an ACK (opcode 0x11) from a lossy receiver: SACK state. */
struct sroce_leh_ack_wire {
	uint8_t echo_lane;   /* lane of the packet that triggered this ACK */
	uint8_t flags;       /* SROCE_LEH_AF_* */
	uint8_t ce_lane;     /* with SROCE_LEH_AF_CE: the lane whose CE marks ce_count reports */
	uint8_t ce_count;    /* CE-marked requests on ce_lane since it was last reported (saturating) */
	uint8_t echo_psn[4]; /* 23:0 its PSN (RTT sample; bit 31 valid) */
	uint8_t sack[8];     /* bit i: PSN (AETH-acked PSN + 1 + i) received */
	uint8_t rtx[8];      /* bit i: PSN (acked + 1 + i) lost: resend exactly it */
	uint8_t dup_total[4]; /* duplicates received so far (spurious retransmissions) */
};
#ifdef __cplusplus
static_assert(sizeof(struct sroce_leh_req_wire) == SROCE_LEH_LEN, "request trailer layout");
static_assert(sizeof(struct sroce_leh_ack_wire) == SROCE_LEH_LEN, "ack trailer layout");
#else
_Static_assert(sizeof(struct sroce_leh_req_wire) == SROCE_LEH_LEN, "request trailer layout");
_Static_assert(sizeof(struct sroce_leh_ack_wire) == SROCE_LEH_LEN, "ack trailer layout");
#endif
#define SROCE_LEH_F_RETX 0x01u  /* request: a retransmission */
#define SROCE_LEH_F_PROBE 0x02u /* request: a single packet sent on a retired lane to probe it */
/* request flags bits 7:2: the sender's lane count minus 1 (1..64 lanes) */
#define SROCE_LEH_LANES_SHIFT 2
static inline uint8_t sroce_leh_flags_lanes(uint8_t flags) { return (uint8_t)((flags >> 2) + 1); }
#define SROCE_LEH_PSN_VALID 0x80000000u
/* request prev_psn bit 30: a retransmission sent while the sender is in
 * timeout recovery (its ACKs stopped coming; the receiver moves its ACKs to
 * another path). An older sroce sends 0. */
#define SROCE_LEH_PREV_RTO 0x40000000u
/* ACK flags: bit 0 CE echo (ce_lane, ce_count valid; lane health steering,
 * docs/lossy.md "Lane weights"). An older sroce sends 0: no echo. */
#define SROCE_LEH_AF_CE 0x01u

/* Host-order views and their accessors (the only code touching the bytes). */
struct sroce_leh_req {
	uint8_t lane;
	uint8_t flags;
	uint8_t retired;       /* lanes 8*retired_chunk .. +7 retired (bit i: lane 8c+i) */
	uint8_t retired_chunk; /* 0..7 */
	uint16_t lane_seq;
	uint32_t prev_psn; /* with SROCE_LEH_PSN_VALID */
	uint32_t rsn;
	uint32_t offset;
	uint64_t va;
	uint32_t rkey;
};
struct sroce_leh_ack {
	uint8_t echo_lane;
	uint8_t flags;
	uint8_t ce_lane;
	uint8_t ce_count;
	uint32_t echo_psn; /* with SROCE_LEH_PSN_VALID */
	uint64_t sack;
	uint64_t rtx;
	uint32_t dup_total;
};
static inline void sroce_leh_req_write(uint8_t *p, const struct sroce_leh_req *in)
{
	p[0] = in->lane;
	p[1] = in->flags;
	p[2] = (uint8_t)(in->lane_seq >> 8);
	p[3] = (uint8_t)in->lane_seq;
	sroce_put_be32(p + 4, (in->prev_psn & 0xc0ffffffu) |
				      ((uint32_t)(in->retired_chunk & 7u) << 24));
	sroce_put_be32(p + 8, (in->rsn & 0xffffffu) | ((uint32_t)in->retired << 24));
	sroce_put_be32(p + 12, in->offset);
	sroce_put_be64(p + 16, in->va);
	sroce_put_be32(p + 24, in->rkey);
}
static inline void sroce_leh_req_read(const uint8_t *p, struct sroce_leh_req *out)
{
	out->lane = p[0];
	out->flags = p[1];
	out->lane_seq = (uint16_t)((p[2] << 8) | p[3]);
	out->prev_psn = sroce_get_be32(p + 4) & 0xc0ffffffu;
	out->retired_chunk = (uint8_t)(p[4] & 7u);
	out->rsn = sroce_get_be32(p + 8) & 0xffffffu;
	out->retired = p[8];
	out->offset = sroce_get_be32(p + 12);
	out->va = sroce_get_be64(p + 16);
	out->rkey = sroce_get_be32(p + 24);
}
static inline void sroce_leh_ack_write(uint8_t *p, const struct sroce_leh_ack *in)
{
	p[0] = in->echo_lane;
	p[1] = in->flags;
	p[2] = in->ce_lane;
	p[3] = in->ce_count;
	sroce_put_be32(p + 4, in->echo_psn);
	sroce_put_be64(p + 8, in->sack);
	sroce_put_be64(p + 16, in->rtx);
	sroce_put_be32(p + 24, in->dup_total);
}
static inline void sroce_leh_ack_read(const uint8_t *p, struct sroce_leh_ack *out)
{
	out->echo_lane = p[0];
	out->flags = p[1];
	out->ce_lane = p[2];
	out->ce_count = p[3];
	out->echo_psn = sroce_get_be32(p + 4);
	out->sack = sroce_get_be64(p + 8);
	out->rtx = sroce_get_be64(p + 16);
	out->dup_total = sroce_get_be32(p + 24);
}

#ifdef __cplusplus
}
#endif

#endif /* SROCE_PROTO_ROCE_H */
