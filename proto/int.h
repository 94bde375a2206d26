/* SPDX-License-Identifier: MIT */
/* sroce in-band network telemetry on the wire (docs/wire.md, "INT").
 *
 * Two pieces, both sroce extensions sent only between sroce QPs that agreed
 * on them (BTH Resv7 bit ICAP, below):
 *
 *  1. The INT shim, in front of the BTH of a data packet (request): an
 *     INT-MD-style header (P4.org INT dataplane specification: the INT-MD
 *     metadata header's version, E bit, per-hop metadata length and
 *     remaining hop count; "INT over TCP/UDP" puts it right after the L4
 *     header) followed by a stack of hop records, the newest first. Every
 *     switch egress port that understands it pushes one record (HPCC, Li et
 *     al., SIGCOMM 2019, section 3.2 / figure 6 and section 5: timestamp,
 *     txBytes, qLen, B per hop; Odin adds the shared-buffer flag). The shim
 *     is outside the ICRC: the sender computes the ICRC over the packet
 *     without it and the receiver strips it before checking, as an INT sink
 *     strips INT before delivering the packet.
 *     Its first byte lies in the manufacturer-specific opcode range of IBA
 *     table 38 (0xc0-0xff), so a plain RoCEv2 parser drops a shimmed packet
 *     instead of misreading it (and none is ever sent to one).
 *
 *  2. The INT echo, a trailer of an ACK (opcode 0x11) right before the
 *     ICRC (after the lossy-mode trailer when there is one): the records of
 *     the newest request that carried any, then a 4-byte footer. BTH Resv7
 *     bit IECHO says it is there; the ICRC covers it.
 *
 * Records are kept at full width (24 bytes) rather than HPCC's packed 8: the
 * counters need no per-port widening for 2^48 ps (281 s) and 2^48 bytes, and
 * the receiver sees exactly what the switch measured. Length-checked parsers
 * below never read outside [buf, buf + len).
 */
#ifndef SROCE_PROTO_INT_H
#define SROCE_PROTO_INT_H

#include "proto/roce.h"

#ifdef __cplusplus
extern "C" {
#endif

/* BTH byte 8 (Resv7, below AckReq, CAP and EXT of the lossy extension). */
#define SROCE_BTH8_INT_CAP 0x10u  /* the sending QP offers INT shims and echoes */
#define SROCE_BTH8_INT_ECHO 0x08u /* an INT echo trailer sits before the ICRC */

#define SROCE_INT_TYPE 0xe1u      /* shim byte 0 (manufacturer-specific opcode range) */
#define SROCE_INT_VERSION 1u
#define SROCE_INT_SHIM_LEN 8
#define SROCE_INT_HOP_LEN 24
#define SROCE_INT_HOP_WORDS (SROCE_INT_HOP_LEN / 4) /* INT-MD "Hop ML" */
#define SROCE_INT_MAX_HOPS 8      /* most records a shim or echo may hold */
#define SROCE_INT_ECHO_FOOTER_LEN 4
#define SROCE_INT_MAX_BYTES (SROCE_INT_SHIM_LEN + SROCE_INT_MAX_HOPS * SROCE_INT_HOP_LEN)

/* Shim flags (byte 1, low nibble). */
#define SROCE_INT_F_EXCEEDED 0x01u /* a hop found no remaining hop count: it pushed nothing */

/* Hop record flags (byte 4). */
#define SROCE_INT_HOP_F_SB 0x01u   /* the switch's shared buffer is above its flag level (Odin) */

#define SROCE_INT_MASK48 0xffffffffffffull

/* One hop record, decoded (wire: big-endian, 24 bytes).
 *  0  4  node_port   switch id (16) | egress port (16): a change = a new path
 *  4  1  flags       SROCE_INT_HOP_F_*
 *  5  3  link_mbps   egress link rate, Mbit/s
 *  8  4  qlen        egress queue, bytes (saturating)
 * 12  6  ts_ps       egress timestamp, picoseconds, low 48 bits
 * 18  6  tx_bytes    bytes the port has sent, low 48 bits */
struct sroce_int_hop {
	uint32_t node_port;
	uint8_t flags;
	uint32_t link_mbps; /* 24 bits */
	uint32_t qlen;
	uint64_t ts_ps;     /* 48 bits */
	uint64_t tx_bytes;  /* 48 bits */
};

/* The shim, decoded (wire: 8 bytes).
 *  0  1  type        SROCE_INT_TYPE
 *  1  1  ver_flags   version (7:4) | flags (3:0)
 *  2  1  hop_words   record length in 4-byte words (SROCE_INT_HOP_WORDS)
 *  3  1  remaining   hops that may still push (the source sets it; each push -1)
 *  4  1  count       records that follow (newest first)
 *  5  3  reserved    0 */
struct sroce_int_shim {
	uint8_t flags;
	uint8_t remaining;
	uint8_t count;
};

enum sroce_int_err {
	SROCE_INT_OK = 0,
	SROCE_INT_SHORT,        /* fewer bytes than the shim / footer */
	SROCE_INT_BAD_TYPE,     /* not SROCE_INT_TYPE */
	SROCE_INT_BAD_VERSION,
	SROCE_INT_BAD_HOP_LEN,  /* record length this version does not know */
	SROCE_INT_TOO_MANY,     /* count (or count + remaining) above SROCE_INT_MAX_HOPS, or an empty echo */
	SROCE_INT_TRUNCATED,    /* the records run past the packet's end */
};

static inline void sroce_int_hop_write(uint8_t *p, const struct sroce_int_hop *h)
{
	uint64_t ts = h->ts_ps & SROCE_INT_MASK48, tx = h->tx_bytes & SROCE_INT_MASK48;
	sroce_put_be32(p, h->node_port);
	p[4] = h->flags;
	sroce_put_be24(p + 5, h->link_mbps & 0xffffffu);
	sroce_put_be32(p + 8, h->qlen);
	sroce_put_be16(p + 12, (uint16_t)(ts >> 32));
	sroce_put_be32(p + 14, (uint32_t)ts);
	sroce_put_be16(p + 18, (uint16_t)(tx >> 32));
	sroce_put_be32(p + 20, (uint32_t)tx);
}
static inline void sroce_int_hop_read(const uint8_t *p, struct sroce_int_hop *h)
{
	h->node_port = sroce_get_be32(p);
	h->flags = p[4];
	h->link_mbps = sroce_get_be24(p + 5);
	h->qlen = sroce_get_be32(p + 8);
	h->ts_ps = (uint64_t)sroce_get_be16(p + 12) << 32 | sroce_get_be32(p + 14);
	h->tx_bytes = (uint64_t)sroce_get_be16(p + 18) << 32 | sroce_get_be32(p + 20);
}

/* The INT source's empty shim: `max_hops` records may be pushed. */
static inline void sroce_int_shim_write(uint8_t *p, uint8_t max_hops)
{
	p[0] = SROCE_INT_TYPE;
	p[1] = (uint8_t)(SROCE_INT_VERSION << 4);
	p[2] = SROCE_INT_HOP_WORDS;
	p[3] = max_hops > SROCE_INT_MAX_HOPS ? SROCE_INT_MAX_HOPS : max_hops;
	p[4] = 0;
	p[5] = p[6] = p[7] = 0;
}

/* Does this UDP payload start with an INT shim? (One byte: RoCEv2 packets
 * start with a BTH opcode, which is never in 0xc0-0xff for sroce.) */
static inline bool sroce_int_present(const uint8_t *buf, size_t len)
{
	return len >= 1 && buf[0] == SROCE_INT_TYPE;
}

/* Checks the shim at buf[0..len) (len = the whole UDP payload). On success
 * the RoCEv2 packet starts at buf + sroce_int_shim_bytes(out) and at least
 * SROCE_BTH_LEN + SROCE_ICRC_LEN bytes follow the records. */
static inline enum sroce_int_err sroce_int_shim_parse(const uint8_t *buf, size_t len,
						      struct sroce_int_shim *out)
{
	size_t need;
	if (len < SROCE_INT_SHIM_LEN) return SROCE_INT_SHORT;
	if (buf[0] != SROCE_INT_TYPE) return SROCE_INT_BAD_TYPE;
	if ((buf[1] >> 4) != SROCE_INT_VERSION) return SROCE_INT_BAD_VERSION;
	if (buf[2] != SROCE_INT_HOP_WORDS) return SROCE_INT_BAD_HOP_LEN;
	if (buf[4] > SROCE_INT_MAX_HOPS || (unsigned)buf[3] + buf[4] > SROCE_INT_MAX_HOPS)
		return SROCE_INT_TOO_MANY;
	need = SROCE_INT_SHIM_LEN + (size_t)buf[4] * SROCE_INT_HOP_LEN + SROCE_BTH_LEN + SROCE_ICRC_LEN;
	if (len < need) return SROCE_INT_TRUNCATED;
	out->flags = buf[1] & 0x0fu;
	out->remaining = buf[3];
	out->count = buf[4];
	return SROCE_INT_OK;
}
static inline size_t sroce_int_shim_bytes(const struct sroce_int_shim *s)
{
	return SROCE_INT_SHIM_LEN + (size_t)s->count * SROCE_INT_HOP_LEN;
}
/* Record i (0 = newest, i.e. the last switch) of a parsed shim. */
static inline const uint8_t *sroce_int_shim_hop(const uint8_t *buf, unsigned i)
{
	return buf + SROCE_INT_SHIM_LEN + (size_t)i * SROCE_INT_HOP_LEN;
}

/* A transit hop: push `h` on the shim at buf (the packet is `*len` bytes in
 * a buffer of `cap`). Returns 1 if pushed; 0 if the remaining hop count is
 * 0 (E is set) or there is no room; -1 if buf holds no valid shim. */
static inline int sroce_int_push(uint8_t *buf, size_t *len, size_t cap, const struct sroce_int_hop *h)
{
	struct sroce_int_shim s = {0, 0, 0};
	size_t i;
	if (sroce_int_shim_parse(buf, *len, &s) != SROCE_INT_OK) return -1;
	if (s.remaining == 0 || *len + SROCE_INT_HOP_LEN > cap) {
		buf[1] |= SROCE_INT_F_EXCEEDED;
		return 0;
	}
	/* INT-MD pushes on top of the stack: everything after the shim moves. */
	for (i = *len; i > SROCE_INT_SHIM_LEN; i--)
		buf[i - 1 + SROCE_INT_HOP_LEN] = buf[i - 1];
	sroce_int_hop_write(buf + SROCE_INT_SHIM_LEN, h);
	buf[3] = (uint8_t)(s.remaining - 1);
	buf[4] = (uint8_t)(s.count + 1);
	*len += SROCE_INT_HOP_LEN;
	return 1;
}

/* Echo footer (the last 4 bytes before the ICRC):
 *  0  1  count       records before the footer (1..SROCE_INT_MAX_HOPS)
 *  1  1  hop_words   SROCE_INT_HOP_WORDS
 *  2  1  flags       the shim's flags (SROCE_INT_F_EXCEEDED)
 *  3  1  type        SROCE_INT_TYPE */
static inline size_t sroce_int_echo_bytes(unsigned count)
{
	return (size_t)count * SROCE_INT_HOP_LEN + SROCE_INT_ECHO_FOOTER_LEN;
}
static inline void sroce_int_echo_footer_write(uint8_t *p, uint8_t count, uint8_t flags)
{
	p[0] = count;
	p[1] = SROCE_INT_HOP_WORDS;
	p[2] = flags;
	p[3] = SROCE_INT_TYPE;
}
/* `end` points just past the echo (at the ICRC); `avail` bytes before it
 * may belong to it. On success *count records start at
 * end - sroce_int_echo_bytes(*count). */
static inline enum sroce_int_err sroce_int_echo_parse(const uint8_t *end, size_t avail, uint8_t *count,
						      uint8_t *flags)
{
	const uint8_t *f = end - SROCE_INT_ECHO_FOOTER_LEN;
	if (avail < SROCE_INT_ECHO_FOOTER_LEN) return SROCE_INT_SHORT;
	if (f[3] != SROCE_INT_TYPE) return SROCE_INT_BAD_TYPE;
	if (f[1] != SROCE_INT_HOP_WORDS) return SROCE_INT_BAD_HOP_LEN;
	if (f[0] == 0 || f[0] > SROCE_INT_MAX_HOPS) return SROCE_INT_TOO_MANY;
	if (avail < sroce_int_echo_bytes(f[0])) return SROCE_INT_TRUNCATED;
	*count = f[0];
	*flags = f[2];
	return SROCE_INT_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* SROCE_PROTO_INT_H */
