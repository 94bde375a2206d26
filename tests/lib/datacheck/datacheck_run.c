/* sroce-datacheck: the two roles, round by round (datacheck.c explains the protocol). */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "datacheck_io.h"

enum { TAG_SEND = 1, TAG_RDST, TAG_ARES, TAG_RECV, TAG_WRITE };

static bool uses_marker(enum dc_op op)
{
	return op == DC_WRITE || op == DC_READ || op >= DC_FAA;
}

/* Expects [0,off) and [off+len, slot) of buf to be the canary and [off, off+len) want. */
static size_t check_slot(const struct dc_run *r, uint32_t step, const char *what,
			 const uint8_t *buf, const uint8_t *canary, size_t slot, size_t off,
			 const uint8_t *want, size_t len)
{
	char label[64];
	size_t bad = 0;
	snprintf(label, sizeof(label), "%s before the data", what);
	bad += dc_compare(label, step, buf, canary, off);
	snprintf(label, sizeof(label), "%s data", what);
	bad += dc_compare(label, step, buf + off, want, len);
	snprintf(label, sizeof(label), "%s after the data", what);
	bad += dc_compare(label, step, buf + off + len, canary + off + len, slot - off - len);
	(void)r;
	return bad;
}

/* The verdict exchange at the end of a round: each side says whether it saw a failure. */
static int verdict(struct dc_run *r, bool ok, char me)
{
	char mine[2] = {me, ok ? 'K' : 'F'}, theirs[2];
	if (dc_send_all(r->fd, mine, 2) || dc_recv_all(r->fd, theirs, 2))
		return -1;
	if (theirs[1] != 'K') {
		fprintf(stderr, "datacheck: FAIL: the peer reports a failure (see its output)\n");
		return -1;
	}
	return ok ? 0 : -1;
}

static void give_up(struct dc_run *r)
{
	char x = DC_ABORT;
	dc_send_all(r->fd, &x, 1);
}

struct expect {
	uint64_t wr_id;
	enum ibv_wc_opcode opcode;
};

static int post_step(struct dc_run *r, uint32_t i, uint32_t j, struct expect *ex, uint32_t *nex)
{
	const struct dc_step *s = &r->steps[i];
	const struct dc_layout *l = r->l;
	uint8_t *buf = r->ctx->buf;
	struct ibv_sge sge[DC_MAX_SGE];
	struct ibv_send_wr wr = {.wr_id = (uint64_t)i << 1, .sg_list = sge,
				 .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr *bad = NULL;
	uint64_t slot_base = (uint64_t)(uintptr_t)buf + l->send0 + (uint64_t)j * l->slot;

	for (uint32_t k = 0; k < s->nsge; k++)
		sge[k] = (struct ibv_sge){slot_base + s->sge[k].off, s->sge[k].len, r->ctx->mr->lkey};
	wr.num_sge = (int)s->nsge;
	uint64_t wslot = r->remote_addr + l->write0 + (uint64_t)j * l->slot + s->remote_off;
	switch (s->op) {
	case DC_SEND:
		wr.opcode = IBV_WR_SEND;
		ex[*nex] = (struct expect){wr.wr_id, IBV_WC_SEND};
		break;
	case DC_SEND_IMM:
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = htonl(s->imm);
		ex[*nex] = (struct expect){wr.wr_id, IBV_WC_SEND};
		break;
	case DC_WRITE:
	case DC_WRITE_IMM:
		wr.opcode = s->op == DC_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htonl(s->imm);
		wr.wr.rdma.remote_addr = wslot;
		wr.wr.rdma.rkey = r->rkey;
		ex[*nex] = (struct expect){wr.wr_id, IBV_WC_RDMA_WRITE};
		break;
	case DC_READ:
		wr.opcode = IBV_WR_RDMA_READ;
		sge[0] = (struct ibv_sge){(uint64_t)(uintptr_t)buf + l->rdst0 + (uint64_t)j * l->slot +
						  s->read_off,
					  s->len, r->ctx->mr->lkey};
		wr.num_sge = s->len ? 1 : 0;
		wr.wr.rdma.remote_addr = r->remote_addr + l->rsrc0 + s->remote_off;
		wr.wr.rdma.rkey = r->rkey;
		ex[*nex] = (struct expect){wr.wr_id, IBV_WC_RDMA_READ};
		break;
	default: /* atomics */
		wr.opcode = s->op == DC_FAA ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
		sge[0] = (struct ibv_sge){(uint64_t)(uintptr_t)buf + l->ares0 + (uint64_t)j * 8, 8,
					  r->ctx->mr->lkey};
		wr.num_sge = 1;
		wr.wr.atomic.remote_addr = r->remote_addr + l->words0 + (uint64_t)s->word * 8;
		wr.wr.atomic.rkey = r->rkey;
		wr.wr.atomic.compare_add = s->op == DC_FAA ? s->add : s->compare;
		wr.wr.atomic.swap = s->swap;
		ex[*nex] = (struct expect){wr.wr_id, s->op == DC_FAA ? IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP};
	}
	(*nex)++;
	if (ibv_post_send(r->ctx->qp, &wr, &bad)) {
		fprintf(stderr, "datacheck: FAIL step %u: ibv_post_send (%s, %u B, %u SGEs) failed\n", i,
			dc_op_name(s->op), s->len, s->nsge);
		return -1;
	}
	if (!uses_marker(s->op))
		return 0;
	/* An 8-byte SEND behind it: the server's receive completes once the operation has. */
	sge[0] = (struct ibv_sge){(uint64_t)(uintptr_t)buf + l->marker0 + (uint64_t)j * 8, 8,
				  r->ctx->mr->lkey};
	struct ibv_send_wr m = {.wr_id = ((uint64_t)i << 1) | 1, .sg_list = sge, .num_sge = 1,
				.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
	ex[*nex] = (struct expect){m.wr_id, IBV_WC_SEND};
	(*nex)++;
	if (ibv_post_send(r->ctx->qp, &m, &bad)) {
		fprintf(stderr, "datacheck: FAIL step %u: ibv_post_send (marker) failed\n", i);
		return -1;
	}
	return 0;
}

static void prepare_client(struct dc_run *r, uint32_t round, uint32_t i, uint32_t j)
{
	const struct dc_step *s = &r->steps[i];
	const struct dc_layout *l = r->l;
	uint8_t *slot = r->ctx->buf + l->send0 + (size_t)j * l->slot;
	uint64_t seed = r->p->seed;

	dc_fill_canary(seed, round, TAG_SEND + (j << 4), slot, l->slot);
	uint32_t from = 0;
	for (uint32_t k = 0; k < s->nsge; k++) {
		dc_fill_data(seed, i, slot + s->sge[k].off, from, s->sge[k].len);
		from += s->sge[k].len;
	}
	if ((long)i == r->corrupt && s->len && s->op <= DC_WRITE_IMM) {
		slot[s->sge[0].off] ^= 0x40;
		printf("datacheck: --corrupt: step %u (%s) leaves with byte 0 flipped\n", i,
		       dc_op_name(s->op));
	}
	dc_fill_canary(seed, round, TAG_RDST + (j << 4), r->ctx->buf + l->rdst0 + (size_t)j * l->slot,
		       l->slot);
	dc_fill_canary(seed, round, TAG_ARES + (j << 4), r->ctx->buf + l->ares0 + (size_t)j * 8, 8);
	uint32_t marker[2] = {htonl(DC_MARKER_MAGIC), htonl(i)};
	memcpy(r->ctx->buf + l->marker0 + (size_t)j * 8, marker, 8);
}

/* READ data and atomic results, once the round's completions are in. */
static size_t check_client(struct dc_run *r, uint32_t round, uint32_t i, uint32_t j,
			   uint8_t *canary, uint8_t *want)
{
	const struct dc_step *s = &r->steps[i];
	const struct dc_layout *l = r->l;
	uint64_t seed = r->p->seed;
	if (s->op == DC_READ) {
		uint8_t *got = r->ctx->buf + l->rdst0 + (size_t)j * l->slot;
		if ((long)i == r->corrupt && s->len) {
			got[s->read_off] ^= 0x40;
			printf("datacheck: --corrupt: step %u (read) arrived with byte 0 flipped\n", i);
		}
		dc_fill_canary(seed, round, TAG_RDST + (j << 4), canary, l->slot);
		for (uint32_t k = 0; k < s->len; k++)
			want[k] = dc_data_byte(seed, 0xffffffffu, s->remote_off + k);
		r->bytes_checked += l->slot;
		return check_slot(r, i, "READ destination", got, canary, l->slot, s->read_off, want,
				  s->len);
	}
	if (s->op >= DC_FAA) {
		uint64_t got;
		memcpy(&got, r->ctx->buf + l->ares0 + (size_t)j * 8, 8);
		if ((long)i == r->corrupt) {
			got ^= 0x40;
			printf("datacheck: --corrupt: step %u (%s) returned with a bit flipped\n", i,
			       dc_op_name(s->op));
		}
		r->bytes_checked += 8;
		if (got != s->expect_orig) {
			fprintf(stderr, "datacheck: FAIL step %u: %s returned 0x%016llx, expected 0x%016llx\n",
				i, dc_op_name(s->op), (unsigned long long)got,
				(unsigned long long)s->expect_orig);
			return 1;
		}
	}
	return 0;
}

static int check_wc(uint32_t i, const struct ibv_wc *wc, const struct expect *ex)
{
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "datacheck: FAIL step %u: completion status %s (%d), vendor_err 0x%x\n",
			i, ibv_wc_status_str(wc->status), wc->status, wc->vendor_err);
		return -1;
	}
	if (wc->wr_id != ex->wr_id || wc->opcode != ex->opcode) {
		fprintf(stderr, "datacheck: FAIL step %u: completion wr_id %llu opcode %d, expected "
				"wr_id %llu opcode %d (out of order or wrong)\n",
			i, (unsigned long long)wc->wr_id, wc->opcode, (unsigned long long)ex->wr_id,
			ex->opcode);
		return -1;
	}
	return 0;
}

/* Does this work request take one of the server's receives (datacheck.c: a marker SEND has
 * an odd wr_id)? */
static bool needs_recv(const struct dc_run *r, uint64_t wr_id)
{
	enum dc_op op = r->steps[wr_id >> 1].op;
	return (wr_id & 1) || op == DC_SEND || op == DC_SEND_IMM || op == DC_WRITE_IMM;
}

/* --late-recv never: the server posted no receive. In order: success up to the first work
 * request that needs one, RNR_RETRY_EXC_ERR for it (IBA 9.7.5: rnr_retry ran out), then
 * WR_FLUSH_ERR for the rest (the QP is in the error state). */
static int check_never(struct dc_run *r, const struct expect *ex, uint32_t nex)
{
	bool failed = false;
	for (uint32_t k = 0; k < nex; k++) {
		struct ibv_wc wc;
		uint32_t i = (uint32_t)(ex[k].wr_id >> 1);
		if (dc_poll_one(r->ctx, r->fd, &wc))
			return -1;
		enum ibv_wc_status want = failed ? IBV_WC_WR_FLUSH_ERR
				    : needs_recv(r, ex[k].wr_id) ? IBV_WC_RNR_RETRY_EXC_ERR
								 : IBV_WC_SUCCESS;
		if (wc.wr_id != ex[k].wr_id || wc.status != want) {
			fprintf(stderr, "datacheck: FAIL step %u: completion wr_id %llu status %s (%d), "
					"expected wr_id %llu status %s (the server posts no receive)\n",
				i, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.status,
				(unsigned long long)ex[k].wr_id, ibv_wc_status_str(want));
			return -1;
		}
		if (want == IBV_WC_RNR_RETRY_EXC_ERR)
			printf("datacheck: step %u (%s%s) ended in %s, as it must: the server posts no "
			       "receive\n", i, dc_op_name(r->steps[i].op),
			       ex[k].wr_id & 1 ? "'s marker SEND" : "", ibv_wc_status_str(wc.status));
		failed = failed || want != IBV_WC_SUCCESS;
	}
	return failed ? 0 : -1;
}

int dc_run_client(struct dc_run *r)
{
	const struct dc_params *p = r->p;
	struct expect *ex = calloc(2 * p->slots, sizeof(*ex));
	uint8_t *canary = malloc(r->l->slot), *want = malloc(r->l->slot);
	int rc = -1;
	if (!ex || !canary || !want)
		goto out;
	for (uint32_t base = 0; base < p->steps; base += p->slots) {
		uint32_t n = p->steps - base < p->slots ? p->steps - base : p->slots;
		uint32_t round = base / p->slots, nex = 0;
		char go = 0;
		bool ok = true;
		if (dc_recv_all(r->fd, &go, 1) || go != 'G') {
			fprintf(stderr, "datacheck: FAIL: no go from the server for round %u\n", round);
			goto out;
		}
		for (uint32_t j = 0; j < n; j++)
			prepare_client(r, round, base + j, j);
		for (uint32_t j = 0; j < n; j++)
			if (post_step(r, base + j, j, ex, &nex)) {
				give_up(r);
				goto out;
			}
		if (p->late_recv_ms == DC_LATE_NEVER) {
			/* One round: after the RNR error the QP is in the error state. */
			if (check_never(r, ex, nex)) {
				give_up(r);
				goto out;
			}
			if (verdict(r, true, 'D') == 0)
				rc = 0;
			goto out;
		}
		for (uint32_t k = 0; k < nex; k++) {
			struct ibv_wc wc;
			uint32_t i = (uint32_t)(ex[k].wr_id >> 1);
			if (dc_poll_one(r->ctx, r->fd, &wc) || check_wc(i, &wc, &ex[k])) {
				give_up(r);
				goto out;
			}
		}
		for (uint32_t j = 0; j < n; j++) {
			if (check_client(r, round, base + j, j, canary, want))
				ok = false;
			r->count[r->steps[base + j].op]++;
		}
		r->done += n;
		if (verdict(r, ok, 'D'))
			goto out;
	}
	rc = 0;
out:
	free(ex);
	free(canary);
	free(want);
	return rc;
}

/* Checks one receive completion of the server and the buffers its step touched. */
static size_t check_server(struct dc_run *r, uint32_t round, uint32_t i, uint32_t j,
			   const struct ibv_wc *wc, uint8_t *canary, uint8_t *want)
{
	const struct dc_step *s = &r->steps[i];
	const struct dc_layout *l = r->l;
	uint64_t seed = r->p->seed;
	uint8_t *recv = r->ctx->buf + l->recv0 + (size_t)j * l->slot;
	uint8_t *write = r->ctx->buf + l->write0 + (size_t)j * l->slot;
	bool imm = s->op == DC_SEND_IMM || s->op == DC_WRITE_IMM;
	enum ibv_wc_opcode op = s->op == DC_WRITE_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
	uint32_t len = uses_marker(s->op) ? 8 : s->len;
	size_t bad = 0;

	if (wc->status != IBV_WC_SUCCESS || wc->wr_id != i) {
		fprintf(stderr, "datacheck: FAIL step %u (%s): receive completion status %s, wr_id %llu\n",
			i, dc_op_name(s->op), ibv_wc_status_str(wc->status),
			(unsigned long long)wc->wr_id);
		return 1;
	}
	if (wc->opcode != op || wc->byte_len != len || !!(wc->wc_flags & IBV_WC_WITH_IMM) != imm ||
	    (imm && ntohl(wc->imm_data) != s->imm)) {
		fprintf(stderr, "datacheck: FAIL step %u (%s): receive completion opcode %d byte_len %u "
				"imm %s 0x%x; expected opcode %d byte_len %u imm %s 0x%x\n",
			i, dc_op_name(s->op), wc->opcode, wc->byte_len,
			wc->wc_flags & IBV_WC_WITH_IMM ? "yes" : "no", ntohl(wc->imm_data), op, len,
			imm ? "yes" : "no", imm ? s->imm : 0);
		bad++;
	}
	/* The receive buffer: the SEND's data, the marker, or (WRITE with immediate) nothing. */
	dc_fill_canary(seed, round, TAG_RECV + (j << 4), canary, l->slot);
	if (s->op == DC_SEND || s->op == DC_SEND_IMM) {
		dc_fill_data(seed, i, want, 0, s->len);
	} else if (s->op == DC_WRITE_IMM) {
		len = 0;
	} else {
		uint32_t marker[2] = {htonl(DC_MARKER_MAGIC), htonl(i)};
		memcpy(want, marker, 8);
	}
	bad += check_slot(r, i, "receive buffer", recv, canary, l->slot, s->recv_off, want, len);
	/* The write slot: the WRITE's data, or untouched. */
	dc_fill_canary(seed, round, TAG_WRITE + (j << 4), canary, l->slot);
	len = 0;
	if (s->op == DC_WRITE || s->op == DC_WRITE_IMM) {
		dc_fill_data(seed, i, want, 0, s->len);
		len = s->len;
	}
	bad += check_slot(r, i, "write target", write, canary, l->slot, s->remote_off, want, len);
	r->bytes_checked += 2 * l->slot;
	return bad;
}

int dc_run_server(struct dc_run *r)
{
	const struct dc_params *p = r->p;
	const struct dc_layout *l = r->l;
	uint8_t *buf = r->ctx->buf;
	uint8_t *canary = malloc(l->slot), *want = malloc(l->slot > l->rsrc_len ? l->slot : l->rsrc_len);
	uint64_t words[DC_WORDS];
	int rc = -1;
	if (!canary || !want)
		goto out;
	for (uint32_t w = 0; w < DC_WORDS; w++)
		words[w] = dc_word_init(p->seed, w);
	memcpy(buf + l->words0, words, sizeof(words));
	dc_fill_rsrc(p->seed, buf + l->rsrc0, l->rsrc_len);

	if (p->late_recv_ms == DC_LATE_NEVER) {
		/* No receive posted: nothing may complete here; the client checks its errors. */
		struct ibv_wc wc;
		if (dc_send_all(r->fd, "G", 1))
			goto out;
		char v[2];
		if (dc_recv_all(r->fd, v, 2) || v[1] != 'K') {
			fprintf(stderr, "datacheck: FAIL: the client reports a failure (see its output)\n");
			goto out;
		}
		int got = ibv_poll_cq(r->ctx->cq, 1, &wc);
		if (dc_send_all(r->fd, got == 0 ? "DK" : "DF", 2) || got != 0) {
			fprintf(stderr, "datacheck: FAIL: a completion without a receive posted\n");
			goto out;
		}
		printf("datacheck: server posted no receive; no completion here\n");
		rc = 0;
		goto out;
	}
	for (uint32_t base = 0; base < p->steps; base += p->slots) {
		uint32_t n = p->steps - base < p->slots ? p->steps - base : p->slots;
		uint32_t round = base / p->slots;
		bool ok = true;
		for (uint32_t j = 0; j < n; j++) {
			dc_fill_canary(p->seed, round, TAG_RECV + (j << 4), buf + l->recv0 + (size_t)j * l->slot,
				       l->slot);
			dc_fill_canary(p->seed, round, TAG_WRITE + (j << 4),
				       buf + l->write0 + (size_t)j * l->slot, l->slot);
		}
		if (p->late_recv_ms) {
			/* --late-recv: go first, receives later; the client's SENDs meet RNR NAKs. */
			if (dc_send_all(r->fd, "G", 1))
				goto out;
			struct timespec ts = {p->late_recv_ms / 1000, (long)(p->late_recv_ms % 1000) * 1000000};
			nanosleep(&ts, NULL);
		}
		for (uint32_t j = 0; j < n; j++) {
			const struct dc_step *s = &r->steps[base + j];
			uint8_t *recv = buf + l->recv0 + (size_t)j * l->slot;
			struct ibv_sge sge = {(uint64_t)(uintptr_t)recv + s->recv_off,
					      (uint32_t)(l->slot - s->recv_off), r->ctx->mr->lkey};
			struct ibv_recv_wr wr = {.wr_id = base + j, .sg_list = &sge, .num_sge = 1}, *bad;
			if (ibv_post_recv(r->ctx->qp, &wr, &bad)) {
				fprintf(stderr, "datacheck: FAIL step %u: ibv_post_recv failed\n", base + j);
				give_up(r);
				goto out;
			}
		}
		if (!p->late_recv_ms && dc_send_all(r->fd, "G", 1))
			goto out;
		for (uint32_t j = 0; j < n; j++) {
			struct ibv_wc wc;
			const struct dc_step *s = &r->steps[base + j];
			if (dc_poll_one(r->ctx, r->fd, &wc)) {
				give_up(r);
				goto out;
			}
			if (check_server(r, round, base + j, j, &wc, canary, want))
				ok = false;
			if (s->op == DC_FAA)
				words[s->word] = s->expect_orig + s->add;
			else if (s->op == DC_CAS_HIT)
				words[s->word] = s->swap;
			r->count[s->op]++;
		}
		/* The atomic targets after the round (the client does not wait between steps). */
		if (dc_compare("atomic targets", base + n - 1, buf + l->words0, (uint8_t *)words,
			       sizeof(words)))
			ok = false;
		r->bytes_checked += sizeof(words);
		r->done += n;
		if (verdict(r, ok, 'D'))
			goto out;
	}
	/* Nothing wrote into the READ source, and the atomics ended where the plan says. */
	dc_fill_rsrc(p->seed, want, l->rsrc_len);
	if (dc_compare("READ source", p->steps, buf + l->rsrc0, want, l->rsrc_len) ||
	    memcmp(words, r->final_words, sizeof(words)) != 0) {
		fprintf(stderr, "datacheck: FAIL: the READ source or the final atomic values differ\n");
		goto out;
	}
	r->bytes_checked += l->rsrc_len;
	rc = 0;
out:
	free(canary);
	free(want);
	return rc;
}
