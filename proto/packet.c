/* SPDX-License-Identifier: MIT */
/*
 * Header accessors (IBA Vol 1 r1.4, 9.2 - 9.5) and the bounds-checked parser
 * of one RoCEv2 UDP payload. Everything goes through the big-endian helpers of
 * roce.h; nothing here reads outside [buf, buf + len) or calls libc.
 */
#include "packet.h"

#include "icrc.h"

/* --- BTH (IBA 9.2) --------------------------------------------------------- */

void sroce_bth_read(const uint8_t *p, struct sroce_bth *out)
{
	out->opcode = p[0];
	out->se = (p[1] >> 7) & 1;
	out->mig = (p[1] >> 6) & 1;
	out->pad = (p[1] >> 4) & 3;
	out->tver = p[1] & 0xf;
	out->pkey = sroce_get_be16(p + 2);
	out->resv8a = p[4];
	out->dqpn = sroce_get_be24(p + 5);
	out->ack_req = (p[8] >> 7) & 1;
	out->psn = sroce_get_be24(p + 9);
}

void sroce_bth_write(uint8_t *p, const struct sroce_bth *in)
{
	p[0] = in->opcode;
	p[1] = (uint8_t)((in->se ? 0x80 : 0) | (in->mig ? 0x40 : 0) | (in->pad & 3) << 4 |
			 (in->tver & 0xf));
	sroce_put_be16(p + 2, in->pkey);
	p[4] = in->resv8a;
	sroce_put_be24(p + 5, in->dqpn & 0xffffff);
	/* Resv7 is transmitted as 0 (IBA 9.2). */
	p[8] = in->ack_req ? 0x80 : 0;
	sroce_put_be24(p + 9, in->psn & SROCE_PSN_MASK);
}

/* --- extension headers (IBA 9.3, 9.5) -------------------------------------- */

void sroce_reth_read(const uint8_t *p, struct sroce_reth *out)
{
	out->va = sroce_get_be64(p);
	out->rkey = sroce_get_be32(p + 8);
	out->dma_len = sroce_get_be32(p + 12);
}

void sroce_reth_write(uint8_t *p, const struct sroce_reth *in)
{
	sroce_put_be64(p, in->va);
	sroce_put_be32(p + 8, in->rkey);
	sroce_put_be32(p + 12, in->dma_len);
}

void sroce_aeth_read(const uint8_t *p, struct sroce_aeth *out)
{
	out->syndrome = p[0];
	out->msn = sroce_get_be24(p + 1);
}

void sroce_aeth_write(uint8_t *p, const struct sroce_aeth *in)
{
	p[0] = in->syndrome;
	sroce_put_be24(p + 1, in->msn & 0xffffff);
}

void sroce_atmeth_read(const uint8_t *p, struct sroce_atmeth *out)
{
	out->va = sroce_get_be64(p);
	out->rkey = sroce_get_be32(p + 8);
	out->swap_add = sroce_get_be64(p + 12);
	out->compare = sroce_get_be64(p + 20);
}

void sroce_atmeth_write(uint8_t *p, const struct sroce_atmeth *in)
{
	sroce_put_be64(p, in->va);
	sroce_put_be32(p + 8, in->rkey);
	sroce_put_be64(p + 12, in->swap_add);
	sroce_put_be64(p + 20, in->compare);
}

void sroce_deth_read(const uint8_t *p, struct sroce_deth *out)
{
	out->qkey = sroce_get_be32(p);
	out->sqpn = sroce_get_be24(p + 5);
}

void sroce_deth_write(uint8_t *p, const struct sroce_deth *in)
{
	sroce_put_be32(p, in->qkey);
	p[4] = 0; /* Resv8 */
	sroce_put_be24(p + 5, in->sqpn & 0xffffff);
}

size_t sroce_cnp_write(uint8_t *p, uint32_t dqpn, uint16_t pkey)
{
	/* Annex A17.9.3: PSN, SE, M, A, PadCnt 0; B set as RNICs send it. */
	const struct sroce_bth bth = {
		.opcode = SROCE_OP_CNP,
		.pkey = pkey,
		.resv8a = SROCE_BTH_BECN,
		.dqpn = dqpn,
	};
	sroce_bth_write(p, &bth);
	for (size_t i = 0; i < SROCE_CNP_RESV_LEN; i++)
		p[SROCE_BTH_LEN + i] = 0;
	return SROCE_BTH_LEN + SROCE_CNP_RESV_LEN;
}

/* --- parsing --------------------------------------------------------------- */

static const char *const parse_err_names[SROCE_PARSE_ERR_COUNT] = {
	[SROCE_PARSE_OK] = "ok",
	[SROCE_PARSE_SHORT] = "short",
	[SROCE_PARSE_BAD_OPCODE] = "bad_opcode",
	[SROCE_PARSE_BAD_TVER] = "bad_tver",
	[SROCE_PARSE_TRUNCATED_HDR] = "truncated_hdr",
	[SROCE_PARSE_BAD_PAD] = "bad_pad",
	[SROCE_PARSE_BAD_LENGTH] = "bad_length",
	[SROCE_PARSE_BAD_ICRC] = "bad_icrc",
	[SROCE_PARSE_WRONG_TRANSPORT] = "wrong_transport",
};

const char *sroce_parse_err_name(enum sroce_parse_err e)
{
	if ((unsigned)e >= SROCE_PARSE_ERR_COUNT)
		return "unknown";
	return parse_err_names[e];
}

bool sroce_opcode_valid_for(uint8_t opcode, enum sroce_transport t)
{
	return sroce_opinfo(opcode)->name != NULL && (opcode & SROCE_TRANSPORT_MASK) == (unsigned)t;
}

static void clear_pkt(struct sroce_pkt *out)
{
	/* Field by field: a struct assignment could become a memset call, and
	 * this file must not depend on libc. */
	out->op = NULL;
	out->reth.va = 0;
	out->reth.rkey = 0;
	out->reth.dma_len = 0;
	out->aeth.syndrome = 0;
	out->aeth.msn = 0;
	out->atmeth.va = 0;
	out->atmeth.rkey = 0;
	out->atmeth.swap_add = 0;
	out->atmeth.compare = 0;
	out->atmack = 0;
	out->imm = 0;
	out->ieth_rkey = 0;
	out->deth.qkey = 0;
	out->deth.sqpn = 0;
	out->payload = NULL;
	out->payload_len = 0;
	out->icrc = 0;
}

enum sroce_parse_err sroce_parse(const uint8_t *buf, size_t len, struct sroce_pkt *out)
{
	clear_pkt(out);
	if (len < SROCE_BTH_LEN + SROCE_ICRC_LEN)
		return SROCE_PARSE_SHORT;

	sroce_bth_read(buf, &out->bth);
	const struct sroce_opinfo *op = sroce_opinfo(out->bth.opcode);
	if (op->name == NULL)
		return SROCE_PARSE_BAD_OPCODE;
	out->op = op;
	/* IBA 9.2: only TVer 0 is defined; a receiver drops anything else. */
	if (out->bth.tver != 0)
		return SROCE_PARSE_BAD_TVER;

	const size_t end = len - SROCE_ICRC_LEN; /* first byte of the ICRC */
	if (end < op->hdr_len)
		return SROCE_PARSE_TRUNCATED_HDR;

	/* Extension headers in the order IBA 9.2 fixes: DETH, RETH, AtomicETH,
	 * AETH, AtomicAckETH, ImmDt, IETH (a CNP's reserved bytes are skipped). */
	size_t off = SROCE_BTH_LEN;
	const uint32_t f = op->flags;
	if (f & SROCE_HAS_DETH) {
		sroce_deth_read(buf + off, &out->deth);
		off += SROCE_DETH_LEN;
	}
	if (f & SROCE_HAS_RETH) {
		sroce_reth_read(buf + off, &out->reth);
		off += SROCE_RETH_LEN;
	}
	if (f & SROCE_HAS_ATMETH) {
		sroce_atmeth_read(buf + off, &out->atmeth);
		off += SROCE_ATMETH_LEN;
	}
	if (f & SROCE_HAS_AETH) {
		sroce_aeth_read(buf + off, &out->aeth);
		off += SROCE_AETH_LEN;
	}
	if (f & SROCE_HAS_ATMACK) {
		out->atmack = sroce_get_be64(buf + off);
		off += SROCE_ATMACK_LEN;
	}
	if (f & SROCE_HAS_IMMDT) {
		out->imm = sroce_get_be32(buf + off);
		off += SROCE_IMMDT_LEN;
	}
	if (f & SROCE_HAS_IETH) {
		out->ieth_rkey = sroce_get_be32(buf + off);
		off += SROCE_IETH_LEN;
	}
	off = op->hdr_len; /* also skips the CNP's reserved bytes */

	out->icrc = sroce_icrc_get(buf + end);
	const size_t data = end - off; /* payload + pad */
	const uint8_t pad = out->bth.pad;
	if (!(f & SROCE_HAS_PAYLOAD)) {
		/* Header-only opcodes (READ request, ACK, atomics, CNP): no pad, no data. */
		if (pad != 0)
			return SROCE_PARSE_BAD_PAD;
		if (data != 0)
			return SROCE_PARSE_BAD_LENGTH;
		out->payload = buf + off;
		return SROCE_PARSE_OK;
	}
	/* PadCnt brings payload + pad to a 4-byte multiple (IBA 9.2); headers
	 * are multiples of 4 already, so the data area must be one too. */
	if (data < pad || (data & 3) != 0)
		return SROCE_PARSE_BAD_PAD;
	if (data - pad > 0xffffffffu)
		return SROCE_PARSE_BAD_LENGTH;
	if (data == pad && (f & (SROCE_IS_FIRST | SROCE_IS_MIDDLE)) && !(f & SROCE_IS_LAST))
		return SROCE_PARSE_BAD_LENGTH;
	out->payload = buf + off;
	out->payload_len = (uint32_t)(data - pad);
	return SROCE_PARSE_OK;
}
